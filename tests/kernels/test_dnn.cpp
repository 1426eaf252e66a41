// cudanms/dnn.h: the input tensor and the decoding checked by hand-worked values, and the CUDA
// functions against the CPU's on random frames and outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cudanms/dnn.h"

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace dnn = cudanms::dnn;

namespace {

dnn::Image rgb_image(const std::vector<uint8_t> &pixels, int width, int height) {
  dnn::Image image;
  image.format = dnn::PixelFormat::kRGB;
  image.width = width;
  image.height = height;
  image.planes[0] = pixels.data();
  image.strides[0] = 3 * width;
  return image;
}

dnn::DecodeParams params_of(float threshold, int32_t class_id) {
  dnn::DecodeParams params;
  params.score_threshold = threshold;
  params.class_id = class_id;
  return params;
}

dnn::InputSpec spec_of(int width, int height, bool letterbox = true) {
  dnn::InputSpec spec;
  spec.width = width;
  spec.height = height;
  spec.letterbox = letterbox;
  return spec;
}

}  // namespace

TEST(DnnInput, DownscalingInterpolatesAtPixelCentres) {
  // 3 pixels into 2: centres at 0.25 and 1.75 of the frame's pixels, no averaging.
  const std::vector<uint8_t> px = {30, 0, 0, 60, 0, 0, 90, 0, 0};
  std::vector<float> out(3 * 2);
  ASSERT_TRUE(dnn::preprocess(rgb_image(px, 3, 1), spec_of(2, 1, false), out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 37.5f);
  EXPECT_FLOAT_EQ(out[1], 82.5f);
  // 8 into 2: centres at 1.5 and 5.5, between the 2nd and 3rd and the 6th and 7th.
  const std::vector<uint8_t> ramp = {0,  0, 0, 10, 0, 0, 20, 0, 0, 30, 0, 0,
                                     40, 0, 0, 50, 0, 0, 60, 0, 0, 70, 0, 0};
  ASSERT_TRUE(dnn::preprocess(rgb_image(ramp, 8, 1), spec_of(2, 1, false), out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 15.0f);
  EXPECT_FLOAT_EQ(out[1], 55.0f);
}

TEST(DnnInput, UpscalingInterpolates) {
  // 2 pixels into 4: centres at -0.25, 0.25, 0.75, 1.25 of the frame's pixels.
  const std::vector<uint8_t> px = {0, 0, 0, 100, 0, 0};
  std::vector<float> out(3 * 4);
  ASSERT_TRUE(dnn::preprocess(rgb_image(px, 2, 1), spec_of(4, 1, false), out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 25.0f);
  EXPECT_FLOAT_EQ(out[2], 75.0f);
  EXPECT_FLOAT_EQ(out[3], 100.0f);
}

TEST(DnnInput, LetterboxPadsAndNormalises) {
  // A 4x2 frame in a 4x4 input: rows 0 and 3 padding, the frame in rows 1-2.
  std::vector<uint8_t> px(4 * 2 * 3, 200);
  dnn::InputSpec spec = spec_of(4, 4);
  spec.pad_value = 114;
  for (int c = 0; c < 3; c++) spec.mean[c] = 100, spec.scale[c] = 0.5f;
  const dnn::Letterbox box = dnn::Letterbox::fit(4, 2, spec);
  EXPECT_EQ(box.scaled_width, 4);
  EXPECT_EQ(box.scaled_height, 2);
  EXPECT_EQ(box.pad_y, 1);
  std::vector<float> out(3 * 16);
  ASSERT_TRUE(dnn::preprocess(rgb_image(px, 4, 2), spec, out.data()).ok());
  for (int c = 0; c < 3; c++) {
    for (int x = 0; x < 4; x++) {
      EXPECT_FLOAT_EQ(out[c * 16 + 0 * 4 + x], (114 - 100) * 0.5f);
      EXPECT_FLOAT_EQ(out[c * 16 + 1 * 4 + x], (200 - 100) * 0.5f);
      EXPECT_FLOAT_EQ(out[c * 16 + 3 * 4 + x], (114 - 100) * 0.5f);
    }
  }
  EXPECT_FLOAT_EQ(box.frame_x(2.0f), 2.0f);
  EXPECT_FLOAT_EQ(box.frame_y(1.0f), 0.0f);
}

TEST(DnnInput, YuvMatchesTheStandardMatrices) {
  // One 2x2 I420 frame of a single colour: Y 81, U 90, V 240 is BT.601 limited-range red.
  const std::vector<uint8_t> y(4, 81), u(1, 90), v(1, 240);
  dnn::Image image;
  image.format = dnn::PixelFormat::kI420;
  image.width = image.height = 2;
  image.planes[0] = y.data(), image.planes[1] = u.data(), image.planes[2] = v.data();
  image.strides[0] = 2, image.strides[1] = image.strides[2] = 1;
  std::vector<float> out(3);
  ASSERT_TRUE(dnn::preprocess(image, spec_of(1, 1, false), out.data()).ok());
  EXPECT_NEAR(out[0], 255.0f, 1.0f);
  EXPECT_NEAR(out[1], 0.0f, 1.0f);
  EXPECT_NEAR(out[2], 0.0f, 1.0f);
  // The same bytes as NV12, full range BT.709: R = Y + 1.5748 (V - 128).
  const std::vector<uint8_t> uv = {90, 240};
  image.format = dnn::PixelFormat::kNV12;
  image.planes[1] = uv.data();
  image.strides[1] = 2;
  image.matrix = dnn::YuvMatrix::kBt709;
  image.full_range = true;
  ASSERT_TRUE(dnn::preprocess(image, spec_of(1, 1, false), out.data()).ok());
  EXPECT_NEAR(out[0], std::min(255.0f, 81 + 1.5748f * 112), 0.01f);
  EXPECT_NEAR(out[2], std::max(0.0f, 81 + 1.8556f * -38), 0.01f);
}

TEST(DnnInput, BadFramesAreErrors) {
  std::vector<float> out(3);
  dnn::Image empty;
  EXPECT_FALSE(dnn::preprocess(empty, spec_of(1, 1), out.data()).ok());
  const std::vector<uint8_t> px(3, 0);
  EXPECT_FALSE(dnn::preprocess(rgb_image(px, 1, 1), spec_of(0, 1), out.data()).ok());
  dnn::Image no_chroma = rgb_image(px, 1, 1);
  no_chroma.format = dnn::PixelFormat::kNV12;
  EXPECT_FALSE(dnn::preprocess(no_chroma, spec_of(1, 1), out.data()).ok());
}

TEST(DnnOutputs, ShapesAreChecked) {
  dnn::Outputs out;
  EXPECT_TRUE(dnn::Outputs::describe(dnn::Head::kYolo, {{2, 84, 8400}}, &out).ok());
  EXPECT_EQ(out.batch, 2);
  EXPECT_EQ(out.classes, 80);
  EXPECT_EQ(out.anchors, 8400);
  EXPECT_FALSE(dnn::Outputs::describe(dnn::Head::kYolo, {{2, 4, 8400}}, &out).ok());
  EXPECT_FALSE(dnn::Outputs::describe(dnn::Head::kYolo, {}, &out).ok());
  EXPECT_TRUE(
      dnn::Outputs::describe(dnn::Head::kBlazeFace, {{3, 896, 16}, {3, 896, 1}}, &out).ok());
  EXPECT_EQ(out.points_per_candidate(), 6);
  const cudanms::Status wrong =
      dnn::Outputs::describe(dnn::Head::kBlazeFace, {{1, 896, 1}, {1, 896, 16}}, &out);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("[1x896x1], [1x896x16]"), std::string::npos) << wrong.message();
}

TEST(DnnDecode, YoloBoxesClassesAndThreshold) {
  // 3 anchors, 2 classes, a 640x640 input holding a 1280x640 frame (scale 0.5, pad_y 160).
  const int anchors = 3, classes = 2;
  std::vector<float> out((4 + classes) * anchors, 0.0f);
  auto set = [&](int row, int a, float v) { out[row * anchors + a] = v; };
  set(0, 0, 320), set(1, 0, 320), set(2, 0, 100), set(3, 0, 50);  // centre box
  set(4, 0, 0.2f), set(5, 0, 0.9f);                               // class 1
  set(0, 1, 10), set(1, 1, 170), set(2, 1, 20), set(3, 1, 20);
  set(4, 1, 0.6f), set(5, 1, 0.6f);  // equal: the first class
  set(4, 2, 0.1f), set(5, 2, 0.3f);  // below 0.5
  dnn::InputSpec spec = spec_of(640, 640);
  const dnn::Letterbox box = dnn::Letterbox::fit(1280, 640, spec);
  EXPECT_EQ(box.pad_y, 160);
  dnn::Outputs outputs;
  ASSERT_TRUE(dnn::Outputs::describe(dnn::Head::kYolo, {{1, 4 + classes, anchors}}, &outputs).ok());
  outputs.tensors[0] = out.data();
  dnn::Candidates c;
  ASSERT_TRUE(dnn::decode(outputs, 0, box, params_of(0.5f, 7), &c).ok());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.class_ids[0], 1);
  EXPECT_FLOAT_EQ(c.scores[0], 0.9f);
  const float expected0[4] = {540, 270, 740, 370};  // (270..370 input) x 2, y (295..345 - 160) x 2
  for (int k = 0; k < 4; k++) EXPECT_FLOAT_EQ(c.boxes[k], expected0[k]) << k;
  EXPECT_EQ(c.class_ids[1], 0);
  EXPECT_FLOAT_EQ(c.boxes[4], 0.0f);
  EXPECT_FLOAT_EQ(c.boxes[5], 0.0f);
  EXPECT_FLOAT_EQ(c.boxes[6], 40.0f);
  EXPECT_FLOAT_EQ(c.boxes[7], 40.0f);
  EXPECT_TRUE(c.points.empty());
  EXPECT_FALSE(dnn::decode(outputs, 1, box, params_of(0.5f, 0), &c).ok());
}

TEST(DnnDecode, YoloNaNScoresAreDropped) {
  std::vector<float> out(5, 0.0f);
  out[4] = NAN;
  dnn::Outputs outputs;
  ASSERT_TRUE(dnn::Outputs::describe(dnn::Head::kYolo, {{1, 5, 1}}, &outputs).ok());
  outputs.tensors[0] = out.data();
  dnn::Candidates c;
  ASSERT_TRUE(
      dnn::decode(outputs, 0, dnn::Letterbox::fit(8, 8, spec_of(8, 8)), params_of(0.0f, 0), &c)
          .ok());
  EXPECT_EQ(c.size(), 0u);
}

TEST(DnnDecode, BlazeFaceAnchorBoxAndKeypoints) {
  // Anchor 213: cell 106 of the 16x16 grid (x 10, y 6): centre (10.5/16, 6.5/16).
  std::vector<float> regressors(896 * 16, 0.0f), logits(896, -10.0f);
  logits[213] = 2.0f;
  float *r = &regressors[213 * 16];
  r[0] = 4, r[1] = -8, r[2] = 32, r[3] = 16;  // centre offset and size, input pixels
  r[4] = 1, r[5] = 2;                         // first keypoint offset
  const dnn::Letterbox box = dnn::Letterbox::fit(128, 128, spec_of(128, 128));
  dnn::Outputs outputs;
  ASSERT_TRUE(
      dnn::Outputs::describe(dnn::Head::kBlazeFace, {{1, 896, 16}, {1, 896, 1}}, &outputs).ok());
  outputs.tensors[0] = regressors.data();
  outputs.tensors[1] = logits.data();
  dnn::Candidates c;
  ASSERT_TRUE(dnn::decode(outputs, 0, box, params_of(0.5f, 3), &c).ok());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NEAR(c.scores[0], 1.0f / (1.0f + std::exp(-2.0f)), 1e-6f);
  EXPECT_EQ(c.class_ids[0], 3);
  const float cx = 10.5f * 8 + 4, cy = 6.5f * 8 - 8;
  EXPECT_NEAR(c.boxes[0], cx - 16, 1e-4f);
  EXPECT_NEAR(c.boxes[1], cy - 8, 1e-4f);
  EXPECT_NEAR(c.boxes[2], cx + 16, 1e-4f);
  EXPECT_NEAR(c.boxes[3], cy + 8, 1e-4f);
  ASSERT_EQ(c.points.size(), 12u);
  EXPECT_NEAR(c.points[0], 10.5f * 8 + 1, 1e-4f);
  EXPECT_NEAR(c.points[1], 6.5f * 8 + 2, 1e-4f);
  EXPECT_EQ(dnn::blazeface_anchors().size(), 896u);
  EXPECT_FLOAT_EQ(dnn::blazeface_anchors()[895].x_center, 7.5f / 8);
}

TEST(DnnDecode, BlazeFaceAnchorsAreMediaPipesTwoGrids) {
  const std::vector<dnn::Anchor> &a = dnn::blazeface_anchors();
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

TEST(DnnInput, LetterboxFitsAndCentres) {
  // Megamind.avi's 720x528 into 128x128: scaled by 128/720 to 128x93.87, rounded to 94, 17 rows
  // above.
  const dnn::Letterbox l = dnn::Letterbox::fit(720, 528, spec_of(128, 128));
  EXPECT_EQ(l.scaled_width, 128);
  EXPECT_EQ(l.scaled_height, 94);
  EXPECT_EQ(l.pad_x, 0);
  EXPECT_EQ(l.pad_y, 17);
  EXPECT_FLOAT_EQ(l.frame_x(64.0f), 360.0f);
  EXPECT_FLOAT_EQ(l.frame_y(17.0f), 0.0f);
  EXPECT_FLOAT_EQ(l.frame_y(111.0f), 528.0f);
  // A tall frame pads the sides; a 1-pixel-high one still has a row.
  const dnn::Letterbox tall = dnn::Letterbox::fit(100, 400, spec_of(128, 128));
  EXPECT_EQ(tall.scaled_width, 32);
  EXPECT_EQ(tall.pad_x, 48);
  EXPECT_EQ(tall.pad_y, 0);
  EXPECT_EQ(dnn::Letterbox::fit(10000, 1, spec_of(128, 128)).scaled_height, 1);
}

// Ultralytics' LetterBox (auto=False, scaleup=True, center=True), as ultralytics/data/augment.py
// writes it: r = min(H/h, W/w); new = (round(w*r), round(h*r)) with Python's round (ties to
// even); dw = (W - new_w)/2; left = round(dw - 0.1), top likewise; grey 114 around.
struct UltralyticsBox {
  int width, height, left, top;
};
UltralyticsBox ultralytics_letterbox(int w, int h, int W, int H) {
  const double r = std::min(double(H) / h, double(W) / w);
  const auto python_round = [](double v) { return static_cast<int>(std::nearbyint(v)); };
  const int new_w = python_round(w * r), new_h = python_round(h * r);
  const double dw = (W - new_w) / 2.0, dh = (H - new_h) / 2.0;
  return {new_w, new_h, python_round(dw - 0.1), python_round(dh - 0.1)};
}

// decoder=yolo's letterbox is Ultralytics': the same scaled size and offsets on frames of every
// shape, ties included (1280x721 at r = 0.5 is 360.5 rows: Python rounds to 360), and grey 114
// in the padding.
TEST(DnnInput, LetterboxIsUltralyticsLetterBox) {
  std::mt19937 rng(44);
  std::vector<std::pair<int, int>> frames = {{1920, 1080}, {1280, 721}, {721, 1280}, {640, 480},
                                             {1023, 577},  {3, 1001},   {1001, 3},   {640, 640}};
  for (int i = 0; i < 2000; i++) frames.emplace_back(1 + rng() % 4000, 1 + rng() % 4000);
  for (const auto &[W, H] : {std::pair{640, 640}, std::pair{640, 384}, std::pair{320, 320}}) {
    for (const auto &[w, h] : frames) {
      const dnn::Letterbox ours = dnn::Letterbox::fit(w, h, spec_of(W, H));
      const UltralyticsBox theirs = ultralytics_letterbox(w, h, W, H);
      if (theirs.width < 1 || theirs.height < 1) continue;  // a frame Ultralytics cannot scale
      ASSERT_EQ(ours.scaled_width, theirs.width) << w << "x" << h << " into " << W << "x" << H;
      ASSERT_EQ(ours.scaled_height, theirs.height) << w << "x" << h << " into " << W << "x" << H;
      ASSERT_EQ(ours.pad_x, theirs.left) << w << "x" << h << " into " << W << "x" << H;
      ASSERT_EQ(ours.pad_y, theirs.top) << w << "x" << h << " into " << W << "x" << H;
    }
  }
  // The padding: grey 114, scaled as the pixels are (YOLO: [0, 1]).
  dnn::InputSpec spec = spec_of(8, 8);
  spec.pad_value = 114;
  for (float &s : spec.scale) s = 1.0f / 255;
  const std::vector<uint8_t> white(8 * 4 * 3, 255);
  std::vector<float> chw(3 * 8 * 8);
  ASSERT_TRUE(dnn::preprocess(rgb_image(white, 8, 4), spec, chw.data()).ok());
  for (int c = 0; c < 3; c++) {
    EXPECT_FLOAT_EQ(chw[c * 64 + 0], 114.0f / 255) << "the top row is padding";
    EXPECT_FLOAT_EQ(chw[c * 64 + 2 * 8 + 3], 1.0f) << "the frame sits in rows 2 to 5";
    EXPECT_FLOAT_EQ(chw[c * 64 + 7 * 8 + 7], 114.0f / 255) << "the bottom row is padding";
  }
}

// BlazeFace's outputs for one frame: every anchor's logit `rest`, its regressors 0.
struct BlazeFaceOutputs {
  explicit BlazeFaceOutputs(float rest) : regressors(896 * 16, 0.0f), logits(896, rest) {
    EXPECT_TRUE(
        dnn::Outputs::describe(dnn::Head::kBlazeFace, {{1, 896, 16}, {1, 896, 1}}, &outputs).ok());
    outputs.tensors[0] = regressors.data();
    outputs.tensors[1] = logits.data();
  }
  std::vector<float> regressors, logits;
  dnn::Outputs outputs;
};

// One anchor of the first head worked by hand, on a 720x528 frame (the letterbox above).
TEST(DnnDecode, BlazeFaceAnchorOnALetterboxedFrame) {
  BlazeFaceOutputs o(-5.0f);  // sigmoid(-5) = 0.0067: below any useful threshold
  // Anchor 213: cell 106 of the 16x16 grid, row 6, column 10, centre (10.5/16, 6.5/16) =
  // (84, 52) input pixels. Offsets are in input pixels: centre (88, 50), size 40x44.
  o.logits[213] = 2.0f;
  float *r = &o.regressors[213 * 16];
  r[0] = 4, r[1] = -2, r[2] = 40, r[3] = 44;
  r[4] = -10, r[5] = -8;  // keypoint 0 (right eye) at (74, 44) input pixels
  r[14] = 20, r[15] = 0;  // keypoint 5 (left ear tragion) at (104, 52)
  const dnn::Letterbox l = dnn::Letterbox::fit(720, 528, spec_of(128, 128));
  dnn::Candidates out;
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(0.5f, 0), &out).ok());
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
  ASSERT_EQ(out.points.size(), 12u);
  EXPECT_FLOAT_EQ(out.points[0], 74 * 5.625f);
  EXPECT_FLOAT_EQ(out.points[1], 27.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.points[2], 84 * 5.625f);
  EXPECT_FLOAT_EQ(out.points[3], 35.0f * 528 / 94);
  EXPECT_FLOAT_EQ(out.points[10], 104 * 5.625f);
  EXPECT_FLOAT_EQ(out.points[11], 35.0f * 528 / 94);
}

