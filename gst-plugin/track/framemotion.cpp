#include "framemotion.h"

bool FrameMotion::set_caps(const GstCaps *caps, std::string *why) {
  readable_ = false;
  reset();
#ifndef CUDANMS_CAMERA_MOTION
  (void)caps;
  *why = "this build has no OpenCV, which camera-motion needs";
  return false;
#else
  GstCapsFeatures *features = gst_caps_get_features(caps, 0);
  if (features && !gst_caps_features_is_any(features) &&
      !gst_caps_features_is_equal(features, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY)) {
    gchar *text = gst_caps_features_to_string(features);
    *why = std::string("camera-motion reads frames in system memory, not ") + text +
           " (put cudadownload before boxtrack)";
    g_free(text);
    return false;
  }
  if (!gst_video_info_from_caps(&info_, caps)) {
    *why = "camera-motion needs raw video caps";
    return false;
  }
  const GstVideoFormatInfo *format = info_.finfo;
  if (!(GST_VIDEO_FORMAT_INFO_IS_YUV(format) || GST_VIDEO_FORMAT_INFO_IS_GRAY(format) ||
        GST_VIDEO_FORMAT_INFO_IS_RGB(format)) ||
      GST_VIDEO_FORMAT_INFO_DEPTH(format, 0) != 8 || GST_VIDEO_FORMAT_INFO_IS_TILED(format)) {
    *why = std::string("camera-motion reads 8-bit gray, YUV or RGB frames, not ") +
           GST_VIDEO_FORMAT_INFO_NAME(format);
    return false;
  }
  readable_ = true;
  return true;
#endif
}

void FrameMotion::reset() {
#ifdef CUDANMS_CAMERA_MOTION
  estimator_.reset();
#endif
}

cudanms::CameraMotion FrameMotion::next(GstBuffer *buf) {
#ifndef CUDANMS_CAMERA_MOTION
  (void)buf;
  return {};
#else
  GstVideoFrame frame;
  if (!readable_ || !gst_video_frame_map(&frame, &info_, buf, GST_MAP_READ)) {
    reset();
    return {};
  }
  const int width = GST_VIDEO_FRAME_WIDTH(&frame), height = GST_VIDEO_FRAME_HEIGHT(&frame);
  const uint8_t *first = static_cast<const uint8_t *>(GST_VIDEO_FRAME_COMP_DATA(&frame, 0));
  const int row = GST_VIDEO_FRAME_COMP_STRIDE(&frame, 0);
  const int step = GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, 0);
  cudanms::CameraMotion motion;
  if (!GST_VIDEO_FORMAT_INFO_IS_RGB(info_.finfo) && step == 1) {
    motion = estimator_.next(first, width, height, static_cast<size_t>(row));  // the luma plane
  } else {
    // Luma gathered from a packed format (YUY2's every other byte), or computed from R, G, B
    // (BT.601's weights).
    luma_.resize(static_cast<size_t>(width) * static_cast<size_t>(height));
    const bool rgb = GST_VIDEO_FORMAT_INFO_IS_RGB(info_.finfo);
    const uint8_t *g = static_cast<const uint8_t *>(GST_VIDEO_FRAME_COMP_DATA(&frame, 1));
    const uint8_t *b = static_cast<const uint8_t *>(GST_VIDEO_FRAME_COMP_DATA(&frame, 2));
    const int g_step = GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, 1);
    const int b_step = GST_VIDEO_FRAME_COMP_PSTRIDE(&frame, 2);
    for (int y = 0; y < height; ++y) {
      uint8_t *out = luma_.data() + static_cast<size_t>(y) * static_cast<size_t>(width);
      const size_t line = static_cast<size_t>(y) * static_cast<size_t>(row);
      for (int x = 0; x < width; ++x) {
        const uint8_t v = first[line + static_cast<size_t>(x * step)];
        out[x] = rgb ? static_cast<uint8_t>((77 * v + 150 * g[line + static_cast<size_t>(x * g_step)] +
                                             29 * b[line + static_cast<size_t>(x * b_step)]) >>
                                            8)
                     : v;
      }
    }
    motion = estimator_.next(luma_.data(), width, height, static_cast<size_t>(width));
  }
  gst_video_frame_unmap(&frame);
  return motion;
#endif
}
