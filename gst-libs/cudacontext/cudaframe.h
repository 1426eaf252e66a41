/* A frame in GstCudaMemory (from cudaupload, nvh264dec...) mapped for CUDA reads in place: the
 * device address of each plane, no download, no upload. */
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

class CudaFrame {
 public:
  CudaFrame() = default;
  ~CudaFrame();
  CudaFrame(const CudaFrame &) = delete;
  CudaFrame &operator=(const CudaFrame &) = delete;

  /* Maps the frame for CUDA reads when the buffer is one GstCudaMemory of @cuda_context (a
   * CUcontext). False otherwise (and always without gstreamer-cuda): the caller reads the frame
   * on the host. */
  bool map(GstBuffer *buffer, void *cuda_context);
  GstVideoFormat format() const { return GST_VIDEO_INFO_FORMAT(&info_); }
  int width() const { return GST_VIDEO_INFO_WIDTH(&info_); }
  int height() const { return GST_VIDEO_INFO_HEIGHT(&info_); }
  const guint8 *plane(int p) const { return map_.data + GST_VIDEO_INFO_PLANE_OFFSET(&info_, p); }
  int stride(int p) const { return GST_VIDEO_INFO_PLANE_STRIDE(&info_, p); }
  const GstVideoInfo &info() const { return info_; }

 private:
  GstMemory *memory_ = nullptr;
  GstMapInfo map_ = GST_MAP_INFO_INIT;
  GstVideoInfo info_{};
};
