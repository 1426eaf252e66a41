#include "bench_peers.h"

#include <algorithm>
#include <numeric>

#ifdef CUDANMS_HAVE_OPENCV
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/objdetect.hpp>
#include <tuple>
#endif

namespace cudanms::tools {

#ifdef CUDANMS_HAVE_OPENCV

// NMSBoxesBatched arrived in OpenCV 4.7.
#define CUDANMS_OPENCV_BATCHED \
  (CV_VERSION_MAJOR > 4 || (CV_VERSION_MAJOR == 4 && CV_VERSION_MINOR >= 7))

namespace {

class OpenCvNms final : public PeerNms {
 public:
  OpenCvNms(const CandidateSet &set, const Params &params)
      : threshold_(params.threshold),
        // NMSBoxes asserts a score threshold >= 0 and keeps scores strictly above it, where
        // cudanms keeps those at or above; the generated scores are never exactly 0.
        score_threshold_(std::max(params.score_threshold, 0.0f)),
        per_class_(!params.class_agnostic),
        scores_(set.scores),
        classes_(set.classes) {
    boxes_.reserve(set.size());
    for (size_t i = 0; i < set.size(); ++i) {
      const float *b = &set.boxes[4 * i];
      // In double, as OpenCV computes the overlap: the widths are exact.
      boxes_.emplace_back(b[0], b[1], double{b[2]} - b[0], double{b[3]} - b[1]);
    }
  }

