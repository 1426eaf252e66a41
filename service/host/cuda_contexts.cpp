#include "cuda_contexts.h"

#include "elementcudacontext.h"

namespace cudanms::service {

CudaContexts::~CudaContexts() {
  for (auto &[gpu, context] : contexts_)
    if (context) gst_context_unref(context);
}

void CudaContexts::share_with(GstElement *pipeline, guint gpu_id) {
  auto found = contexts_.find(gpu_id);
  if (found == contexts_.end())
    found = contexts_.emplace(gpu_id, gst_cv_cuda_primary_context_new(gpu_id)).first;
  if (found->second) gst_element_set_context(pipeline, found->second);
}

}  // namespace cudanms::service
