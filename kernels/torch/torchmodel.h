/* A TorchScript network run by LibTorch, on the CPU or on a CUDA device: the one place that
 * includes LibTorch, so that the element sees only float arrays. No GStreamer. */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct TorchModelOptions {
  /* On CUDA, forwards of a batch size seen before replay a CUDA graph of the network (see
   * TorchModel::forward()); without, every forward runs the TorchScript interpreter. */
  bool graphs = true;
  /* CUDA only: float16 weights and activations; the input is cast on the GPU, the outputs cast
   * back to float32. */
  bool half = false;
  /* CUDA only: the weights and activations stored channels-last (NHWC), where cuDNN's fastest
   * convolutions are; the input is reordered on the GPU. */
  bool channels_last = false;
  /* CUDA only: cuDNN's float32 convolutions round their inputs to TF32 (10 bits of mantissa) on
   * GPUs with TF32 tensor cores, as PyTorch and TensorRT do by default: NanoDet's forward 2.5x
   * faster on an H100, a box within ~1.5 % IoU of float32's. false: IEEE float32, as the CPU. */
  bool tf32 = true;
};

class TorchModel {
 public:
  /* device < 0: the CPU; else that CUDA device (an error where LibTorch has no CUDA). On CUDA,
   * cuDNN times its algorithms for each new shape and keeps the fastest (its benchmark mode: a
   * detector's shapes are few and fixed). */
  static std::unique_ptr<TorchModel> load(const std::string &path, int device, std::string *error,
                                          const TorchModelOptions &options = {});
  /* Whether this LibTorch can run networks on CUDA device @device. */
  static bool cuda_usable(int device);
  virtual ~TorchModel() = default;

  /* Runs the network on @input, a [batch, 3, height, width] float tensor in the model's memory
   * (host memory on the CPU; device memory on CUDA, where it runs on @stream, a cudaStream_t,
   * asynchronously). The outputs stay valid until the next forward: output(i) points at tensor
   * i's floats, contiguous, in the same memory; shape(i) is its shape.
   * With graphs, a batch runs in the graph of the next power of two (its frames first, the rest
   * of the graph's input left as it was: the frames of a detector do not mix); each padded size
   * is captured on its fourth forward, after the interpreter has profiled and optimised it. A
   * network that cannot be captured (it synchronises, copies to the host) runs in the
   * interpreter from then on, and graph_problem() says why. */
  virtual bool forward(float *input, int batch, int height, int width, void *stream,
                       std::string *error) = 0;
  /* With graphs, forwards of blank input until every padded size that batches of 1 to
   * @max_batch frames take is captured (or the network proved it cannot be): done once when a
   * detector opens, so that its first frames already replay graphs instead of paying for the
   * profiling and the captures while frames wait. Nothing without graphs. */
  virtual bool warm_up(int max_batch, int height, int width, void *stream, std::string *error) = 0;
  virtual size_t outputs() const = 0;
  virtual const float *output(size_t i) const = 0;
  virtual const std::vector<int64_t> &shape(size_t i) const = 0;
  virtual bool on_cuda() const = 0;
  /* Forwards that replayed a graph; why capturing failed, empty if it never did. */
  virtual size_t graph_replays() const = 0;
  virtual std::string graph_problem() const = 0;
};
