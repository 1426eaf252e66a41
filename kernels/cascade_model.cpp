// Reads OpenCV's cascade XML with OpenCV's own cv::FileStorage, as
// CascadeClassifierImpl::Data::read and the feature evaluators' read() do, and checks what
// OpenCV trusts: every index in range and every feature inside the window, so that evaluation
// can never read outside an integral image or loop in a tree.
#include <opencv2/core.hpp>
#include <string>

#include "cudanms/bounded_file.h"
#include "cudanms/cascade.h"

namespace cudanms::cascade {
namespace {

constexpr float kThresholdEps = 1e-5f;  // CascadeClassifierImpl::Data::read's THRESHOLD_EPS
constexpr int kLbpCategories = 256;
constexpr int kSubsetWords = kLbpCategories / 32;

std::string base_name(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

bool inside(const Model::Rect &r, int w, int h) {
  return r.x >= 0 && r.y >= 0 && r.width >= 0 && r.height >= 0 && r.x + r.width <= w &&
         r.y + r.height <= h;
}

// A tilted rectangle spans x - height .. x + width and y .. y + width + height.
bool tilted_inside(const Model::Rect &r, int w, int h) {
  return r.width >= 0 && r.height >= 0 && r.y >= 0 && r.x - r.height >= 0 && r.x + r.width <= w &&
         r.y + r.width + r.height <= h;
}

// Each reader returns an empty string when what it read is usable, else what is wrong with it.

// The stage and feature types, the window and featureParams.
std::string read_header(const cv::FileNode &root, Model *m) {
  if (root.empty() || !root.isMap()) return "no cascade in the file";
  if (static_cast<std::string>(root["stageType"]) != "BOOST") {
    if (!root["stages"].empty() && root["featureType"].empty() && root["size"].isSeq())
      return "the pre-2.0 haar format; convert it with opencv_traincascade's converter";
    return "stageType is not BOOST";
  }
  const std::string type = static_cast<std::string>(root["featureType"]);
  if (type == "HAAR") {
    m->feature_type = FeatureType::kHaar;
  } else if (type == "LBP") {
    m->feature_type = FeatureType::kLbp;
  } else {
    return "featureType '" + type + "' is not supported (HAAR or LBP)";
  }
  m->window_width = static_cast<int>(root["width"]);
  m->window_height = static_cast<int>(root["height"]);
  if (m->window_width < 3 || m->window_height < 3 || m->window_width > 4096 ||
      m->window_height > 4096)
    return "window size out of range";
  const cv::FileNode params = root["featureParams"];
  if (params.empty()) return "no featureParams";
  const int categories = static_cast<int>(params["maxCatCount"]);
  const bool lbp = m->feature_type == FeatureType::kLbp;
  if (lbp ? categories != kLbpCategories : categories != 0)
    return "maxCatCount " + std::to_string(categories) + " does not fit the feature type";
  return "";
}

// One weak classifier's tree: its nodes (an LBP node's subset, a Haar node's threshold) and its
// leaves; *max_nodes grows to its node count.
std::string read_tree(const cv::FileNode &w, bool lbp, Model *m, int *max_nodes) {
  const int subset_words = lbp ? kSubsetWords : 0;
  const size_t node_step = 3 + (lbp ? subset_words : 1);
  const cv::FileNode internal = w["internalNodes"];
  const cv::FileNode leaf_values = w["leafValues"];
  if (internal.empty() || leaf_values.empty()) return "a tree without nodes or leaves";
  if (internal.size() % node_step != 0) return "internalNodes of the wrong length";
  const int count = static_cast<int>(internal.size() / node_step);
  if (count < 1 || static_cast<int>(leaf_values.size()) != count + 1)
    return "a tree whose leaf count is not its node count + 1";
  *max_nodes = std::max(*max_nodes, count);
  m->trees.push_back(
      {static_cast<int32_t>(m->nodes.size()), static_cast<int32_t>(m->leaves.size())});
  auto it = internal.begin();
  for (int k = 0; k < count; ++k) {
    Model::Node node{};
    node.left = static_cast<int>(*it), ++it;
    node.right = static_cast<int>(*it), ++it;
    node.feature = static_cast<int>(*it), ++it;
    if (lbp) {
      for (int j = 0; j < subset_words; ++j, ++it) m->subsets.push_back(static_cast<int>(*it));
    } else {
      node.threshold = static_cast<float>(*it), ++it;
    }
    // Children only forward, leaves within the tree: evaluation always ends.
    for (const int child : {node.left, node.right}) {
      if (child > 0 ? child <= k || child >= count : -child > count)
        return "a tree node with a child out of range";
    }
    m->nodes.push_back(node);
  }
  for (const cv::FileNode &v : leaf_values) m->leaves.push_back(static_cast<float>(v));
  return "";
}

std::string read_stages(const cv::FileNode &stages, bool lbp, Model *m) {
  if (stages.empty() || !stages.isSeq()) return "no stages";
  int max_nodes = 0;
  for (const cv::FileNode &fs : stages) {
    Model::Stage stage{};
    stage.threshold = static_cast<float>(fs["stageThreshold"]) - kThresholdEps;
    const cv::FileNode weaks = fs["weakClassifiers"];
    if (weaks.empty() || !weaks.isSeq()) return "a stage without weakClassifiers";
    stage.first_tree = static_cast<int32_t>(m->trees.size());
    stage.trees = static_cast<int32_t>(weaks.size());
    for (const cv::FileNode &w : weaks) {
      const std::string why = read_tree(w, lbp, m, &max_nodes);
      if (!why.empty()) return why;
    }
    m->stages.push_back(stage);
  }
  // predictOrderedStump / predictCategoricalStump take a one-node tree's leaves in file order
  // whatever its child indices say.
  if (max_nodes == 1) {
    for (Model::Node &node : m->nodes) node.left = 0, node.right = -1;
  }
  return "";
}

// One feature: an LBP rect (its 3x3 grid inside the window), or 1 to 3 weighted Haar rects.
std::string read_feature(const cv::FileNode &f, bool lbp, Model *m) {
  if (lbp) {
    const cv::FileNode r = f["rect"];
    if (!r.isSeq() || r.size() != 4) return "an LBP feature without a 4-number rect";
    Model::Rect rect{static_cast<int>(r[0]), static_cast<int>(r[1]), static_cast<int>(r[2]),
                     static_cast<int>(r[3])};
    const Model::Rect grid{rect.x, rect.y, 3 * rect.width, 3 * rect.height};
    if (!inside(grid, m->window_width, m->window_height))
      return "an LBP feature reaches outside the window";
    m->lbp_features.push_back(rect);
    return "";
  }
  Model::HaarFeature hf{};
  const cv::FileNode rects = f["rects"];
  if (!rects.isSeq() || rects.size() < 1 || rects.size() > 3)
    return "a Haar feature without 1 to 3 rects";
  hf.tilted = static_cast<int>(f["tilted"]) != 0;
  int k = 0;
  for (const cv::FileNode &r : rects) {
    if (!r.isSeq() || r.size() != 5) return "a Haar rect that is not 'x y w h weight'";
    hf.rects[k] = {static_cast<int>(r[0]), static_cast<int>(r[1]), static_cast<int>(r[2]),
                   static_cast<int>(r[3])};
    hf.weights[k] = static_cast<float>(r[4]);
    const bool ok = hf.tilted ? tilted_inside(hf.rects[k], m->window_width, m->window_height)
                              : inside(hf.rects[k], m->window_width, m->window_height);
    if (!ok) return "a Haar feature reaches outside the window";
    ++k;
  }
  m->has_tilted_features = m->has_tilted_features || hf.tilted;
  m->haar_features.push_back(hf);
  return "";
}

std::string read_cascade(const cv::FileNode &root, Model *m) {
  std::string why = read_header(root, m);
  if (!why.empty()) return why;
  const bool lbp = m->feature_type == FeatureType::kLbp;
  why = read_stages(root["stages"], lbp, m);
  if (!why.empty()) return why;
  const cv::FileNode features = root["features"];
  if (features.empty() || !features.isSeq()) return "no features";
  for (const cv::FileNode &f : features) {
    why = read_feature(f, lbp, m);
    if (!why.empty()) return why;
  }
  const int32_t feature_count =
      static_cast<int32_t>(lbp ? m->lbp_features.size() : m->haar_features.size());
  for (const Model::Node &node : m->nodes) {
    if (node.feature < 0 || node.feature >= feature_count)
      return "a node names a feature that does not exist";
  }
  return "";
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::string &path, Status *status) {
  auto model = std::make_shared<Model>();
  std::string problem;
  if (!check_bounded_file(path, kModelFileLimit, &problem)) {
    *status = Status::Error("cannot read cascade '" + path + "': " + problem);
    return nullptr;
  }
  try {
    cv::FileStorage fs(path, cv::FileStorage::READ);
    if (!fs.isOpened()) {
      *status = Status::Error("cannot read cascade '" + path + "'");
      return nullptr;
    }
    problem = read_cascade(fs.getFirstTopLevelNode(), model.get());
  } catch (const cv::Exception &e) {
    problem = "not a readable cascade file (" + std::string(e.what()) + ")";
  } catch (const std::bad_alloc &) {
    problem = "out of memory";
  }
  if (!problem.empty()) {
    *status = Status::Error("cascade '" + path + "': " + problem);
    return nullptr;
  }
  model->name = base_name(path);
  *status = Status::Ok();
  return model;
}

}  // namespace cudanms::cascade
