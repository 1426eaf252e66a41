/* The luma plane of a frame in GstCudaMemory (from cudaupload, nvh264dec...), mapped for the
 * cascade to read in place on the GPU: no download, no upload. */
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include "cudanms/cascade.h"

class CudaLumaPlane {
 public:
  CudaLumaPlane() = default;
  ~CudaLumaPlane();
  CudaLumaPlane(const CudaLumaPlane &) = delete;
  CudaLumaPlane &operator=(const CudaLumaPlane &) = delete;

  /* Maps plane 0 for CUDA reads when the buffer is one GstCudaMemory of @cuda_context (a
   * CUcontext) in a format whose first plane is the luma (GRAY8, I420, YV12, NV12, NV21).
   * False otherwise (and always without gstreamer-cuda): the caller reads the frame on the host. */
  bool map(GstBuffer *buffer, void *cuda_context);
  const cudanms::cascade::GrayView &view() const { return view_; }

 private:
  GstMemory *memory_ = nullptr;
  GstMapInfo info_ = GST_MAP_INFO_INIT;
  cudanms::cascade::GrayView view_;
};
