#include "torchmodel.h"

#include <torch/script.h>

#ifdef CUDANMS_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace {

class Model final : public TorchModel {
 public:
  Model(torch::jit::Module module, torch::Device device)
      : module_(std::move(module)), device_(device) {}

  bool forward(float *input, int batch, int height, int width, void *stream,
               std::string *error) override {
    try {
      c10::InferenceMode inference;
#ifdef CUDANMS_TORCH_CUDA
      std::unique_ptr<c10::cuda::CUDAStreamGuard> on_stream;
      if (device_.is_cuda()) {
        on_stream = std::make_unique<c10::cuda::CUDAStreamGuard>(
            c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device_.index()));
      }
#else
      (void)stream;
#endif
      const at::Tensor in =
          torch::from_blob(input, {batch, 3, height, width},
                           torch::TensorOptions().dtype(torch::kFloat32).device(device_));
      collect(module_.forward({in}));
      return true;
    } catch (const std::exception &e) {
      *error = e.what();
      return false;
    }
  }
  size_t outputs() const override { return tensors_.size(); }
  const float *output(size_t i) const override { return tensors_[i].data_ptr<float>(); }
  const std::vector<int64_t> &shape(size_t i) const override { return shapes_[i]; }
  bool on_cuda() const override { return device_.is_cuda(); }

 private:
  /* The network's result: a tensor, or a tuple or list of them (in order), as contiguous floats. */
  void collect(const torch::jit::IValue &result) {
    tensors_.clear();
    shapes_.clear();
    std::vector<at::Tensor> found;
    if (result.isTensor()) {
      found.push_back(result.toTensor());
    } else if (result.isTuple()) {
      for (const auto &v : result.toTupleRef().elements())
        if (v.isTensor()) found.push_back(v.toTensor());
    } else if (result.isTensorList()) {
      for (const at::Tensor &t : result.toTensorVector()) found.push_back(t);
    } else if (result.isList()) {
      for (const auto &v : result.toListRef())
        if (v.isTensor()) found.push_back(v.toTensor());
    }
    for (const at::Tensor &t : found) {
      tensors_.push_back(t.to(torch::kFloat32).contiguous());
      shapes_.emplace_back(t.sizes().begin(), t.sizes().end());
    }
  }

  torch::jit::Module module_;
  torch::Device device_;
  std::vector<at::Tensor> tensors_;
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace

bool TorchModel::cuda_usable(int device) {
#ifdef CUDANMS_TORCH_CUDA
  try {
    return torch::cuda::is_available() && device < static_cast<int>(torch::cuda::device_count());
  } catch (const std::exception &) {
    return false;
  }
#else
  (void)device;
  return false;
#endif
}

std::unique_ptr<TorchModel> TorchModel::load(const std::string &path, int device,
                                             std::string *error) {
  if (device >= 0 && !cuda_usable(device)) {
    *error = "this LibTorch cannot run networks on CUDA device " + std::to_string(device);
    return nullptr;
  }
  try {
    const torch::Device where =
        device >= 0 ? torch::Device(torch::kCUDA, device) : torch::Device(torch::kCPU);
    torch::jit::Module module = torch::jit::load(path, where);
    module.eval();
    return std::make_unique<Model>(std::move(module), where);
  } catch (const std::exception &e) {
    *error = e.what();
    return nullptr;
  }
}