TEST(DnnDecode, BlazeFaceThresholdClippingAndNaN) {
  BlazeFaceOutputs o(std::numeric_limits<float>::quiet_NaN());  // NaN never passes
  const float given[] = {0.0f, -0.01f, 1000.0f, -1000.0f, std::numeric_limits<float>::quiet_NaN(),
                         0.01f};
  for (int i = 0; i < 6; i++) o.logits[i] = given[i];
  const dnn::Letterbox l = dnn::Letterbox::fit(128, 128, spec_of(128, 128));
  dnn::Candidates out;
  // At least the threshold is kept (0.5 exactly at logit 0); a clipped logit of 1000 scores 1.
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(0.5f, 0), &out).ok());
  ASSERT_EQ(out.scores, (std::vector<float>{0.5f, 1.0f, 1.0f / (1.0f + std::exp(-0.01f))}));
  EXPECT_EQ(out.boxes.size(), 12u);
  // Threshold 0 keeps all but NaN (-1000 clips to -100: a score of 3.7e-44); threshold 1 only
  // the clipped 1000.
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(0.0f, 0), &out).ok());
  EXPECT_EQ(out.size(), 5u);
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(1.0f, 0), &out).ok());
  EXPECT_EQ(out.size(), 1u);
}

// NanoDet's input is BGR: the same pixel's planes in the other order, each normalised by its
// own colour's mean and scale.
TEST(DnnInput, BgrSwapsThePlanes) {
  const std::vector<uint8_t> px = {10, 20, 30};  // R, G, B
  dnn::InputSpec spec = spec_of(1, 1);
  const float mean[3] = {1, 2, 3}, scale[3] = {0.5f, 0.25f, 2.0f};
  for (int c = 0; c < 3; c++) spec.mean[c] = mean[c], spec.scale[c] = scale[c];
  std::vector<float> rgb(3), bgr(3);
  ASSERT_TRUE(dnn::preprocess(rgb_image(px, 1, 1), spec, rgb.data()).ok());
  spec.bgr = true;
  ASSERT_TRUE(dnn::preprocess(rgb_image(px, 1, 1), spec, bgr.data()).ok());
  EXPECT_EQ(rgb, (std::vector<float>{4.5f, 4.5f, 54.0f}));
  EXPECT_EQ(bgr, (std::vector<float>{54.0f, 4.5f, 4.5f}));
}

