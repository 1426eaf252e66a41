/* cudanms: non-maximum suppression of a frame's candidate windows, on a CUDA GPU or the CPU.
 * Candidates come as a GstCudaNmsCandidatesMeta and/or GstVideoRegionOfInterestMeta; the kept
 * boxes leave as a GstCudaNmsResultMeta and one GstVideoRegionOfInterestMeta per box. */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

#include <memory>
#include <string>

#include "cudanms/nms.h"

G_BEGIN_DECLS

#define GST_TYPE_CUDA_NMS (gst_cuda_nms_get_type())
G_DECLARE_FINAL_TYPE(GstCudaNms, gst_cuda_nms, GST, CUDA_NMS, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(cudanms);

G_END_DECLS

/* The element's only door to the CUDA backend, replaceable by tests that need a CUDA context
 * that fails (no GPU is needed to test the fallback to the CPU). Not part of any public API. */
struct GstCudaNmsBackendHooks {
  bool (*cuda_available)(std::string *why);
  std::unique_ptr<cudanms::Context> (*create)(const cudanms::ContextOptions &options,
                                              cudanms::Status *status);
};

/* Sets the hooks for elements created afterwards and returns the previous ones; nullptr
 * restores the library's own functions. */
GstCudaNmsBackendHooks gst_cuda_nms_set_backend_hooks_for_testing(
    const GstCudaNmsBackendHooks *hooks);
