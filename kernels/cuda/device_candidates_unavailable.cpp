// Stands in for cuda_device_candidates.cu when the build has no CUDA compiler.
#include "cudanms/device_candidates.h"

namespace cudanms {

std::shared_ptr<DeviceCandidatesPool> DeviceCandidatesPool::create(
    const DeviceCandidatesPoolOptions &, Status *status) {
  *status = Status::Error("cudanms was built without CUDA: no device candidates");
  return nullptr;
}

Status download(const DeviceCandidatesView &view, HostCandidates *out) {
  *out = HostCandidates();
  if (view.capacity == 0) return Status::Ok();
  return Status::Error("cudanms was built without CUDA: device candidates cannot be downloaded");
}

Status seal_all(DeviceCandidates *const *, int n, void *) {
  if (n < 1) return Status::Ok();
  return Status::Error("cudanms was built without CUDA: no device candidates");
}

Status DeviceCandidates::seal(void *) {
  return Status::Error("cudanms was built without CUDA: no device candidates");
}

Status device_count(const DeviceCandidatesView &view, uint32_t *count) {
  *count = 0;
  if (view.capacity == 0) return Status::Ok();
  return Status::Error("cudanms was built without CUDA: device candidates cannot be counted");
}

}  // namespace cudanms
