#pragma once

#include <memory>

#include "cudanms/cascade.h"

namespace cudanms::cascade::detail {

std::unique_ptr<Detector> create_cpu_detector(std::shared_ptr<const Model> model);

}  // namespace cudanms::cascade::detail
