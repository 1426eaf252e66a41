// The camera's motion between frames (cudanms/camera_motion.h) on a textured picture moved by
// known shifts and zooms.
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "cudanms/camera_motion.h"

namespace cudanms {
namespace {

// A 1920 x 1080 picture of blurred noise (corners everywhere), seen moved by (scale, dx, dy).
cv::Mat texture() {
  cv::Mat noise(1400, 2400, CV_8UC1);
  cv::RNG rng(7);
  rng.fill(noise, cv::RNG::UNIFORM, 0, 256);
  cv::GaussianBlur(noise, noise, cv::Size(0, 0), 3);
  return noise;
}

cv::Mat seen(const cv::Mat &world, double scale, double dx, double dy) {
  const cv::Mat move = (cv::Mat_<double>(2, 3) << scale, 0, dx - 200, 0, scale, dy - 160);
  cv::Mat out;
  cv::warpAffine(world, out, move, cv::Size(1920, 1080), cv::INTER_LINEAR);
  return out;
}

CameraMotion between(CameraMotionEstimator &estimator, const cv::Mat &a, const cv::Mat &b) {
  estimator.reset();
  EXPECT_EQ(estimator.next(a.data, a.cols, a.rows, a.step).dx, 0.0);  // the first: none
  return estimator.next(b.data, b.cols, b.rows, b.step);
}

TEST(CameraMotion, ShiftsAndZoomsAreFound) {
  const cv::Mat world = texture();
  CameraMotionEstimator estimator;
  const CameraMotion pan = between(estimator, seen(world, 1, 0, 0), seen(world, 1, -37, 12));
  EXPECT_NEAR(pan.dx, -37, 1.0);
  EXPECT_NEAR(pan.dy, 12, 1.0);
  EXPECT_NEAR(pan.scale, 1, 0.005);
  // A zoom of 4 % about the picture's (0, 0): (x, y) -> 1.04 (x, y), plus a shift.
  const cv::Mat before = seen(world, 1, 0, 0);
  const cv::Mat move = (cv::Mat_<double>(2, 3) << 1.04, 0, 5, 0, 1.04, -3);
  cv::Mat after;
  cv::warpAffine(before, after, move, before.size(), cv::INTER_LINEAR);
  const CameraMotion zoom = between(estimator, before, after);
  EXPECT_NEAR(zoom.scale, 1.04, 0.005);
  EXPECT_NEAR(zoom.dx, 5, 2.0);
  EXPECT_NEAR(zoom.dy, -3, 2.0);
}

TEST(CameraMotion, NothingToFollowIsNoMotion) {
  CameraMotionEstimator estimator;
  const cv::Mat blank(480, 640, CV_8UC1, cv::Scalar(90));
  EXPECT_EQ(estimator.next(blank.data, 640, 480, blank.step).dx, 0.0);
  const CameraMotion none = estimator.next(blank.data, 640, 480, blank.step);
  EXPECT_EQ(none.scale, 1.0);
  EXPECT_EQ(none.dx, 0.0);
  EXPECT_EQ(none.dy, 0.0);
  // Another size: no motion between pictures of two sizes.
  const cv::Mat world = texture();
  const cv::Mat a = seen(world, 1, 0, 0);
  estimator.next(a.data, a.cols, a.rows, a.step);
  const cv::Mat smaller = a(cv::Rect(0, 0, 960, 540)).clone();
  EXPECT_EQ(estimator.next(smaller.data, 960, 540, smaller.step).dx, 0.0);
  EXPECT_EQ(estimator.next(nullptr, 0, 0, 0).dx, 0.0);
}

}  // namespace
}  // namespace cudanms
