#include "dnnimage.h"

namespace dnn = cudanms::dnn;

gboolean gst_cv_dnn_image_of(GstVideoFormat format, int width, int height,
                             const GstVideoColorimetry &colorimetry, const guint8 *const *planes,
                             const int *strides, dnn::Image *image) {
  *image = dnn::Image();
  switch (format) {
    case GST_VIDEO_FORMAT_RGB: image->format = dnn::PixelFormat::kRGB; break;
    case GST_VIDEO_FORMAT_BGR: image->format = dnn::PixelFormat::kBGR; break;
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_RGBA: image->format = dnn::PixelFormat::kRGBx; break;
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_BGRA: image->format = dnn::PixelFormat::kBGRx; break;
    case GST_VIDEO_FORMAT_I420: image->format = dnn::PixelFormat::kI420; break;
    case GST_VIDEO_FORMAT_NV12: image->format = dnn::PixelFormat::kNV12; break;
    default: return FALSE;
  }
  image->width = width;
  image->height = height;
  for (int p = 0; p < 3; p++) image->planes[p] = planes[p], image->strides[p] = strides[p];
  image->matrix = colorimetry.matrix == GST_VIDEO_COLOR_MATRIX_BT709 ? dnn::YuvMatrix::kBt709
                                                                      : dnn::YuvMatrix::kBt601;
  image->full_range = colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  return TRUE;
}

gboolean gst_cv_dnn_image_of_frame(const GstVideoFrame *frame, dnn::Image *image) {
  const guint8 *planes[3];
  int strides[3];
  for (int p = 0; p < 3; p++) {
    const bool has = p < static_cast<int>(GST_VIDEO_FRAME_N_PLANES(frame));
    planes[p] = has ? static_cast<const guint8 *>(GST_VIDEO_FRAME_PLANE_DATA(frame, p)) : nullptr;
    strides[p] = has ? GST_VIDEO_FRAME_PLANE_STRIDE(frame, p) : 0;
  }
  return gst_cv_dnn_image_of(GST_VIDEO_FRAME_FORMAT(frame), GST_VIDEO_FRAME_WIDTH(frame),
                             GST_VIDEO_FRAME_HEIGHT(frame), frame->info.colorimetry, planes,
                             strides, image);
}
