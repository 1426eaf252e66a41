// NanoDet-g through dnndetect against its reference runtime: TensorFlow.js in pure JavaScript
// running the published TF.js graph, and NanoDet's own rules applied to its outputs by a
// reference written in JavaScript (nanodet-reference.js), on the real photos of Debian's darknet
// package. The converter (tools/nanodet-to-torchscript.py) must give TF.js's six outputs within
// 1e-4 on the reference's own input tensors; the element (model=nanodet, then cudanms at NanoDet's
// IoU 0.6) the boxes NanoDet keeps: the same classes, IoU >= 0.99, scores within 1e-3. On a GPU,
// the CUDA backend keeps the CPU's boxes, and fp16 keeps fp32's.
//
// The reference needs node and the set-up's TensorFlow.js (tools/fetch-tfjs.sh), the rest the
// set-up's converted model; each test skips, visibly, without what it needs.
#include <glib/gstdio.h>
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>
#include <torch/script.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cudanms/nms.h"
#include "gstdnndetect.h"
#include "gst-plugin/cv_support.h"
#include "gst-plugin/video_frames.h"
#include "support/nanodet_model.h"
#include "torchmodel.h"

namespace cudanms::testing {
namespace {

constexpr int kAnchors[3] = {52 * 52, 26 * 26, 13 * 13};
constexpr int kAllAnchors = 3549, kClasses = 80, kDistribution = 44;
// NanoDet's COCO evaluation (score > 0.05, at most 100 boxes) and its demo's threshold.
const char *const kThresholds[] = {"0.05", "0.35"};

struct Kept {
  std::array<float, 4> box;
  float score;
  int cls;
  std::string label;
};

float iou(const std::array<float, 4> &a, const std::array<float, 4> &b) {
  const float w = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float h = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = w * h;
  const float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0;
}

std::vector<float> read_floats(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<float> out(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char *>(out.data()), static_cast<std::streamsize>(out.size() * 4));
  return out;
}

std::vector<Kept> read_kept(const std::string &path) {
  std::vector<Kept> out;
  JsonParser *parser = json_parser_new();
  if (json_parser_load_from_file(parser, path.c_str(), nullptr)) {
    JsonArray *rows = json_node_get_array(json_parser_get_root(parser));
    for (guint i = 0; i < json_array_get_length(rows); i++) {
      JsonArray *r = json_array_get_array_element(rows, i);
      Kept k;
      for (int c = 0; c < 4; c++) k.box[c] = json_array_get_double_element(r, c);
      k.score = json_array_get_double_element(r, 4);
      k.cls = json_array_get_int_element(r, 5);
      out.push_back(k);
    }
  }
  g_object_unref(parser);
  return out;
}

// The reference's results for every photo, made once for the test program: empty (and *why)
// when node, TensorFlow.js or the model is missing.
struct Photo {
  std::string name;
  cv::Mat bgr;
  std::vector<float> input, outputs;              // the reference's tensors
  std::map<std::string, std::vector<Kept>> kept;  // by threshold
};

const std::vector<Photo> &reference(std::string *why) {
  static std::string missing;
  static const std::vector<Photo> photos = [] {
    std::vector<Photo> out;
    if (!g_file_test((nanodet_folder() + "/nanodet.bin").c_str(), G_FILE_TEST_IS_REGULAR)) {
      missing = nanodet_folder() + " has no nanodet.bin: run tools/fetch-nanodet.sh";
      return out;
    }
    if (!g_file_test((tfjs_folder() + "/node_modules").c_str(), G_FILE_TEST_IS_DIR)) {
      missing = tfjs_folder() + " is missing: run tools/fetch-tfjs.sh (the README's set-up does)";
      return out;
    }
    gchar *node = g_find_program_in_path("node");
    if (!node) {
      missing = "node is missing (Debian package nodejs)";
      return out;
    }
    gchar *dir = g_dir_make_tmp("cudanms-nanodet-XXXXXX", nullptr);
    std::string command = std::string(node) + " " + CUDANMS_SOURCE_DIR +
                          "/tests/gst-plugin/dnn/nanodet-reference.js " + tfjs_folder() + " " +
                          nanodet_folder() + " " + dir + " " + kThresholds[0] + "," +
                          kThresholds[1];
    g_free(node);
    for (const char *name : kDarknetPhotos) {
      Photo p;
      p.name = name;
      p.bgr = darknet_photo(name);
      if (p.bgr.empty()) continue;
      cv::Mat rgb(p.bgr.size(), CV_8UC3);
      for (size_t i = 0; i < rgb.total(); i++)
        for (int c = 0; c < 3; c++) rgb.data[3 * i + c] = p.bgr.data[3 * i + 2 - c];
      const std::string raw = std::string(dir) + "/" + name + ".rgb";
      std::ofstream(raw, std::ios::binary)
          .write(reinterpret_cast<const char *>(rgb.data),
                 static_cast<std::streamsize>(rgb.total() * 3));
      command += " " + p.name + ":" + std::to_string(rgb.cols) + ":" + std::to_string(rgb.rows) +
                 ":" + raw;
      out.push_back(std::move(p));
    }
    std::printf("TF.js runs NanoDet on %zu photos (pure JavaScript: about 5 s each)\n", out.size());
    if (std::system(command.c_str()) != 0) {
      missing = "the reference failed: " + command;
      out.clear();
    }
    for (Photo &p : out) {
      const std::string base = std::string(dir) + "/" + p.name;
      p.input = read_floats(base + ".input");
      p.outputs = read_floats(base + ".outputs");
      for (const char *t : kThresholds) p.kept[t] = read_kept(base + "." + t + ".json");
      for (const char *suffix : {".rgb", ".input", ".outputs", ".0.05.json", ".0.35.json"})
        g_remove((base + suffix).c_str());
    }
    g_rmdir(dir);
    g_free(dir);
    return out;
  }();
  if (why) *why = missing;
  return photos;
}

#define SKIP_WITHOUT_REFERENCE()                          \
  std::string why_not;                                    \
  const std::vector<Photo> &photos = reference(&why_not); \
  if (photos.empty()) GTEST_SKIP() << why_not

// The boxes `element` (a launch description ending in cudanms) keeps on the photo, RGB in.
std::vector<Kept> kept_by(const std::string &element, const cv::Mat &bgr) {
  cv::Mat rgb(bgr.size(), CV_8UC3);
  for (size_t i = 0; i < rgb.total(); i++)
    for (int c = 0; c < 3; c++) rgb.data[3 * i + c] = bgr.data[3 * i + 2 - c];
  // Rows as GStreamer lays out RGB: each padded to 4 bytes (photos of odd width).
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_RGB, rgb.cols, rgb.rows);
  GstBuffer *in = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
  for (int y = 0; y < rgb.rows; y++)
    gst_buffer_fill(in, static_cast<gsize>(y) * GST_VIDEO_INFO_PLANE_STRIDE(&info, 0), rgb.ptr(y),
                    static_cast<gsize>(rgb.cols) * 3);
  GstHarness *h = harness_for(element, rgb, "RGB");
  GstBuffer *out = gst_harness_push_and_pull(h, in);
  std::vector<Kept> kept;
  const GstCudaNmsResultMeta *r = out ? gst_buffer_get_cuda_nms_result_meta(out) : nullptr;
  EXPECT_NE(r, nullptr) << element;
  for (guint i = 0; r && i < r->n_kept; i++) {
    Kept k;
    for (int c = 0; c < 4; c++) k.box[c] = r->boxes[4 * i + c];
    k.score = r->scores[i];
    k.cls = r->class_ids[i];
    k.label = r->labels && r->labels[i] ? r->labels[i] : "";
    kept.push_back(k);
  }
  if (out) gst_buffer_unref(out);
  gst_harness_teardown(h);
  return kept;
}

// How closely two runs must agree: IoU and scores, and how near the threshold (or the last score
// a cap of 100 kept) and NMS's IoU 0.6 the noise may decide a box.
struct Agreement {
  float min_iou = 0.99f, score = 1e-3f, nms_iou = 0.01f;
};

// `mine` against `theirs`: each box of either has one of the other's of its class at IoU >=
// min_iou with a score within tolerance, except where float noise may decide: a box scoring
// within the tolerance of the threshold or of a cap's last box, or one that a kept box of its
// class overlaps at IoU within nms_iou of 0.6. Those are printed; the rest fail.
void expect_same_boxes(const std::vector<Kept> &mine, const std::vector<Kept> &theirs,
                       float threshold, const std::string &what, Agreement a = Agreement()) {
  const auto borderline = [&](const Kept &k, const std::vector<Kept> &side) {
    if (k.score < threshold + a.score) return "at the threshold";
    if (side.size() == 100 && k.score < side.back().score + a.score) return "at the cap of 100";
    for (const Kept &o : side) {
      const float v = iou(o.box, k.box);
      if (o.cls == k.cls && &o != &k && std::fabs(v - 0.6f) <= a.nms_iou) return "at NMS's 0.6";
    }
    return "";
  };
  const auto match = [&](const std::vector<Kept> &from, const std::vector<Kept> &in,
                         const char *side) {
    for (const Kept &k : from) {
      const Kept *best = nullptr;
      for (const Kept &o : in)
        if (o.cls == k.cls && (!best || iou(o.box, k.box) > iou(best->box, k.box))) best = &o;
      if (best && iou(best->box, k.box) >= a.min_iou && std::fabs(best->score - k.score) <= a.score)
        continue;
      const char *why = borderline(k, from);
      if (!*why && best) why = borderline(*best, in);
      if (*why) {
        std::printf("%s: %s's class %d box at %.4f unmatched, %s\n", what.c_str(), side, k.cls,
                    k.score, why);
        continue;
      }
      ADD_FAILURE() << what << ": " << side << "'s class " << k.cls << " box (" << k.box[0] << ", "
                    << k.box[1] << ", " << k.box[2] << ", " << k.box[3] << ") score " << k.score
                    << " has no match"
                    << (best ? " (closest IoU " + std::to_string(iou(best->box, k.box)) +
                                   ", score " + std::to_string(best->score) + ")"
                             : "");
    }
  };
  match(theirs, mine, "the reference");
  match(mine, theirs, "the element");
}

std::string nanodet_chain(const std::string &backend, float threshold,
                          const std::string &extra = "") {
  char text[32];
  g_ascii_formatd(text, sizeof text, "%g", threshold);
  return "dnndetect model=nanodet backend=" + backend + " score-threshold=" + text + " " + extra +
         " ! cudanms iou-threshold=0.6 max-detections=100 backend=" + backend;
}

class NanoDet : public ::testing::Test {
 protected:
  void SetUp() override {
    init_cv_elements_once();
    static const bool registered = GST_ELEMENT_REGISTER(dnndetect, nullptr);
    ASSERT_TRUE(registered);
  }
};

// The converted network on the reference's own input tensor of each photo: all six outputs
// within 1e-4 of TF.js's (both float32; LibTorch on the CPU).
TEST_F(NanoDet, TheConverterEqualsTfjsOnRealPhotos) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  SKIP_WITHOUT_REFERENCE();
  ASSERT_GE(photos.size(), 5u);
  torch::jit::Module module = torch::jit::load(torchscript_nanodet());
  torch::NoGradGuard no_grad;
  for (const Photo &p : photos) {
    ASSERT_EQ(p.input.size(), 3u * 416 * 416) << p.name;
    ASSERT_EQ(p.outputs.size(), static_cast<size_t>(kAllAnchors) * (kClasses + kDistribution));
    const at::Tensor input =
        torch::from_blob(const_cast<float *>(p.input.data()), {1, 3, 416, 416}).clone();
    const auto outputs = module.forward({input}).toTuple()->elements();
    const at::Tensor scores = outputs[0].toTensor().contiguous();
    const at::Tensor boxes = outputs[1].toTensor().contiguous();
    ASSERT_EQ(scores.sizes(), (std::vector<int64_t>{1, kAllAnchors, kClasses}));
    ASSERT_EQ(boxes.sizes(), (std::vector<int64_t>{1, kAllAnchors, kDistribution}));
    // TF.js's six, in the reference's order: scores of strides 8, 16, 32, then distributions.
    const float *theirs = p.outputs.data();
    double worst[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
      const int width = t == 0 ? kClasses : kDistribution;
      const float *ours = (t == 0 ? scores : boxes).data_ptr<float>();
      for (size_t i = 0; i < static_cast<size_t>(kAllAnchors) * width; i++)
        worst[t] = std::max(worst[t], static_cast<double>(std::fabs(ours[i] - theirs[i])));
      theirs += static_cast<size_t>(kAllAnchors) * width;
    }
    std::printf("%-8s largest difference from TF.js: scores %.2g, box logits %.2g\n",
                p.name.c_str(), worst[0], worst[1]);
    EXPECT_LE(worst[0], 1e-4) << p.name;
    EXPECT_LE(worst[1], 1e-4) << p.name;
  }
}

