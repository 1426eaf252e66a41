// The BlazeFace network dnndetect runs (the TorchScript tools/blazeface-to-torchscript.py writes)
// against OpenCV DNN on the ONNX it came from, fed the same input tensors of 30 real frames. Both
// compute in float32, in other orders: they cannot agree closer than float32 lets either agree
// with the exact result. So the same TorchScript run in float64 is the yardstick: OpenCV's outputs
// must be as close to it as LibTorch's own float32 outputs are (a wrong conversion, a padding or
// an axis off, would be orders of magnitude further), and the test prints how close each is.
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <opencv2/dnn.hpp>
#include <string>
#include <vector>

#include "cudanms/dnn.h"
#include "gst-plugin/cv_support.h"
#include "gst-plugin/video_frames.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

// The largest differences against the float64 outputs: absolute, and relative to max(1, |v|).
struct Distance {
  double absolute = 0, relative = 0;
  void add(double value, double exact) {
    const double d = std::abs(value - exact);
    absolute = std::max(absolute, d);
    relative = std::max(relative, d / std::max(1.0, std::abs(exact)));
  }
};

// The TorchScript's two outputs, [1, 896, 16] regressors and [1, 896, 1] logits, as 896 x 17.
std::vector<double> torch_outputs(torch::jit::Module &module, const std::vector<float> &chw,
                                  torch::Dtype dtype) {
  torch::NoGradGuard no_grad;
  const at::Tensor input =
      torch::from_blob(const_cast<float *>(chw.data()), {1, 3, 128, 128}).to(dtype);
  const auto outputs = module.forward({input}).toTuple()->elements();
  const at::Tensor regressors = outputs[0].toTensor().to(torch::kDouble).contiguous();
  const at::Tensor logits = outputs[1].toTensor().to(torch::kDouble).contiguous();
  std::vector<double> out(896 * 17);
  for (int i = 0; i < 896; i++) {
    for (int k = 0; k < 16; k++) out[17 * i + k] = regressors.data_ptr<double>()[16 * i + k];
    out[17 * i + 16] = logits.data_ptr<double>()[i];
  }
  return out;
}

// OpenCV's four heads, concatenated as the converter does (stride 8 first), as 896 x 17.
std::vector<double> opencv_outputs(cv::dnn::Net &net, const std::vector<float> &chw) {
  const int shape[] = {1, 128, 128, 3};  // the ONNX takes NHWC
  cv::Mat nhwc(4, shape, CV_32F);
  for (int i = 0; i < 128 * 128; i++)
    for (int c = 0; c < 3; c++) nhwc.ptr<float>()[3 * i + c] = chw[c * 128 * 128 + i];
  net.setInput(nhwc);
  std::vector<cv::Mat> outs;
  net.forward(outs, net.getUnconnectedOutLayersNames());
  std::array<const cv::Mat *, 2> regressors{}, logits{};
  for (const cv::Mat &o : outs) {
    const int head = o.size[1] == 512 ? 0 : 1;
    (o.size[2] == 16 ? regressors : logits)[head] = &o;
  }
  std::vector<double> out(896 * 17);
  if (!regressors[0] || !regressors[1] || !logits[0] || !logits[1]) return {};
  for (int i = 0; i < 896; i++) {
    const int head = i < 512 ? 0 : 1, at = i < 512 ? i : i - 512;
    for (int k = 0; k < 16; k++) out[17 * i + k] = regressors[head]->ptr<float>()[16 * at + k];
    out[17 * i + 16] = logits[head]->ptr<float>()[at];
  }
  return out;
}

TEST(BlazeFaceNetwork, OpenCvDnnIsAsCloseToTheFloat64NetworkAsLibTorchIs) {
  gst_init(nullptr, nullptr);
  SKIP_WITHOUT_FILE(opencv_sample("Megamind.avi"), "opencv-doc");
  SKIP_WITHOUT_TORCHSCRIPT_BLAZEFACE();
  torch::jit::Module single = torch::jit::load(torchscript_blazeface(), torch::kCPU);
  torch::jit::Module exact = torch::jit::load(torchscript_blazeface(), torch::kCPU);
  single.eval();
  exact.eval();
  exact.to(torch::kDouble);
  cv::dnn::Net net = cv::dnn::readNetFromONNX(blazeface_model());
  dnn::InputSpec spec;
  spec.width = spec.height = 128;
  for (int c = 0; c < 3; c++) spec.mean[c] = 127.5f, spec.scale[c] = 1 / 127.5f;
  const std::vector<cv::Mat> frames = megamind_frames(30);
  ASSERT_EQ(frames.size(), 30u);
  Distance libtorch, opencv, between;
  for (const cv::Mat &frame : frames) {
    dnn::Image image;
    image.format = dnn::PixelFormat::kBGR;
    image.width = frame.cols, image.height = frame.rows;
    image.planes[0] = frame.data;
    image.strides[0] = static_cast<int>(frame.step[0]);
    std::vector<float> chw(3 * 128 * 128);
    ASSERT_TRUE(dnn::preprocess(image, spec, chw.data()).ok());
    const std::vector<double> truth = torch_outputs(exact, chw, torch::kDouble);
    const std::vector<double> ours = torch_outputs(single, chw, torch::kFloat32);
    const std::vector<double> theirs = opencv_outputs(net, chw);
    ASSERT_EQ(theirs.size(), truth.size()) << "OpenCV's network lacks one of its four heads";
    for (size_t i = 0; i < truth.size(); i++) {
      libtorch.add(ours[i], truth[i]);
      opencv.add(theirs[i], truth[i]);
      between.add(ours[i], theirs[i]);
    }
  }
  std::printf(
      "30 frames x 896 anchors x 17 outputs, max |diff| (relative to max(1, |v|)):\n"
      "  LibTorch float32 vs float64:   %.3g (%.3g)\n"
      "  OpenCV DNN float32 vs float64: %.3g (%.3g)\n"
      "  LibTorch vs OpenCV, float32:   %.3g (%.3g)\n",
      libtorch.absolute, libtorch.relative, opencv.absolute, opencv.relative, between.absolute,
      between.relative);
  // A conversion error would put OpenCV far from the float64 network: a tenth of a pixel at
  // least, where float32 rounding leaves thousandths.
  EXPECT_LT(opencv.relative, 4 * std::max(libtorch.relative, 1e-5));
  EXPECT_LT(between.relative, 1e-3);
}

}  // namespace
}  // namespace cudanms::testing
