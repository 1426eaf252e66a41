#pragma once

#include <memory>

#include "cudanms/cascade.h"

namespace cudanms::cascade::detail {

// Returns nullptr and an error status when CUDA is not compiled in or the device is unusable.
std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> model,
                                               const DetectorOptions &options, Status *status);

}  // namespace cudanms::cascade::detail
