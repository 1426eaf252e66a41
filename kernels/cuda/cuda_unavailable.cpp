// Stands in for cuda_nms.cu when the build has no CUDA compiler.
#include "cuda_nms.h"

namespace cudanms {

bool cuda_available(std::string *why) {
  if (why) *why = "cudanms was built without CUDA";
  return false;
}

int cuda_device_count() { return 0; }

std::string cuda_device_uuid(int) { return ""; }

namespace detail {

std::unique_ptr<Context> create_cuda_context(const ContextOptions &, Status *status) {
  *status = Status::Error("cudanms was built without CUDA; use the cpu backend");
  return nullptr;
}

}  // namespace detail
}  // namespace cudanms
