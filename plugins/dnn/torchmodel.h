/* A TorchScript network run by LibTorch, on the CPU or on a CUDA device: the one place that
 * includes LibTorch, so that the element sees only float arrays. No GStreamer. */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

class TorchModel {
 public:
  /* device < 0: the CPU; else that CUDA device (an error where LibTorch has no CUDA). */
  static std::unique_ptr<TorchModel> load(const std::string &path, int device, std::string *error);
  /* Whether this LibTorch can run networks on CUDA device @device. */
  static bool cuda_usable(int device);
  virtual ~TorchModel() = default;

  /* Runs the network on @input, a [batch, 3, height, width] float tensor in the model's memory
   * (host memory on the CPU; device memory on CUDA, where it runs on @stream, a cudaStream_t,
   * asynchronously). The outputs stay valid until the next forward: output(i) points at tensor
   * i's floats, contiguous, in the same memory; shape(i) is its shape. */
  virtual bool forward(float *input, int batch, int height, int width, void *stream,
                       std::string *error) = 0;
  virtual size_t outputs() const = 0;
  virtual const float *output(size_t i) const = 0;
  virtual const std::vector<int64_t> &shape(size_t i) const = 0;
  virtual bool on_cuda() const = 0;
};