// NanoDet-g at 416x416: scores [B, 3549, 80] and distributions [B, 3549, 44] (52x52 + 26x26 +
// 13x13 cells, 11 bins a side).
struct NanoDetOutputs {
  static constexpr int kAnchors = 52 * 52 + 26 * 26 + 13 * 13, kClasses = 80, kBins = 11;
  NanoDetOutputs() : scores(kAnchors * kClasses, 0.0f), distributions(kAnchors * 4 * kBins, 0.0f) {
    EXPECT_TRUE(dnn::Outputs::describe(dnn::Head::kNanoDet,
                                       {{1, kAnchors, kClasses}, {1, kAnchors, 4 * kBins}},
                                       &outputs, 416, 416)
                    .ok());
    outputs.tensors[0] = scores.data();
    outputs.tensors[1] = distributions.data();
  }
  // Side k of anchor a: bin `at` far above the others (its softmax 1 to float precision).
  void one_bin(int a, int side, int at) {
    for (int b = 0; b < kBins; b++) distributions[(a * 4 + side) * kBins + b] = b == at ? 100 : 0;
  }
  std::vector<float> scores, distributions;
  dnn::Outputs outputs;
};

TEST(DnnOutputs, NanoDetShapesFollowTheInput) {
  dnn::Outputs out;
  ASSERT_TRUE(
      dnn::Outputs::describe(dnn::Head::kNanoDet, {{4, 3549, 80}, {4, 3549, 44}}, &out, 416, 416)
          .ok());
  EXPECT_EQ(out.batch, 4);
  EXPECT_EQ(out.anchors, 3549);
  EXPECT_EQ(out.classes, 80);
  EXPECT_EQ(out.bins, 11);
  EXPECT_EQ(out.points_per_candidate(), 0);
  // 320x320 has 40x40 + 20x20 + 10x10 cells; the 416 network's outputs do not fit it.
  const cudanms::Status wrong =
      dnn::Outputs::describe(dnn::Head::kNanoDet, {{1, 3549, 80}, {1, 3549, 44}}, &out, 320, 320);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("[B, 2100, classes]"), std::string::npos) << wrong.message();
  EXPECT_FALSE(
      dnn::Outputs::describe(dnn::Head::kNanoDet, {{1, 3549, 80}, {1, 3549, 44}}, &out).ok());
  EXPECT_FALSE(
      dnn::Outputs::describe(dnn::Head::kNanoDet, {{1, 3549, 44}, {1, 3549, 42}}, &out, 416, 416)
          .ok());
  EXPECT_FALSE(dnn::Outputs::describe(dnn::Head::kNanoDet, {{1, 8400, 84}}, &out, 416, 416).ok());
  // Every class of an anchor may be a candidate: the buffers hold anchors x classes kept.
  ASSERT_TRUE(
      dnn::Outputs::describe(dnn::Head::kNanoDet, {{1, 3549, 80}, {1, 3549, 44}}, &out, 416, 416)
          .ok());
  dnn::DecodeParams params;
  EXPECT_EQ(dnn::max_candidates(out, params), 3549u * 80);
  params.classes.keep(0);
  params.classes.keep(2);
  EXPECT_EQ(dnn::max_candidates(out, params), 3549u * 2);
}