  Status run(std::vector<uint32_t> *kept) override {
    try {
      nms(kept);
    } catch (const cv::Exception &e) {
      return Status::Error(std::string("OpenCV: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  void nms(std::vector<uint32_t> *kept) {
    kept->clear();
    if (!per_class_) {
      cv::dnn::NMSBoxes(boxes_, scores_, score_threshold_, threshold_, indices_);
      kept->assign(indices_.begin(), indices_.end());
      return;
    }
#if CUDANMS_OPENCV_BATCHED
    cv::dnn::NMSBoxesBatched(boxes_, scores_, classes_, score_threshold_, threshold_, indices_);
    kept->assign(indices_.begin(), indices_.end());
#else
    // What a user of OpenCV 4.6 writes: split by class, one NMSBoxes each, merge by score.
    order_.resize(scores_.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](uint32_t a, uint32_t b) { return classes_[a] < classes_[b]; });
    for (size_t begin = 0, end; begin < order_.size(); begin = end) {
      class_boxes_.clear();
      class_scores_.clear();
      for (end = begin; end < order_.size() && classes_[order_[end]] == classes_[order_[begin]];
           ++end) {
        class_boxes_.push_back(boxes_[order_[end]]);
        class_scores_.push_back(scores_[order_[end]]);
      }
      cv::dnn::NMSBoxes(class_boxes_, class_scores_, score_threshold_, threshold_, indices_);
      for (int i : indices_) kept->push_back(order_[begin + i]);
    }
    std::sort(kept->begin(), kept->end(), [&](uint32_t a, uint32_t b) {
      return scores_[a] != scores_[b] ? scores_[a] > scores_[b] : a < b;
    });
#endif
  }

  float threshold_;
  float score_threshold_;
  bool per_class_;
  std::vector<cv::Rect2d> boxes_;
  std::vector<float> scores_;
  std::vector<int> classes_;
  std::vector<int> indices_;
  // Per-class scratch, kept between runs so that they do not time the allocator.
  std::vector<uint32_t> order_;
  std::vector<cv::Rect2d> class_boxes_;
  std::vector<float> class_scores_;
};

// cv::groupRectangles with the scores as level weights, as detectMultiScale groups. OpenCV
// returns rectangles: each is named by the candidate whose class this library reports with the
// same rectangle and score (from a CPU run made here, untimed), so that the check compares the
// two; a rectangle this library does not report has no index and counts as a difference.
class OpenCvGroup final : public PeerNms {
 public:
  OpenCvGroup(const CandidateSet &set, const Params &params, const Result &ours)
      : threshold_(static_cast<int>(params.min_neighbors)), eps_(params.group_eps) {
    for (size_t i = 0; i < set.size(); ++i) {
      const float *b = &set.boxes[4 * i];
      const int x = cvRound(b[0]), y = cvRound(b[1]);
      rects_.emplace_back(x, y, cvRound(b[2]) - x, cvRound(b[3]) - y);
      weights_.push_back(set.scores[i]);
    }
    for (size_t k = 0; k < ours.kept.size(); ++k) {
      const float *b = &ours.kept_boxes[4 * k];
      indices_[key(cv::Rect(int(b[0]), int(b[1]), int(b[2] - b[0]), int(b[3] - b[1])),
                   ours.kept_scores[k])] = {k, ours.kept[k]};
    }
  }

  Status run(std::vector<uint32_t> *kept) override {
    try {
      rects_out_ = rects_;
      weights_out_ = weights_;
      levels_out_.assign(rects_.size(), 1);
      cv::groupRectangles(rects_out_, levels_out_, weights_out_, threshold_, eps_);
    } catch (const cv::Exception &e) {
      return Status::Error(std::string("OpenCV: ") + e.what());
    }
    named_.clear();
    for (size_t k = 0; k < rects_out_.size(); ++k) {
      const auto found = indices_.find(key(rects_out_[k], float(weights_out_[k])));
      named_.push_back(found == indices_.end() ? std::pair{SIZE_MAX, UINT32_MAX} : found->second);
    }
    std::sort(named_.begin(), named_.end());  // this library's order
    kept->clear();
    for (const auto &named : named_) kept->push_back(named.second);
    return Status::Ok();
  }

 private:
  using Key = std::tuple<int, int, int, int, float>;
  static Key key(const cv::Rect &r, float score) { return {r.x, r.y, r.width, r.height, score}; }

  int threshold_;
  double eps_;
  std::vector<cv::Rect> rects_, rects_out_;
  std::vector<double> weights_, weights_out_;
  std::vector<int> levels_out_;
  std::map<Key, std::pair<size_t, uint32_t>> indices_;  // rectangle -> (place, index) of ours
  std::vector<std::pair<size_t, uint32_t>> named_;
};

}  // namespace

std::string opencv_version() { return CV_VERSION; }

std::string opencv_call(const Params &params) {
  if (params.method == Method::kGroup) return "cv::groupRectangles";
  if (params.class_agnostic) return "cv::dnn::NMSBoxes";
  return CUDANMS_OPENCV_BATCHED ? "cv::dnn::NMSBoxesBatched" : "cv::dnn::NMSBoxes per class";
}

std::unique_ptr<PeerNms> make_opencv_nms(const CandidateSet &candidates, const Params &params,
                                         std::string *why) {
  if (params.method == Method::kGroup) {
    if (!params.class_agnostic || candidates.size() > params.max_candidates) {
      *why = "cv::groupRectangles groups one class, all windows";
      return nullptr;
    }
    Status status;
    auto cpu = Context::create({Backend::kCpu}, &status);
    Result ours;
    if (status.ok()) status = cpu->run(candidates.view(), params, &ours);
    if (!status.ok()) {
      *why = status.message();
      return nullptr;
    }
    return std::make_unique<OpenCvGroup>(candidates, params, ours);
  }
  if (params.method != Method::kGreedy || params.overlap != Overlap::kIoU) {
    *why = "OpenCV has greedy IoU NMS and rectangle grouping only";
    return nullptr;
  }
  if (candidates.size() > params.max_candidates) {
    *why = "OpenCV has no Dmax: all candidates must fit";
    return nullptr;
  }
  return std::make_unique<OpenCvNms>(candidates, params);
}

#else

std::string opencv_version() { return {}; }

std::string opencv_call(const Params &) { return {}; }

std::unique_ptr<PeerNms> make_opencv_nms(const CandidateSet &, const Params &, std::string *why) {
  *why = "built without OpenCV (pkg-config opencv4 not found)";
  return nullptr;
}

#endif

}  // namespace cudanms::tools
