// blazeface, the element on real video (Debian opencv-doc's Megamind.avi; its anchors and
// decoding are the DNN library's, checked by hand in tests/kernels/test_dnn.cpp): its raw
// anchors, merged by cudanms
// method=weighted, give a box on every face the Haar cascade finds on the same frame. Also: the
// formats it takes, and a missing or invalid model as an error at start. The model comes from
// tools/fetch-blazeface.sh (the README's set-up runs it); without it those tests skip.
#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>
#include <string>
#include <vector>

#include "gst-plugin/cv_support.h"
#include "gst-plugin/video_frames.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

using Box = std::array<float, 4>;

float iou(const Box &a, const Box &b) {
  const float w = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float h = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = w * h;
  return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter);
}

class BlazeFace : public ::testing::Test {
 protected:
  void SetUp() override { init_cv_elements_once(); }
};

std::vector<Box> boxes_of(const gfloat *boxes, guint n) {
  std::vector<Box> out;
  for (guint i = 0; i < n; i++)
    out.push_back({boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3]});
  return out;
}

// The acceptance test of the DNN detector, on real frames: where the Haar frontal-face cascade
// (alt2, cudacascade's default), grouped as OpenCV groups it, finds one face, cudanms
// method=weighted keeps a box on it (IoU >= 0.5). The frames are spread over the clip's first
// six seconds; elsewhere the cascade also takes the boy's hair for a face (frames 102-142), or
// frames the face larger than BlazeFace does (IoU 0.37-0.49 around frames 11-27 and 78-85),
// which is the cascade's doing, not the detector's. Prints the candidates per frame and the
// detector's time per frame over all 150 frames.
TEST_F(BlazeFace, KeptBoxOnTheHaarFaceOfMegamind) {
  const std::string cascade_file =
      "/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml";
  SKIP_WITHOUT_FILE(opencv_sample("Megamind.avi"), "opencv-doc");
  SKIP_WITHOUT_FILE(cascade_file, "opencv-data");
  SKIP_WITHOUT_BLAZEFACE_MODEL();
  const std::vector<cv::Mat> frames = megamind_frames(150);
  ASSERT_EQ(frames.size(), 150u);
  cv::CascadeClassifier haar(cascade_file);
  ASSERT_FALSE(haar.empty());
  const std::vector<size_t> checked = {1, 45, 60, 90, 100, 123, 149};

  GstHarness *detector = harness_for("blazeface", frames[0]);
  GstHarness *nms = harness_for("cudanms backend=cpu method=weighted iou-threshold=0.3", frames[0]);
  std::vector<double> detector_ms;
  size_t candidates = 0, most = 0, kept = 0;
  for (size_t i = 0; i < frames.size(); i++) {
    const auto start = std::chrono::steady_clock::now();
    GstBuffer *out = gst_harness_push_and_pull(detector, buffer_of(frames[i]));
    detector_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    ASSERT_NE(out, nullptr);
    const GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(out);
    ASSERT_NE(c, nullptr) << "frame " << i << ": every frame gets a candidates meta";
    candidates += c->n;
    most = std::max<size_t>(most, c->n);
    for (guint k = 0; k < c->n; k++) {
      EXPECT_GE(c->scores[k], 0.5f);
      EXPECT_LE(c->scores[k], 1.0f);
    }
    GstBuffer *result = gst_harness_push_and_pull(nms, out);
    ASSERT_NE(result, nullptr);
    std::unique_ptr<GstBuffer, decltype(&gst_buffer_unref)> own_result(result, gst_buffer_unref);
    const GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(result);
    ASSERT_NE(r, nullptr);
    const std::vector<Box> boxes = boxes_of(r->boxes, r->n_kept);
    kept += boxes.size();
    if (std::find(checked.begin(), checked.end(), i) == checked.end()) continue;

    cv::Mat gray;
    cv::cvtColor(frames[i], gray, cv::COLOR_BGR2GRAY);
    cv::equalizeHist(gray, gray);
    std::vector<cv::Rect> faces;
    haar.detectMultiScale(gray, faces, 1.1, 3, 0, cv::Size(100, 100));
    ASSERT_EQ(faces.size(), 1u) << "frame " << i << " shows one face, and the cascade finds it";
    const cv::Rect &f = faces[0];
    const Box face = {float(f.x), float(f.y), float(f.x + f.width), float(f.y + f.height)};
    float best = 0;
    for (const Box &b : boxes) best = std::max(best, iou(face, b));
    EXPECT_GE(best, 0.5f) << "frame " << i << ": Haar face " << f << ", " << boxes.size()
                          << " kept boxes";
    EXPECT_LE(boxes.size(), 2u) << "frame " << i << ": one box per face";
    // The face's merged keypoints: both eyes inside the box, the right one (the subject's) on
    // the image's left, above the mouth.
    ASSERT_EQ(r->points_per_box, 6u);
    for (guint k = 0; k < r->n_kept; k++) {
      const float *p = r->points + 12 * k;
      const float *b = r->boxes + 4 * k;
      if (iou(face, boxes[k]) < 0.5f) continue;
      for (int e = 0; e < 2; e++) {
        EXPECT_TRUE(p[2 * e] > b[0] && p[2 * e] < b[2] && p[2 * e + 1] > b[1] &&
                    p[2 * e + 1] < b[3])
            << "frame " << i << ": eye " << e << " outside its box";
      }
      EXPECT_LT(p[0], p[2]) << "frame " << i;
      EXPECT_LT(p[1], p[7]) << "frame " << i;
      EXPECT_LT(p[3], p[7]) << "frame " << i;
    }
  }
  gst_harness_teardown(detector);
  gst_harness_teardown(nms);

  std::sort(detector_ms.begin(), detector_ms.end());
  const size_t n = frames.size();
  std::printf(
      "blazeface on Megamind.avi (720x528), %zu frames: candidates %.1f/frame (max %zu), kept "
      "%.2f/frame by cudanms method=weighted; detector %.2f ms/frame p50, %.2f ms p99\n",
      n, double(candidates) / n, most, double(kept) / n, detector_ms[n / 2],
      detector_ms[n * 99 / 100]);
  EXPECT_GE(candidates, n);         // a handful of anchors on a face
  EXPECT_LT(kept * 3, candidates);  // merged
}