// model=nanodet on the CPU, then cudanms at IoU 0.6 and 100 boxes: NanoDet's kept boxes from
// TF.js's outputs, at its evaluation threshold (0.05) and its demo's (0.35), photo by photo.
TEST_F(NanoDet, KeptBoxesEqualNanoDetsRulesOnTfjsOutputs) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  SKIP_WITHOUT_REFERENCE();
  size_t compared = 0, people = 0;
  for (const char *t : kThresholds) {
    const float threshold = static_cast<float>(g_ascii_strtod(t, nullptr));
    for (const Photo &p : photos) {
      const std::vector<Kept> mine = kept_by(nanodet_chain("cpu", threshold), p.bgr);
      const std::vector<Kept> &theirs = p.kept.at(t);
      std::printf("%-8s at %s: %zu boxes kept, the reference %zu\n", p.name.c_str(), t, mine.size(),
                  theirs.size());
      expect_same_boxes(mine, theirs, threshold, p.name + " at " + t);
      compared += theirs.size();
      for (const Kept &k : mine) {
        if (k.cls == 0) {
          people++;
          EXPECT_EQ(k.label, "person") << "COCO's names are announced";
        }
      }
    }
  }
  EXPECT_GT(compared, 50u);
  EXPECT_GT(people, 0u) << "person.jpg and kite.jpg hold people";
}

