// Stands in for cuda_cascade.cu when the build has no CUDA compiler.
#include "cuda_cascade.h"

namespace cudanms::cascade::detail {

std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model>,
                                               const DetectorOptions &, Status *status) {
  *status = Status::Error("cudanms was built without CUDA; use the cpu backend");
  return nullptr;
}

}  // namespace cudanms::cascade::detail
