#include "torchmodel.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/script.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#ifdef CUDANMS_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/cuda.h>
#endif

namespace {

/* The network's result: a tensor, or a tuple or list of them (in order), as contiguous floats. */
std::vector<at::Tensor> float_outputs(const torch::jit::IValue &result) {
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
  for (at::Tensor &t : found) t = t.to(torch::kFloat32).contiguous();
  return found;
}

/* A traced network's convolutions are aten::_convolution calls whose last argument, allow_tf32,
 * the tracer froze at what its PyTorch allowed (TF32, by default): each is set to @tf32, so that
 * the model runs in the precision asked of it. A scripted network's aten::conv2d reads LibTorch's
 * switch instead (ConvolutionMath). */
void set_traced_convolutions_tf32(torch::jit::Module &module, bool tf32) {
  static const c10::Symbol convolution = c10::Symbol::fromQualString("aten::_convolution");
  constexpr size_t kAllowTf32 = 12;
  std::function<void(torch::jit::Block *)> visit = [&](torch::jit::Block *block) {
    for (torch::jit::Node *node : block->nodes()) {
      for (torch::jit::Block *inner : node->blocks()) visit(inner);
      if (node->kind() != convolution || node->inputs().size() != kAllowTf32 + 1) continue;
      torch::jit::WithInsertPoint here(node);
      node->replaceInput(kAllowTf32, node->owningGraph()->insertConstant(tf32));
    }
  };
  for (const torch::jit::Module &part : module.modules())
    for (const torch::jit::Method &method : part.get_methods()) visit(method.graph()->block());
}

#ifdef CUDANMS_TORCH_CUDA
/* The interpreter's runs of a padded batch size before its capture: the profiling executor
 * profiles the first and optimises after, and cuDNN picks its kernels; all before the capture. */
constexpr int kInterpretedBeforeCapture = 3;

/* One padded input shape's network as a CUDA graph: the graph reads `input` and writes `outputs`
 * where the capture put them, on every replay. */
struct Graphed {
  at::Tensor input;
  std::vector<at::Tensor> outputs;
  int interpreted = 0;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

/* LibTorch's TF32 switch for cuDNN is one for the process, read as each convolution launches (a
 * graph keeps what its capture launched): a model's interpreted runs hold it at the model's own
 * choice, so that models of both precisions can share a process. */
class ConvolutionMath {
 public:
  explicit ConvolutionMath(bool tf32) : hold_(lock()) {
    at::globalContext().setAllowTF32CuDNN(tf32);
  }

 private:
  static std::mutex &lock() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> hold_;
};
#endif

class Model final : public TorchModel {
 public:
  Model(torch::jit::Module module, torch::Device device, const TorchModelOptions &options)
      : module_(std::move(module)),
        device_(device),
        graphs_(options.graphs && device.is_cuda()),
        half_(options.half),
        channels_last_(options.channels_last),
        tf32_(options.tf32) {}

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
#ifdef CUDANMS_TORCH_CUDA
      if (graphs_ && forward_graphed(in)) return true;
#endif
      keep(run(in));
      return true;
    } catch (const std::exception &e) {
      *error = e.what();
      return false;
    }
  }
  bool warm_up(int max_batch, int height, int width, void *stream, std::string *error) override {
#ifdef CUDANMS_TORCH_CUDA
    try {
      for (int64_t padded = 1; graphs_ && padded / 2 < max_batch; padded *= 2) {
        at::Tensor blank;
        {
          c10::InferenceMode inference;
          c10::cuda::CUDAStreamGuard on_stream(
              c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device_.index()));
          blank = torch::zeros({padded, 3, height, width},
                               torch::TensorOptions().dtype(torch::kFloat32).device(device_));
        }
        const auto shape = std::make_tuple(padded, int64_t{height}, int64_t{width});
        for (int i = 0; i <= kInterpretedBeforeCapture && graphs_ && !graphed_[shape].graph; i++)
          if (!forward(blank.data_ptr<float>(), static_cast<int>(padded), height, width, stream,
                       error))
            return false;
      }
    } catch (const std::exception &e) {
      *error = e.what();
      return false;
    }
#else
    (void)max_batch, (void)height, (void)width, (void)stream, (void)error;
#endif
    return true;
  }
  size_t outputs() const override { return tensors_.size(); }
  const float *output(size_t i) const override { return tensors_[i].data_ptr<float>(); }
  const std::vector<int64_t> &shape(size_t i) const override { return shapes_[i]; }
  bool on_cuda() const override { return device_.is_cuda(); }
  size_t graph_replays() const override { return replays_; }
  std::string graph_problem() const override {
    std::lock_guard<std::mutex> guard(problem_lock_);
    return graph_problem_;
  }

 private:
  /* The network on a float input, in its precision; its outputs as contiguous floats (in a
   * capture, the casts are the graph's too). */
  std::vector<at::Tensor> run(const at::Tensor &input) {
#ifdef CUDANMS_TORCH_CUDA
    std::optional<ConvolutionMath> math;
    if (device_.is_cuda()) math.emplace(tf32_);
#endif
    at::Tensor x = half_ ? input.to(torch::kHalf) : input;
    if (channels_last_) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    return float_outputs(module_.forward({x}));
  }

  /* The outputs; with `frames`, each one's first `frames` (a padded batch's own). */
  void keep(std::vector<at::Tensor> outputs, int64_t frames = -1) {
    tensors_.clear();
    shapes_.clear();
    for (at::Tensor &t : outputs) {
      if (frames >= 0) t = t.narrow(0, 0, frames);
      shapes_.emplace_back(t.sizes().begin(), t.sizes().end());
      tensors_.push_back(std::move(t));
    }
  }

