// cudanms/dnn.h's input tensor against the references' own rule written with OpenCV: the frame
// scaled by `cv::resize(INTER_LINEAR)` (Ultralytics' LetterBox calls it; MediaPipe's GPU
// ImageToTensorCalculator samples the same way), placed at the letterbox's offset in a canvas of
// the padding value, then normalised. The resize runs on float pixels, as ours does: what is left
// is float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "cudanms/dnn.h"
#include "support/seed.h"

namespace dnn = cudanms::dnn;

namespace {

// The reference: [3, H, W] RGB planes.
std::vector<float> opencv_input(const cv::Mat &rgb, const dnn::InputSpec &spec) {
  const dnn::Letterbox box = dnn::Letterbox::fit(rgb.cols, rgb.rows, spec);
  cv::Mat pixels, scaled;
  rgb.convertTo(pixels, CV_32FC3);
  cv::resize(pixels, scaled, cv::Size(box.scaled_width, box.scaled_height), 0, 0,
             cv::INTER_LINEAR);
  cv::Mat canvas(spec.height, spec.width, CV_32FC3, cv::Scalar::all(spec.pad_value));
  scaled.copyTo(canvas(cv::Rect(box.pad_x, box.pad_y, box.scaled_width, box.scaled_height)));
  std::vector<float> chw(3 * spec.width * spec.height);
  for (int y = 0; y < spec.height; y++)
    for (int x = 0; x < spec.width; x++)
      for (int c = 0; c < 3; c++)
        chw[(c * spec.height + y) * spec.width + x] =
            (canvas.at<cv::Vec3f>(y, x)[c] - spec.mean[c]) * spec.scale[c];
  return chw;
}

// A frame of smooth gradients plus noise: interpolation errors show on both.
cv::Mat random_frame(int width, int height, std::mt19937 &rng) {
  cv::Mat frame(height, width, CV_8UC3);
  std::uniform_int_distribution<int> noise(0, 40);
  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++)
      for (int c = 0; c < 3; c++)
        frame.at<cv::Vec3b>(y, x)[c] = static_cast<uint8_t>(
            (x * (c + 1) * 7 + y * 3 + noise(rng)) % 216);
  return frame;
}

}  // namespace

TEST(DnnInputOpenCv, IsCvResizeLetterboxed) {
  const uint64_t seed = cudanms::testing::run_seed();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  dnn::InputSpec blazeface;  // MediaPipe: [-1, 1], padding black
  blazeface.width = blazeface.height = 128;
  for (int c = 0; c < 3; c++) blazeface.mean[c] = 127.5f, blazeface.scale[c] = 1 / 127.5f;
  dnn::InputSpec yolo;  // Ultralytics: [0, 1], padding grey 114
  yolo.width = 640, yolo.height = 384, yolo.pad_value = 114;
  for (float &s : yolo.scale) s = 1.0f / 255;
  dnn::InputSpec stretched = yolo;
  stretched.letterbox = false;
  std::vector<std::pair<int, int>> sizes = {{1920, 1080}, {1280, 720}, {640, 480}, {100, 60},
                                            {128, 128},   {50, 300},   {641, 385}};
  for (int i = 0; i < 12; i++) sizes.emplace_back(2 + rng() % 1500, 2 + rng() % 1500);
  double worst = 0;
  for (const auto &[w, h] : sizes) {
    const cv::Mat frame = random_frame(w, h, rng);
    dnn::Image image;
    image.format = dnn::PixelFormat::kRGB;
    image.width = w, image.height = h;
    image.planes[0] = frame.data;
    image.strides[0] = static_cast<int>(frame.step[0]);
    for (const dnn::InputSpec *spec : {&blazeface, &yolo, &stretched}) {
      std::vector<float> ours(3 * spec->width * spec->height);
      ASSERT_TRUE(dnn::preprocess(image, *spec, ours.data()).ok());
      const std::vector<float> theirs = opencv_input(frame, *spec);
      for (size_t k = 0; k < ours.size(); k++) {
        // In pixel units (0..255), whatever the normalisation.
        const double diff = std::fabs(double(ours[k]) - theirs[k]) / spec->scale[0];
        worst = std::max(worst, diff);
        ASSERT_LT(diff, 1e-3) << w << "x" << h << " into " << spec->width << "x" << spec->height
                              << (spec->letterbox ? "" : " stretched") << ", value " << k
                              << ": " << ours[k] << " against " << theirs[k] << " (seed " << seed
                              << ")";
      }
    }
  }
  std::printf("input tensor against cv::resize(INTER_LINEAR), %zu frames x 3 inputs: max |diff| "
              "%.3g of 255\n",
              sizes.size(), worst);
}
