/* The picture's motion from frame to frame, for boxtrack's camera-motion: each frame's luma (the
 * first plane of GRAY8 and the YUV formats, computed from the RGB ones; 8 bits a sample) handed
 * to cudanms/camera_motion.h. Frames in system memory only; where the build has no OpenCV, no
 * frame can be read. */
#pragma once

#include <gst/video/video.h>

#include <cstdint>
#include <string>
#include <vector>

#include <cudanms/track.h>
#ifdef CUDANMS_CAMERA_MOTION
#include <cudanms/camera_motion.h>
#endif

class FrameMotion {
 public:
  /* Takes the stream's caps: true when its frames can be read, else false with why. */
  bool set_caps(const GstCaps *caps, std::string *why);
  /* A new stream, or a jump in it: the next frame has no motion. */
  void reset();
  /* The motion from the previous frame to @buf's; none when it cannot be mapped. */
  cudanms::CameraMotion next(GstBuffer *buf);

 private:
  GstVideoInfo info_{};
  bool readable_ = false;
  std::vector<uint8_t> luma_;
#ifdef CUDANMS_CAMERA_MOTION
  cudanms::CameraMotionEstimator estimator_;
#endif
};