#ifdef CUDANMS_TORCH_CUDA
  /* The batch through its padded shape's graph; false once the network proved it cannot be
   * captured (then the interpreter runs it). */
  bool forward_graphed(const at::Tensor &in) {
    const int64_t batch = in.size(0);
    int64_t padded = 1;
    while (padded < batch) padded *= 2;
    Graphed &g = graphed_[std::make_tuple(padded, in.size(2), in.size(3))];
    if (!g.input.defined()) {
      g.input = torch::zeros({padded, in.size(1), in.size(2), in.size(3)}, in.options());
    }
    g.input.narrow(0, 0, batch).copy_(in, /*non_blocking=*/true);
    if (!g.graph) {
      if (g.interpreted < kInterpretedBeforeCapture) {
        g.interpreted++;
        std::vector<at::Tensor> outputs = run(g.input);
        if (!batch_major(outputs, padded)) return give_up_graphs(kNotBatchMajor);
        keep(std::move(outputs), batch);
        return true;
      }
      if (!capture(&g, padded)) return false;
    }
    g.graph->replay();
    replays_++;
    keep(g.outputs, batch);
    return true;
  }

  static constexpr const char *kNotBatchMajor =
      "an output's first dimension is not the batch, so frames cannot be padded";
  static bool batch_major(const std::vector<at::Tensor> &outputs, int64_t batch) {
    for (const at::Tensor &t : outputs)
      if (t.dim() == 0 || t.size(0) != batch) return false;
    return true;
  }

  /* No graph from now on: the interpreter runs every forward. */
  bool give_up_graphs(const std::string &problem) {
    (void)cudaGetLastError(); /* a failed capture's error is its stream's, not sticky */
    graphs_ = false;
    graphed_.clear();
    std::lock_guard<std::mutex> guard(problem_lock_);
    graph_problem_ = problem;
    return false;
  }

  /* Captures the network on the padded input, on this thread's stream only (thread-local mode:
   * other threads' CUDA calls do not break it). On failure no graph is used again. */
  bool capture(Graphed *g, int64_t padded) {
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    std::vector<at::Tensor> outputs;
    std::string problem;
    try {
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        outputs = run(g->input);
      } catch (...) {
        try {
          graph->capture_end(); /* ends the stream's capture and the allocator's pool */
        } catch (const std::exception &) {
        }
        throw;
      }
      graph->capture_end();
      if (!batch_major(outputs, padded)) problem = kNotBatchMajor;
    } catch (const std::exception &e) {
      problem = std::string("the capture failed: ") + e.what();
    }
    if (!problem.empty()) return give_up_graphs(problem);
    g->outputs = std::move(outputs);
    g->graph = std::move(graph);
    return true;
  }

  std::map<std::tuple<int64_t, int64_t, int64_t>, Graphed> graphed_; /* by padded batch, h, w */
#endif

  torch::jit::Module module_;
  torch::Device device_;
  bool graphs_;
  const bool half_;
  const bool channels_last_;
  const bool tf32_;
  std::atomic<size_t> replays_{0};  /* read from other threads */
  mutable std::mutex problem_lock_; /* graph_problem_ is read from other threads */
  std::string graph_problem_;
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
                                             std::string *error, const TorchModelOptions &options) {
  if (device >= 0 && !cuda_usable(device)) {
    *error = "this LibTorch cannot run networks on CUDA device " + std::to_string(device);
    return nullptr;
  }
  if (options.half && device < 0) {
    *error = "float16 runs on CUDA only: on the CPU the network computes in float32";
    return nullptr;
  }
  TorchModelOptions used = options;
  if (device < 0) used.channels_last = false;
  try {
    const torch::Device where =
        device >= 0 ? torch::Device(torch::kCUDA, device) : torch::Device(torch::kCPU);
    torch::jit::Module module = torch::jit::load(path, where);
    module.eval();
    if (used.half) module.to(torch::kHalf);
    if (device >= 0) set_traced_convolutions_tf32(module, used.tf32);
    if (used.channels_last) {
      /* The converters register weights as buffers, PyTorch's modules as parameters. */
      auto reorder = [](at::Tensor t) {
        if (t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast));
      };
      for (const at::Tensor &t : module.parameters()) reorder(t);
      for (const at::Tensor &t : module.buffers()) reorder(t);
    }
    if (device >= 0) at::globalContext().setBenchmarkCuDNN(true);
    return std::make_unique<Model>(std::move(module), where, used);
  } catch (const std::exception &e) {
    *error = e.what();
    return nullptr;
  }
}
