#include "cuda_contexts.h"

#ifdef CUDANMS_HAVE_GST_CUDA
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudautils.h>
#endif

namespace cudanms::service {

CudaContexts::~CudaContexts() {
  for (auto &[gpu, context] : contexts_)
    if (context) gst_context_unref(context);
}

void CudaContexts::share_with(GstElement *pipeline, guint gpu_id) {
#ifdef CUDANMS_HAVE_GST_CUDA
  auto found = contexts_.find(gpu_id);
  if (found == contexts_.end()) {
    GstContext *context = nullptr;
    GstCudaContext *cuda = gst_cuda_load_library() ? gst_cuda_context_new(gpu_id) : nullptr;
    if (cuda) {
      context = gst_context_new_cuda_context(cuda);
      gst_object_unref(cuda);
    }
    found = contexts_.emplace(gpu_id, context).first;
  }
  if (found->second) gst_element_set_context(pipeline, found->second);
#else
  (void)pipeline;
  (void)gpu_id;
#endif
}

}  // namespace cudanms::service
