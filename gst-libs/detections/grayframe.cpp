#include "grayframe.h"

#include <opencv2/imgproc.hpp>

gboolean gst_cv_first_plane_is_luma(GstVideoFormat format) {
  switch (format) {
    case GST_VIDEO_FORMAT_GRAY8:
    case GST_VIDEO_FORMAT_I420:
    case GST_VIDEO_FORMAT_YV12:
    case GST_VIDEO_FORMAT_NV12:
    case GST_VIDEO_FORMAT_NV21:
      return TRUE;
    default:
      return FALSE;
  }
}

gboolean gst_cv_gray_of(GstVideoFrame *frame, cv::Mat *scratch, cv::Mat *gray) {
  const int w = GST_VIDEO_FRAME_WIDTH(frame), h = GST_VIDEO_FRAME_HEIGHT(frame);
  void *data = GST_VIDEO_FRAME_PLANE_DATA(frame, 0);
  const size_t stride = GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0);
  if (gst_cv_first_plane_is_luma(GST_VIDEO_FRAME_FORMAT(frame))) {
    *gray = cv::Mat(h, w, CV_8UC1, data, stride);
    return TRUE;
  }
  int code = -1, type = CV_8UC1;
  switch (GST_VIDEO_FRAME_FORMAT(frame)) {
    case GST_VIDEO_FORMAT_BGR:
      code = cv::COLOR_BGR2GRAY, type = CV_8UC3;
      break;
    case GST_VIDEO_FORMAT_RGB:
      code = cv::COLOR_RGB2GRAY, type = CV_8UC3;
      break;
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_BGRA:
      code = cv::COLOR_BGRA2GRAY, type = CV_8UC4;
      break;
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_RGBA:
      code = cv::COLOR_RGBA2GRAY, type = CV_8UC4;
      break;
    default:
      return FALSE;
  }
  cv::cvtColor(cv::Mat(h, w, type, data, stride), *scratch, code);
  *gray = *scratch;
  return TRUE;
}
