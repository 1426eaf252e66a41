#include "cudanms/camera_motion.h"

#include <algorithm>
#include <cmath>
#include <opencv2/calib3d.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>
#include <vector>

namespace cudanms {
namespace {

constexpr int kMaxWidth = 480;
constexpr int kMinFollowed = 5;
constexpr int kPyramidLevels = 5;
constexpr int kMaxCorners = 200;
constexpr double kCornerSpacing = 8;  // pixels of the small frame: corners all over it

}  // namespace

struct CameraMotionEstimator::State {
  cv::Mat previous;  // downscaled
  std::vector<cv::Point2f> corners;
  double downscale = 1;
};

CameraMotionEstimator::CameraMotionEstimator() : state_(std::make_unique<State>()) {}
CameraMotionEstimator::~CameraMotionEstimator() = default;

void CameraMotionEstimator::reset() { *state_ = State(); }

CameraMotion CameraMotionEstimator::next(const uint8_t *gray, int width, int height,
                                         size_t stride) {
  State &s = *state_;
  if (!gray || width <= 0 || height <= 0) {
    reset();
    return {};
  }
  const cv::Mat frame(height, width, CV_8UC1, const_cast<uint8_t *>(gray), stride);
  const double downscale = std::max(1.0, std::ceil(static_cast<double>(width) / kMaxWidth));
  cv::Mat small;
  if (downscale > 1) {
    cv::resize(frame, small,
               cv::Size(static_cast<int>(width / downscale), static_cast<int>(height / downscale)),
               0, 0, cv::INTER_LINEAR);
  } else {
    small = frame.clone();
  }
  std::vector<cv::Point2f> corners;
  cv::goodFeaturesToTrack(small, corners, kMaxCorners, 0.01, kCornerSpacing, cv::noArray(), 3, false,
                          0.04);

  CameraMotion motion;
  if (!s.previous.empty() && s.previous.size() == small.size() && s.downscale == downscale &&
      s.corners.size() >= kMinFollowed) {
    std::vector<cv::Point2f> followed;
    std::vector<uint8_t> found;
    std::vector<float> error;
    // Five pyramid levels (OpenCV's default is 3): a 21-pixel window then follows a pan of up to
    // ~300 pixels a frame, a jerking camera's.
    cv::calcOpticalFlowPyrLK(s.previous, small, s.corners, followed, found, error,
                             cv::Size(21, 21), kPyramidLevels);
    std::vector<cv::Point2f> from, to;
    for (size_t i = 0; i < found.size(); ++i)
      if (found[i]) {
        from.push_back(s.corners[i]);
        to.push_back(followed[i]);
      }
    if (from.size() >= kMinFollowed) {
      const cv::Mat fit = cv::estimateAffinePartial2D(from, to, cv::noArray(), cv::RANSAC);
      if (!fit.empty()) {
        const double a = fit.at<double>(0, 0), b = fit.at<double>(1, 0);
        motion.scale = std::sqrt(a * a + b * b);
        motion.dx = fit.at<double>(0, 2) * downscale;
        motion.dy = fit.at<double>(1, 2) * downscale;
        if (!std::isfinite(motion.scale) || !std::isfinite(motion.dx) ||
            !std::isfinite(motion.dy) || motion.scale <= 0)
          motion = {};
      }
    }
  }
  s.previous = small;
  s.corners = std::move(corners);
  s.downscale = downscale;
  return motion;
}

}  // namespace cudanms
