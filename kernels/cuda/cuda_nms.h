#pragma once

#include <memory>

#include "cudanms/nms.h"

namespace cudanms::detail {

// Returns nullptr and an error status when CUDA is not compiled in or the device is unusable.
std::unique_ptr<Context> create_cuda_context(const ContextOptions &options, Status *status);

}  // namespace cudanms::detail
