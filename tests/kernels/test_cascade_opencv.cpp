// The CPU twin against OpenCV itself: every case on every real frame, window for window. The
// table it prints is the one in the README.
#include <opencv2/objdetect.hpp>

#include "cascade_support.h"

namespace cudanms::testing {
namespace {

using cudanms::cascade::Detector;
using cudanms::cascade::DetectorOptions;
using cudanms::cascade::Model;
using cudanms::cascade::Window;

TEST(CascadeOpenCv, CpuTwinFindsOpenCvsWindows) {
  std::string why;
  const std::vector<GrayFrame> frames = cpu_cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  Agreement total;
  std::printf(
      "| cascade, scale factor, min, max | frame | OpenCV windows | identical | extra | max score "
      "error |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const CascadeCase &c : cascade_cases()) {
    const std::string path = cascade_path(c.cascade);
    if (!file_exists(path)) GTEST_SKIP() << path << " is missing: install opencv-data";
    Status status;
    auto model = Model::load(path, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    auto detector = Detector::create(model, DetectorOptions{}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    cv::CascadeClassifier reference(path);
    ASSERT_FALSE(reference.empty());
    for (const GrayFrame &frame : frames) {
      std::vector<cv::Rect> rects;
      std::vector<int> levels;
      std::vector<double> weights;
      reference.detectMultiScale(frame.gray, rects, levels, weights, c.scale_factor, 0, 0,
                                 c.min_size, c.max_size, true);
      std::vector<Window> ours;
      status = detector->detect(view_of(frame.gray), params_of(c), &ours);
      ASSERT_TRUE(status.ok()) << status.message();
      const Agreement a = compare_windows(rects, weights, ours);
      std::printf("| %s | %s | %zu | %zu | %zu | %.2g |\n", case_name(c).c_str(),
                  frame.name.c_str(), a.reference, a.identical, a.extra, a.max_score_error);
      EXPECT_GE(a.identical, a.reference - a.reference / 200) << case_name(c) << " " << frame.name;
      EXPECT_LE(a.extra, a.reference / 200) << case_name(c) << " " << frame.name;
      EXPECT_LE(a.max_score_error, 1e-3) << case_name(c) << " " << frame.name;
      total.reference += a.reference;
      total.identical += a.identical;
      total.extra += a.extra;
      total.max_score_error = std::max(total.max_score_error, a.max_score_error);
    }
  }
  std::printf("| all | | %zu | %zu | %zu | %.2g |\n", total.reference, total.identical, total.extra,
              total.max_score_error);
  // 399 windows without the 1080p frames (the small scale), many more with them.
  EXPECT_GT(total.reference, small_test_scale() ? 300u : 500u)
      << "the frames should give OpenCV windows to compare";
}

}  // namespace
}  // namespace cudanms::testing
