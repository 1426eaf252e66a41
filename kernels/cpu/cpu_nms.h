#pragma once

#include <memory>

#include "cudanms/nms.h"

namespace cudanms::detail {

std::unique_ptr<Context> create_cpu_context(const ContextOptions &options);

}  // namespace cudanms::detail