// One anchor of stride 16 worked by hand, on an 832x416 frame (scale 0.5, 104 rows of padding
// above it): each side's distance the expected bin of its softmax, times the stride.
TEST(DnnDecode, NanoDetAnchorBoxAndClasses) {
  NanoDetOutputs o;
  // Stride 16's cell at column 5, row 10: anchor 2704 + 10 * 26 + 5, centre (88, 168).
  const int a = 2704 + 10 * 26 + 5;
  o.one_bin(a, 0, 2);  // left 32
  o.one_bin(a, 1, 3);  // top 48
  o.one_bin(a, 2, 1);  // right 16
  // bottom: all bins equal, the mean of 0..10 = 5: 80
  o.scores[a * 80 + 0] = 0.9f, o.scores[a * 80 + 2] = 0.6f, o.scores[a * 80 + 5] = 0.2f;
  const dnn::Letterbox l = dnn::Letterbox::fit(832, 416, spec_of(416, 416));
  ASSERT_EQ(l.pad_y, 104);
  dnn::Candidates c;
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(0.5f, 0), &c).ok());
  // Input box (56, 120)-(104, 248); in the frame x2, y - 104 then x2.
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.boxes, (std::vector<float>{112, 32, 208, 288, 112, 32, 208, 288}));
  EXPECT_EQ(c.scores, (std::vector<float>{0.9f, 0.6f}));
  EXPECT_EQ(c.class_ids, (std::vector<int32_t>{0, 2}));
  // The filter keeps the classes named; the threshold is at least, as every decoder's.
  dnn::DecodeParams cars = params_of(0.2f, 0);
  cars.classes.keep(2);
  cars.classes.keep(5);
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, cars, &c).ok());
  EXPECT_EQ(c.class_ids, (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(c.scores, (std::vector<float>{0.6f, 0.2f}));
}

TEST(DnnDecode, NanoDetSoftmaxClippingAndNaN) {
  NanoDetOutputs o;
  // Stride 8's first cell, centre (4, 4): left and top far beyond the frame's corner, clipped to
  // it; right from two bins of weights 1 and 3 (bins 0 and 1, the rest -1000): 0.75 x 8 = 6.
  const int a = 0;
  o.one_bin(a, 0, 10);
  o.one_bin(a, 1, 10);
  for (int b = 0; b < 11; b++) o.distributions[(a * 4 + 2) * 11 + b] = b == 0 ? 0.0f : -1000.0f;
  o.distributions[(a * 4 + 2) * 11 + 1] = std::log(3.0f);
  o.one_bin(a, 3, 0);
  o.scores[0] = 0.7f;
  o.scores[1] = std::numeric_limits<float>::quiet_NaN();
  // Stride 32's last cell (row 12, column 12), centre (400, 400), 64 to every side on a square
  // frame: right and bottom clipped at 416.
  const int last = 3548;
  for (int side = 0; side < 4; side++) o.one_bin(last, side, 2);
  o.scores[last * 80 + 79] = 0.5f;
  const dnn::Letterbox l = dnn::Letterbox::fit(416, 416, spec_of(416, 416));
  dnn::Candidates c;
  ASSERT_TRUE(dnn::decode(o.outputs, 0, l, params_of(0.5f, 0), &c).ok());
  ASSERT_EQ(c.size(), 2u) << "NaN is never a candidate";
  EXPECT_EQ(c.class_ids, (std::vector<int32_t>{0, 79}));
  EXPECT_FLOAT_EQ(c.boxes[0], 0.0f);
  EXPECT_FLOAT_EQ(c.boxes[1], 0.0f);
  EXPECT_NEAR(c.boxes[2], 4.0f + 6.0f, 1e-5f);
  EXPECT_FLOAT_EQ(c.boxes[3], 4.0f);
  EXPECT_EQ((std::vector<float>(c.boxes.begin() + 4, c.boxes.end())),
            (std::vector<float>{336, 336, 416, 416}));
}

#ifdef CUDANMS_HAVE_CUDA

namespace {

template <typename T>
T *to_device(const std::vector<T> &host) {
  T *d = nullptr;
  if (cudaMalloc(&d, host.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  // A copy from pageable memory may return before its DMA lands; the stage's stream does not
  // wait for the legacy stream.
  cudaDeviceSynchronize();
  return d;
}

void expect_boxes_near(const std::vector<float> &actual, const std::vector<float> &expected,
                       float pixels) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); i++)
    ASSERT_NEAR(actual[i], expected[i], pixels) << "candidate " << i / 4 << ", side " << i % 4;
}

}  // namespace

