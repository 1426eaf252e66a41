#include "cudaframe.h"

#ifdef CUDANMS_HAVE_GST_CUDA
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudamemory.h>
#endif

CudaLumaPlane::~CudaLumaPlane() {
  if (memory_) gst_memory_unmap(memory_, &info_);
}

#ifdef CUDANMS_HAVE_GST_CUDA

bool CudaLumaPlane::map(GstBuffer *buffer, void *cuda_context) {
  if (memory_ || cuda_context == nullptr || gst_buffer_n_memory(buffer) != 1) return false;
  GstMemory *memory = gst_buffer_peek_memory(buffer, 0);
  if (!gst_is_cuda_memory(memory)) return false;
  GstCudaMemory *cuda = GST_CUDA_MEMORY_CAST(memory);
  if (gst_cuda_context_get_handle(cuda->context) != cuda_context) return false;
  switch (GST_VIDEO_INFO_FORMAT(&cuda->info)) {
    case GST_VIDEO_FORMAT_GRAY8:
    case GST_VIDEO_FORMAT_I420:
    case GST_VIDEO_FORMAT_YV12:
    case GST_VIDEO_FORMAT_NV12:
    case GST_VIDEO_FORMAT_NV21:
      break;
    default:
      return false;
  }
  /* GST_MAP_CUDA: the device address, uploaded first should the host copy be newer. */
  if (!gst_memory_map(memory, &info_, static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA)))
    return false;
  memory_ = memory;
  view_.pixels = info_.data + GST_VIDEO_INFO_PLANE_OFFSET(&cuda->info, 0);
  view_.width = GST_VIDEO_INFO_WIDTH(&cuda->info);
  view_.height = GST_VIDEO_INFO_HEIGHT(&cuda->info);
  view_.stride = static_cast<size_t>(GST_VIDEO_INFO_PLANE_STRIDE(&cuda->info, 0));
  view_.on_device = true;
  return true;
}

#else

bool CudaLumaPlane::map(GstBuffer *, void *) { return false; }

#endif
