#include "cudaframe.h"

#ifdef CUDANMS_HAVE_GST_CUDA
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudamemory.h>
#endif

CudaFrame::~CudaFrame() {
  if (memory_) gst_memory_unmap(memory_, &map_);
}

#ifdef CUDANMS_HAVE_GST_CUDA

bool CudaFrame::map(GstBuffer *buffer, void *cuda_context) {
  if (memory_ || cuda_context == nullptr || gst_buffer_n_memory(buffer) != 1) return false;
  GstMemory *memory = gst_buffer_peek_memory(buffer, 0);
  if (!gst_is_cuda_memory(memory)) return false;
  GstCudaMemory *cuda = GST_CUDA_MEMORY_CAST(memory);
  if (gst_cuda_context_get_handle(cuda->context) != cuda_context) return false;
  /* GST_MAP_CUDA: the device address, uploaded first should the host copy be newer. */
  if (!gst_memory_map(memory, &map_, static_cast<GstMapFlags>(GST_MAP_READ | GST_MAP_CUDA)))
    return false;
  memory_ = memory;
  info_ = cuda->info;
  return true;
}

#else

bool CudaFrame::map(GstBuffer *, void *) { return false; }

#endif