class CudaDnn : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cudanms::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    cudanms::Status status;
    stage_ = dnn::CudaStage::create(0, &status);
    ASSERT_TRUE(stage_) << status.message();
  }
  std::unique_ptr<dnn::CudaStage> stage_;
};

// Random frames of every format and size, down- and upscaled, letterboxed or stretched: the
// GPU's input tensor equals the CPU's, from host memory (staged) and from device memory.
TEST_F(CudaDnn, InputEqualsTheCpus) {
  const unsigned seed = std::random_device()();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const dnn::PixelFormat formats[] = {dnn::PixelFormat::kRGB,  dnn::PixelFormat::kBGR,
                                      dnn::PixelFormat::kRGBx, dnn::PixelFormat::kBGRx,
                                      dnn::PixelFormat::kI420, dnn::PixelFormat::kNV12};
  for (int round = 0; round < 24; round++) {
    const dnn::PixelFormat format = formats[round % 6];
    const int width = 1 + rng() % 700, height = 1 + rng() % 500;
    dnn::InputSpec spec = spec_of(16 + rng() % 300, 16 + rng() % 300, rng() % 2);
    spec.mean[1] = 10, spec.scale[2] = 0.25f, spec.pad_value = 114, spec.bgr = rng() % 2;
    const bool yuv = format == dnn::PixelFormat::kI420 || format == dnn::PixelFormat::kNV12;
    const int bpp = format == dnn::PixelFormat::kRGB || format == dnn::PixelFormat::kBGR ? 3 : 4;
    const int cw = (width + 1) / 2, ch = (height + 1) / 2;
    std::vector<std::vector<uint8_t>> planes;
    dnn::Image image;
    image.format = format;
    image.width = width, image.height = height;
    image.matrix = rng() % 2 ? dnn::YuvMatrix::kBt709 : dnn::YuvMatrix::kBt601;
    image.full_range = rng() % 2;
    const int n = format == dnn::PixelFormat::kI420 ? 3 : yuv ? 2 : 1;
    for (int p = 0; p < n; p++) {
      const int stride = (p == 0 ? (yuv ? width : width * bpp) : (n == 2 ? 2 * cw : cw)) + 7;
      const int rows = p == 0 ? height : ch;
      planes.emplace_back(static_cast<size_t>(stride) * rows);
      for (uint8_t &b : planes.back()) b = static_cast<uint8_t>(rng());
      image.planes[p] = planes.back().data();
      image.strides[p] = stride;
    }
    std::vector<float> cpu(3 * spec.width * spec.height);
    ASSERT_TRUE(dnn::preprocess(image, spec, cpu.data()).ok());
    float *d_input = nullptr;
    const bool in_host_memory = false;
    ASSERT_TRUE(stage_->preprocess(&image, &in_host_memory, 1, spec, &d_input).ok());
    std::vector<float> gpu(cpu.size());
    ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stage_->stream())), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu.data(), d_input, gpu.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < cpu.size(); i++)
      ASSERT_EQ(cpu[i], gpu[i]) << "round " << round << " at " << i;
    // The same frame already in device memory.
    std::vector<uint8_t *> d_planes;
    dnn::Image on_device = image;
    for (int p = 0; p < n; p++) {
      d_planes.push_back(to_device(planes[p]));
      on_device.planes[p] = d_planes.back();
    }
    const bool in_device_memory = true;
    ASSERT_TRUE(stage_->preprocess(&on_device, &in_device_memory, 1, spec, &d_input).ok());
    ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stage_->stream())), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(gpu.data(), d_input, gpu.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < cpu.size(); i++)
      ASSERT_EQ(cpu[i], gpu[i]) << "round " << round << " at " << i;
    for (uint8_t *d : d_planes) cudaFree(d);
  }
}

