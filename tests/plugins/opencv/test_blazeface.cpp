// blazeface: MediaPipe's anchors and decoding against hand-computed values, and the element on
// real video (Debian opencv-doc's Megamind.avi): its raw anchors, merged by cudanms
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
#include <cmath>
#include <limits>
#include <memory>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>
#include <string>
#include <vector>

#include "blazefacedecode.h"
#include "plugins/cv_support.h"
#include "plugins/video_frames.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

namespace bf = cudanms::blazeface;
using Box = std::array<float, 4>;

float iou(const Box &a, const Box &b) {
  const float w = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float h = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = w * h;
  return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter);
}

TEST(BlazeFaceAnchors, AreMediaPipesTwoGrids) {
  const std::vector<bf::Anchor> &a = bf::front_anchors();
  ASSERT_EQ(a.size(), 896u);
  // Stride 8: a 16x16 grid, two anchors a cell, row by row.
  EXPECT_FLOAT_EQ(a[0].x_center, 0.5f / 16);
  EXPECT_FLOAT_EQ(a[0].y_center, 0.5f / 16);
  EXPECT_FLOAT_EQ(a[1].x_center, 0.5f / 16);
  EXPECT_FLOAT_EQ(a[2].x_center, 1.5f / 16);
  EXPECT_FLOAT_EQ(a[32].x_center, 0.5f / 16);  // the second row
  EXPECT_FLOAT_EQ(a[32].y_center, 1.5f / 16);
  EXPECT_FLOAT_EQ(a[511].x_center, 15.5f / 16);
  EXPECT_FLOAT_EQ(a[511].y_center, 15.5f / 16);
  // Stride 16 (three layers merged): an 8x8 grid, six anchors a cell.
  for (int k = 512; k < 518; k++) {
    EXPECT_FLOAT_EQ(a[k].x_center, 0.5f / 8);
    EXPECT_FLOAT_EQ(a[k].y_center, 0.5f / 8);
  }
  EXPECT_FLOAT_EQ(a[518].x_center, 1.5f / 8);
  EXPECT_FLOAT_EQ(a[895].x_center, 7.5f / 8);
  EXPECT_FLOAT_EQ(a[895].y_center, 7.5f / 8);
}

TEST(BlazeFaceLetterbox, FitsAndCentres) {
  // Megamind.avi's 720x528: scaled by 128/720 to 128x93.87, rounded to 94, 17 rows above.
  const bf::Letterbox l = bf::Letterbox::fit(720, 528);
  EXPECT_EQ(l.scaled_width, 128);
  EXPECT_EQ(l.scaled_height, 94);
  EXPECT_EQ(l.pad_x, 0);
  EXPECT_EQ(l.pad_y, 17);
  EXPECT_FLOAT_EQ(l.frame_x(0.5f), 360.0f);
  EXPECT_FLOAT_EQ(l.frame_y(17.0f / 128), 0.0f);
  EXPECT_FLOAT_EQ(l.frame_y(111.0f / 128), 528.0f);
  // A tall frame pads the sides; a 1-pixel-high one still has a row.
  const bf::Letterbox tall = bf::Letterbox::fit(100, 400);
  EXPECT_EQ(tall.scaled_width, 32);
  EXPECT_EQ(tall.pad_x, 48);
  EXPECT_EQ(tall.pad_y, 0);
  EXPECT_EQ(bf::Letterbox::fit(10000, 1).scaled_height, 1);
}

// One anchor of the first head worked by hand, on a 720x528 frame (the letterbox above).
TEST(BlazeFaceDecode, HandComputedAnchor) {
  std::vector<float> logits(512, -5.0f);  // sigmoid(-5) = 0.0067: below any useful threshold
  std::vector<float> regressors(512 * bf::kRegressors, 0.0f);
  // Anchor 213: cell 106 of the 16x16 grid, row 6, column 10, centre (10.5/16, 6.5/16) =
  // (84, 52) input pixels. Offsets are in input pixels: centre (88, 50), size 40x44.
  logits[213] = 2.0f;
  float *r = &regressors[213 * bf::kRegressors];
  r[0] = 4, r[1] = -2, r[2] = 40, r[3] = 44;
  r[4] = -10, r[5] = -8;  // keypoint 0 (right eye) at (74, 44) input pixels
  r[14] = 20, r[15] = 0;  // keypoint 5 (left ear tragion) at (104, 52)
  const bf::Letterbox l = bf::Letterbox::fit(720, 528);
  bf::Candidates out;
  bf::decode(logits.data(), regressors.data(), bf::front_anchors().data(), 512, 0.5f, l, &out);
  ASSERT_EQ(out.size(), 1u);
  // x: 88 -+ 20 = 68..108 input pixels, times 720/128 = 5.625: 382.5..607.5.
  // y: 50 -+ 22 = 28..72, less the 17 rows of padding: 11..55, times 528/94: 61.787..308.936.
  EXPECT_FLOAT_EQ(out.boxes[0], 382.5f);
  EXPECT_FLOAT_EQ(out.boxes[1], 11.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.boxes[2], 607.5f);
  EXPECT_FLOAT_EQ(out.boxes[3], 55.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.scores[0], 1.0f / (1.0f + std::exp(-2.0f)));  // 0.8808
  // Keypoints offset from the anchor's centre (84, 52) like the box's: (74, 44 - 17) and
  // (104, 52 - 17) letterbox pixels; the four between sit on the anchor's centre.
  ASSERT_EQ(out.keypoints.size(), 12u);
  EXPECT_FLOAT_EQ(out.keypoints[0], 74 * 5.625f);
  EXPECT_FLOAT_EQ(out.keypoints[1], 27.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.keypoints[2], 84 * 5.625f);
  EXPECT_FLOAT_EQ(out.keypoints[3], 35.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.keypoints[10], 104 * 5.625f);
  EXPECT_FLOAT_EQ(out.keypoints[11], 35.0f * 528 / 94);
}

TEST(BlazeFaceDecode, ThresholdClippingAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {0.0f, -0.01f, 1000.0f, -1000.0f, nan, 0.01f};
  const std::vector<float> regressors(logits.size() * bf::kRegressors, 1.0f);
  const bf::Letterbox l = bf::Letterbox::fit(128, 128);
  bf::Candidates out;
  bf::decode(logits.data(), regressors.data(), bf::front_anchors().data(), logits.size(), 0.5f, l,
             &out);
  // At least the threshold is kept (0.5 exactly at logit 0); a clipped logit of 1000 scores 1;
  // NaN never passes.
  ASSERT_EQ(out.scores, (std::vector<float>{0.5f, 1.0f, 1.0f / (1.0f + std::exp(-0.01f))}));
  EXPECT_EQ(out.boxes.size(), 12u);
  // Threshold 0 keeps all but NaN; threshold 1 only the clipped 1000.
  out.clear();
  bf::decode(logits.data(), regressors.data(), bf::front_anchors().data(), logits.size(), 0.0f, l,
             &out);
  EXPECT_EQ(out.size(), 5u);
  out.clear();
  bf::decode(logits.data(), regressors.data(), bf::front_anchors().data(), logits.size(), 1.0f, l,
             &out);
  EXPECT_EQ(out.size(), 1u);
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
  const cv::Mat bgr = megamind_frames(101).back();
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
