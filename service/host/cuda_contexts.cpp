#include "cuda_contexts.h"

#include "elementcudacontext.h"

namespace cudanms::service {

namespace {

GstContext *or_naming(GstContext *context, guint gpu) {
  return context ? context : gst_cv_cuda_device_context_new(static_cast<int>(gpu));
}

}  // namespace

CudaContexts::~CudaContexts() {
  for (auto &[gpu, context] : shared_) gst_context_unref(context);
}

void CudaContexts::give(GstElement *pipeline, guint gpu, bool own) {
  GstContext *context = nullptr;
  if (own) {
    context = or_naming(gst_cv_cuda_own_context_new(static_cast<int>(gpu)), gpu);
  } else {
    auto found = shared_.find(gpu);
    if (found == shared_.end()) {
      GstContext *made = gst_cv_cuda_primary_context_new(static_cast<int>(gpu));
      found = shared_.emplace(gpu, or_naming(made, gpu)).first;
    }
    context = gst_context_ref(found->second);
  }
  gst_element_set_context(pipeline, context);
  gst_context_unref(context);
}

}  // namespace cudanms::service