// classes=person,car keeps exactly the boxes of those classes that every class gives.
TEST_F(NanoDet, ClassesKeepsOnlyTheNamedOnes) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  SKIP_WITHOUT_DARKNET_PHOTOS();
  for (const char *name : {"person", "dog"}) {  // people, a dog, a horse; a dog, a bike, a car
    const cv::Mat photo = darknet_photo(name);
    const std::vector<Kept> all = kept_by(nanodet_chain("cpu", 0.3f), photo);
    const std::vector<Kept> some =
        kept_by(nanodet_chain("cpu", 0.3f, "classes=\" Person, car\""), photo);
    std::vector<Kept> expected;
    for (const Kept &k : all)
      if (k.cls == 0 || k.cls == 2) expected.push_back(k);
    EXPECT_GT(all.size(), expected.size()) << name << " has boxes of other classes";
    ASSERT_EQ(some.size(), expected.size()) << name;
    for (size_t i = 0; i < some.size(); i++) {
      EXPECT_EQ(some[i].cls, expected[i].cls);
      EXPECT_EQ(some[i].box, expected[i].box);
      EXPECT_EQ(some[i].score, expected[i].score);
    }
  }
}

TEST_F(NanoDet, BadSettingsAndModelsAreErrorsAtStart) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  std::string debug;
  const std::string unknown =
      start_error("dnndetect model=nanodet backend=cpu classes=person,persn", &debug);
  EXPECT_NE(unknown.find("Invalid classes \"person,persn\": unknown class \"persn\""),
            std::string::npos)
      << unknown;
  EXPECT_NE(debug.find("the classes are: person, bicycle, car"), std::string::npos) << debug;
  // A file that is no TorchScript, and a network whose outputs are not NanoDet's.
  const std::string garbage = std::string(g_get_tmp_dir()) + "/cudanms-not-a-network.pt";
  g_file_set_contents(garbage.c_str(), "not a network", -1, nullptr);
  const std::string text =
      start_error("dnndetect decoder=nanodet backend=cpu model=" + garbage, &debug);
  EXPECT_NE(text.find("is not a TorchScript network"), std::string::npos) << text;
  g_remove(garbage.c_str());
  const std::string tiny = std::string(g_get_tmp_dir()) + "/cudanms-tiny-yolo-nanodet.pt";
  const std::string args =
      std::string(CUDANMS_SOURCE_DIR) + "/tests/gst-plugin/dnn/make-tiny-yolo.py " + tiny + " 416 80";
  // Debian's PyTorch here; the PyTorch on PATH on the GPU host, whose LibTorch loads it.
  if (std::system(("/usr/bin/python3 " + args + " 2>/dev/null || python3 " + args).c_str()) == 0) {
    const std::string wrong =
        start_error("dnndetect decoder=nanodet backend=cpu model=" + tiny, &debug);
    EXPECT_NE(wrong.find("does not fit decoder nanodet"), std::string::npos) << wrong;
    EXPECT_NE(debug.find("NanoDet outputs must be [B, 3549, classes]"), std::string::npos) << debug;
    g_remove(tiny.c_str());
  }
  // The labels file names the classes for classes= with decoder=yolo; without one, it says so.
  EXPECT_NE(start_error("dnndetect decoder=yolo model=x.pt classes=car").find("labels-file names"),
            std::string::npos);
}