// Random outputs of every head, a batch of frames of different sizes: the GPU's candidates are
// the CPU's, in the same order (BlazeFace's scores and NanoDet's boxes, whose sides are softmax
// expectations, within the ulps by which CUDA's expf and glibc's differ).
TEST_F(CudaDnn, DecodeEqualsTheCpus) {
  const unsigned seed = std::random_device()();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  cudanms::Status status;
  for (dnn::Head head : {dnn::Head::kYolo, dnn::Head::kBlazeFace, dnn::Head::kNanoDet}) {
    const int batch = 5;
    const int classes = head == dnn::Head::kYolo ? 7 : head == dnn::Head::kNanoDet ? 80 : 1;
    const int anchors = head == dnn::Head::kYolo ? 2100 : head == dnn::Head::kNanoDet ? 3549 : 896;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<float> t0, t1;
    if (head == dnn::Head::kNanoDet) {
      shapes = {{batch, anchors, classes}, {batch, anchors, 44}};
      t0.resize(static_cast<size_t>(batch) * anchors * classes);
      t1.resize(static_cast<size_t>(batch) * anchors * 44);
      for (float &v : t0) v = unit(rng) * unit(rng) * unit(rng);  // mostly low, as sigmoids
      for (float &v : t1) v = normal(rng);
    } else if (head == dnn::Head::kYolo) {
      shapes = {{batch, 4 + classes, anchors}};
      t0.resize(static_cast<size_t>(batch) * (4 + classes) * anchors);
      for (size_t i = 0; i < t0.size(); i++)
        t0[i] = (i / anchors) % (4 + classes) < 4 ? unit(rng) * 640 : unit(rng) * 0.8f;
    } else {
      shapes = {{batch, 896, 16}, {batch, 896, 1}};
      t0.resize(batch * 896 * 16), t1.resize(batch * 896);
      for (float &v : t0) v = normal(rng) * 5;
      for (float &v : t1) v = normal(rng);
    }
    const int input = head == dnn::Head::kYolo ? 640 : head == dnn::Head::kNanoDet ? 416 : 128;
    dnn::Outputs host;
    ASSERT_TRUE(dnn::Outputs::describe(head, shapes, &host, input, input).ok());
    host.tensors[0] = t0.data();
    host.tensors[1] = t1.empty() ? nullptr : t1.data();
    dnn::Outputs device = host;
    float *d0 = to_device(t0), *d1 = t1.empty() ? nullptr : to_device(t1);
    device.tensors[0] = d0, device.tensors[1] = d1;
    dnn::InputSpec spec = spec_of(input, input);
    std::vector<dnn::Letterbox> boxes;
    for (int i = 0; i < batch; i++)
      boxes.push_back(dnn::Letterbox::fit(100 + rng() % 2000, 100 + rng() % 2000, spec));
    cudanms::DeviceCandidatesPoolOptions options;
    options.capacity = dnn::max_candidates(host, dnn::DecodeParams());
    options.max_buffers = batch;
    auto pool = cudanms::DeviceCandidatesPool::create(options, &status);
    ASSERT_TRUE(pool) << status.message();
    std::vector<std::shared_ptr<cudanms::DeviceCandidates>> held;
    std::vector<cudanms::DeviceCandidates *> targets;
    for (int i = 0; i < batch; i++) {
      held.push_back(pool->acquire(&status));
      targets.push_back(held.back().get());
    }
    // Each frame its own threshold and class, as frames of several elements batched together.
    std::vector<dnn::DecodeParams> params;
    for (int i = 0; i < batch; i++) params.push_back(params_of(0.3f + 0.1f * i, 2 + i));
    // Frame 3 keeps three classes only (YOLO: of its best class).
    for (int c : {0, 2, 5}) params[3].classes.keep(c);
    std::vector<dnn::Candidates> gpu(batch);
    std::unique_ptr<bool[]> to_host(new bool[batch]);
    std::fill_n(to_host.get(), batch, true);
    to_host[1] = false;  // left on the device only
    std::shared_ptr<dnn::Download> download, download_1;
    ASSERT_TRUE(
        stage_
            ->decode(device, boxes.data(), targets.data(), params.data(), to_host.get(), &download)
            .ok());
    ASSERT_TRUE(download);
    EXPECT_FALSE(download->take(1, &gpu[1]).ok()) << "frame 1 stayed on the device";
    // A second batch launched before the first is read: each keeps its own candidates.
    std::unique_ptr<bool[]> only_1(new bool[batch]());
    only_1[1] = true;
    ASSERT_TRUE(
        stage_
            ->decode(device, boxes.data(), targets.data(), params.data(), only_1.get(), &download_1)
            .ok());
    for (int i = batch - 1; i >= 0; i--)  // in any order
      ASSERT_TRUE((i == 1 ? download_1 : download)->take(i, &gpu[i]).ok()) << "frame " << i;
    size_t total = 0;
    for (int i = 0; i < batch; i++) {
      dnn::Candidates cpu;
      ASSERT_TRUE(dnn::decode(host, i, boxes[i], params[i], &cpu).ok());
      cudanms::HostCandidates on_device;
      ASSERT_TRUE(targets[i]->download(&on_device).ok());
      for (const dnn::Candidates *g : {&gpu[i]}) {
        ASSERT_EQ(g->size(), cpu.size()) << "frame " << i;
        ASSERT_EQ(on_device.scores.size(), cpu.size()) << "frame " << i;
        if (head == dnn::Head::kNanoDet) {
          // Coordinates below 2 100 pixels: 4e-3 is ~30 of their float ulps; a wrong bin, cell
          // or stride is a pixel off or more.
          expect_boxes_near(g->boxes, cpu.boxes, 4e-3f);
          expect_boxes_near(on_device.boxes, cpu.boxes, 4e-3f);
        } else {
          EXPECT_EQ(g->boxes, cpu.boxes);
          EXPECT_EQ(on_device.boxes, cpu.boxes);
        }
        EXPECT_EQ(g->class_ids, cpu.class_ids);
        EXPECT_EQ(on_device.class_ids, cpu.class_ids);
        EXPECT_EQ(g->points, cpu.points);
        for (size_t k = 0; k < cpu.size(); k++) {
          EXPECT_NEAR(g->scores[k], cpu.scores[k], 2e-7f);
          EXPECT_NEAR(on_device.scores[k], cpu.scores[k], 2e-7f);
        }
      }
      total += cpu.size();
    }
    EXPECT_GT(total, 0u);
    cudaFree(d0);
    cudaFree(d1);
  }
}

