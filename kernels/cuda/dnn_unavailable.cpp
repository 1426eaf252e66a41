// Stands in for dnn.cu when the build has no CUDA compiler.
#include "cudanms/dnn.h"

namespace cudanms::dnn {

Status preprocess_cuda(const Image *, int, const InputSpec &, float *, void *) {
  return Status::Error("cudanms was built without CUDA: no GPU pre-processing");
}

size_t decode_workspace(const Outputs &) { return 0; }

Status decode_cuda(const Outputs &, const Letterbox *, DeviceCandidates *const *, float *const *,
                   const DecodeParams *, uint32_t *, void *) {
  return Status::Error("cudanms was built without CUDA: no GPU decoding");
}

}  // namespace cudanms::dnn

namespace cudanms::dnn {

std::unique_ptr<CudaStage> CudaStage::create(int, Status *status) {
  *status = Status::Error("cudanms was built without CUDA");
  return nullptr;
}

}  // namespace cudanms::dnn