// ---- On the GPU ----------------------------------------------------------------------------

class CudaNanoDet : public NanoDet {
 protected:
  void SetUp() override {
    NanoDet::SetUp();
    std::string why;
    if (!cudanms::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    if (!TorchModel::cuda_usable(0)) GTEST_SKIP() << "no CUDA device: LibTorch has no CUDA";
  }
};

// The whole chain on the GPU (pre-processing, the network in fp32 with cuDNN's TF32
// convolutions, the decoding, NMS) keeps the CPU's boxes on every photo.
TEST_F(CudaNanoDet, TheGpuKeepsTheCpusBoxes) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  SKIP_WITHOUT_DARKNET_PHOTOS();
  size_t compared = 0;
  for (const char *t : kThresholds) {
    const float threshold = static_cast<float>(g_ascii_strtod(t, nullptr));
    for (const char *name : kDarknetPhotos) {
      const cv::Mat photo = darknet_photo(name);
      const std::vector<Kept> cpu = kept_by(nanodet_chain("cpu", threshold), photo);
      const std::vector<Kept> gpu = kept_by(nanodet_chain("cuda", threshold), photo);
      std::printf("%-8s at %s: %zu boxes on the GPU, %zu on the CPU\n", name, t, gpu.size(),
                  cpu.size());
      expect_same_boxes(gpu, cpu, threshold, std::string(name) + " at " + t);
      compared += cpu.size();
    }
  }
  EXPECT_GT(compared, 50u);
}

