// The camera's motion between consecutive frames, for the tracker's compensation
// (cudanms/track.h, CameraMotion): BoT-SORT's sparse optical flow (Aharon et al. 2022, its GMC
// "sparseOptFlow") with OpenCV: the frame made at most 480 pixels wide, up to 200 corners at
// least 8 pixels apart found (goodFeaturesToTrack), followed into the next frame
// (calcOpticalFlowPyrLK, five pyramid levels: pans of up to ~300 small pixels), and a rotation,
// scale and shift fitted to them (estimateAffinePartial2D, RANSAC); the rotation is dropped.
// BoT-SORT's 960 pixels and 1000 corners cost 34 ms a 1080p frame on one core of the dev
// machine, these 7 ms (cudanms-tool track-bench --camera-motion: corners ~3.5 ms, the flow ~3.5),
// and find shifts within a pixel (tests/kernels/test_camera_motion.cpp).
// Built where OpenCV is (meson: cudanms_motion_dep).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cudanms/track.h"

namespace cudanms {

class CameraMotionEstimator {
 public:
  CameraMotionEstimator();
  ~CameraMotionEstimator();
  CameraMotionEstimator(const CameraMotionEstimator &) = delete;
  CameraMotionEstimator &operator=(const CameraMotionEstimator &) = delete;

  // The motion from the previous frame given to this one, `gray` an 8-bit single-channel picture
  // (rows `stride` bytes apart). None for the first frame, after reset(), after a change of size,
  // or where too few corners could be followed (a blank or cut picture).
  CameraMotion next(const uint8_t *gray, int width, int height, size_t stride);
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cudanms
