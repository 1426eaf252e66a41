/* The NMS contexts of cudanms elements: each element's own, or, with batch-streams=true, one that
 * the elements on the same GPU and CUDA context share, so that the frames of many streams reach
 * the GPU in batches (cudanms/shared_context.h). */
#pragma once

#include <functional>
#include <memory>

#include "cudanms/nms.h"
#include "cudanms/shared_context.h"

using NmsContextFactory = std::function<std::unique_ptr<cudanms::Context>(
    const cudanms::ContextOptions &, cudanms::Status *)>;

/* The context that elements with batch-streams=true share for @options (its device and
 * time_device) in the CUDA context @cuda_context (a CUcontext, or nullptr for the device's
 * primary one): made by @create for the first of them, and kept while one holds it. Null on
 * failure, with *status saying why. */
std::shared_ptr<cudanms::SharedContext> gst_cuda_nms_shared_context(
    const cudanms::ContextOptions &options, void *cuda_context, const NmsContextFactory &create,
    cudanms::Status *status);