// precision=fp16 against fp32 on the GPU, at the demo's threshold: every box of either has one of
// the other's of its class at IoU >= 0.98 (scores within 0.02), boxes near the threshold or NMS's
// IoU aside; the worst IoU and score difference are printed.
TEST_F(CudaNanoDet, Fp16KeepsFp32sBoxes) {
  SKIP_WITHOUT_TORCHSCRIPT_NANODET();
  SKIP_WITHOUT_DARKNET_PHOTOS();
  size_t compared = 0;
  for (const char *name : kDarknetPhotos) {
    const cv::Mat photo = darknet_photo(name);
    const std::vector<Kept> fp32 = kept_by(nanodet_chain("cuda", 0.35f, "precision=fp32"), photo);
    const std::vector<Kept> fp16 = kept_by(nanodet_chain("cuda", 0.35f, "precision=fp16"), photo);
    float worst_iou = 1, worst_score = 0;
    for (const Kept &k : fp32) {
      for (const Kept &o : fp16) {
        if (o.cls == k.cls && iou(o.box, k.box) > 0.9f) {
          worst_iou = std::min(worst_iou, iou(o.box, k.box));
          worst_score = std::max(worst_score, std::fabs(o.score - k.score));
        }
      }
    }
    std::printf("%-8s fp16 %zu boxes, fp32 %zu: worst IoU %.4f, score difference %.4f\n", name,
                fp16.size(), fp32.size(), worst_iou, worst_score);
    expect_same_boxes(fp16, fp32, 0.35f, std::string(name) + " fp16", {0.98f, 0.02f, 0.02f});
    compared += fp32.size();
  }
  EXPECT_GT(compared, 10u);
}

}  // namespace
}  // namespace cudanms::testing