// The same frame in any of the formats it takes: the same letterboxed input, so the same
// candidates and keypoints, bit for bit.
TEST_F(BlazeFace, AcceptsTheRgbFormats) {
  SKIP_WITHOUT_FILE(opencv_sample("Megamind.avi"), "opencv-doc");
  SKIP_WITHOUT_BLAZEFACE_MODEL();
  const std::vector<cv::Mat> frames = megamind_frames(101);
  ASSERT_EQ(frames.size(), 101u) << "Megamind.avi did not decode";
  const cv::Mat bgr = frames.back();
  const std::pair<const char *, int> formats[] = {{"BGR", -1},
                                                  {"RGB", cv::COLOR_BGR2RGB},
                                                  {"BGRx", cv::COLOR_BGR2BGRA},
                                                  {"RGBA", cv::COLOR_BGR2RGBA}};
  std::vector<std::vector<float>> values;  // boxes, then scores
  for (const auto &[format, code] : formats) {
    cv::Mat frame;  // a new Mat: cvtColor into a copy of bgr's header would overwrite bgr
    if (code >= 0) {
      cv::cvtColor(bgr, frame, code);
    } else {
      frame = bgr;
    }
    GstHarness *h = harness_for("blazeface", frame, format);
    GstBuffer *out = gst_harness_push_and_pull(h, buffer_of(frame));
    ASSERT_NE(out, nullptr) << format;
    const GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(out);
    ASSERT_NE(c, nullptr) << format;
    ASSERT_GE(c->n, 1u) << format << ": frame 100 shows a face";
    std::vector<float> v(c->boxes, c->boxes + 4 * c->n);
    v.insert(v.end(), c->scores, c->scores + c->n);
    ASSERT_EQ(c->points_per_candidate, 6u) << format;
    v.insert(v.end(), c->points, c->points + 12 * c->n);
    values.push_back(v);
    gst_buffer_unref(out);
    gst_harness_teardown(h);
  }
  for (size_t f = 1; f < values.size(); f++) EXPECT_EQ(values[f], values[0]) << formats[f].first;
}

TEST_F(BlazeFace, MissingModelIsAnErrorAtStart) {
  const std::string text = start_error("blazeface model=/nonexistent/face.onnx");
  EXPECT_NE(text.find("/nonexistent/face.onnx"), std::string::npos) << text;
  EXPECT_NE(text.find("cannot be read: No such file or directory"), std::string::npos) << text;
}

TEST_F(BlazeFace, AModelThatCouldNeverBeReadWholeIsAnErrorAtStart) {
  expect_unreadable_models_refused("blazeface");
}

TEST_F(BlazeFace, InvalidModelIsAnErrorAtStart) {
  gchar *path = nullptr;
  const int fd = g_file_open_tmp("blazeface-XXXXXX.onnx", &path, nullptr);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not a network", 13), 13);
  close(fd);
  std::string text = start_error(std::string("blazeface model=\"") + path + "\"");
  EXPECT_NE(text.find("is not BlazeFace's front model"), std::string::npos) << text;
  g_unlink(path);
  g_free(path);
}

}  // namespace
}  // namespace cudanms::testing