// Batches through the stage with a stand-in forward (a memset) between pre-processing and
// decoding, the host asleep between batches: each batch is timed once it has passed, the gaps
// between consecutive ones hold the host's sleep as the stream's idle time, and a restart
// forgets what came before.
TEST_F(CudaDnn, GpuTimesFollowTheStream) {
  const std::vector<uint8_t> pixels(3 * 64 * 48, 90);
  const dnn::Image image = rgb_image(pixels, 64, 48);
  const dnn::InputSpec spec = spec_of(128, 128);
  std::vector<float> regressors(896 * 16, 0.0f), scores(896, -10.0f);
  float *d_regressors = to_device(regressors), *d_scores = to_device(scores);
  dnn::Outputs outputs;
  ASSERT_TRUE(dnn::Outputs::describe(dnn::Head::kBlazeFace, {{1, 896, 16}, {1, 896, 1}}, &outputs,
                                     128, 128)
                  .ok());
  outputs.tensors[0] = d_regressors, outputs.tensors[1] = d_scores;
  cudanms::Status status;
  cudanms::DeviceCandidatesPoolOptions options;
  options.capacity = dnn::max_candidates(outputs, dnn::DecodeParams());
  options.max_buffers = 1;
  auto pool = cudanms::DeviceCandidatesPool::create(options, &status);
  ASSERT_TRUE(pool) << status.message();
  std::shared_ptr<cudanms::DeviceCandidates> target = pool->acquire(&status);
  ASSERT_TRUE(target) << status.message();
  void *scratch = nullptr;
  constexpr size_t kForwardBytes = size_t{256} << 20;
  ASSERT_EQ(cudaMalloc(&scratch, kForwardBytes), cudaSuccess);
  const auto stream = static_cast<cudaStream_t>(stage_->stream());
  const dnn::Letterbox box = dnn::Letterbox::fit(64, 48, spec);
  const dnn::DecodeParams params;
  cudanms::DeviceCandidates *targets[] = {target.get()};
  auto run_batches = [&](int n) {
    for (int b = 0; b < n; b++) {
      if (b > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const bool on_device = false;
      float *d_input = nullptr;
      ASSERT_TRUE(stage_->preprocess(&image, &on_device, 1, spec, &d_input).ok());
      ASSERT_EQ(cudaMemsetAsync(scratch, b, kForwardBytes, stream), cudaSuccess);
      std::shared_ptr<dnn::Download> download;
      ASSERT_TRUE(stage_->decode(outputs, &box, targets, &params, nullptr, &download).ok());
    }
    ASSERT_TRUE(stage_->synchronize().ok());
  };
  run_batches(2);
  stage_->restart_gpu_times();
  EXPECT_EQ(stage_->gpu_times().batches, 0u);
  run_batches(5);
  const dnn::GpuTimes times = stage_->gpu_times();
  EXPECT_EQ(times.batches, 5u);
  EXPECT_EQ(times.gaps, 4u);
  EXPECT_GT(times.forward_ms, 0.0);
  EXPECT_GT(times.decode_ms, 0.0);
  // Each gap holds a 20 ms sleep of the host (and never more than the run's own length).
  EXPECT_GE(times.idle_ms / times.gaps, 19.0);
  EXPECT_LT(times.idle_ms / times.gaps, 1000.0);
  cudaFree(scratch);
  cudaFree(d_regressors);
  cudaFree(d_scores);
}

#else

TEST(CudaDnn, NeedsACudaBuild) { GTEST_SKIP() << "cudanms was built without CUDA"; }

#endif
