/* The network of one dnndetect element, or of several sharing a batch group: the TorchScript
 * model and, on CUDA, the stage (stream, input tensor, staging) around it, run on a batch of
 * frames from any elements. No GStreamer, no LibTorch (torchmodel.h hides it).
 *
 *   auto detector = DnnDetector::open(config, &why);   // loads, then a dry run on a blank frame
 *   DnnJob a{...}, b{...};                             // frames of two cameras
 *   DnnJob *jobs[] = {&a, &b};
 *   detector->run(jobs, 2);                            // one forward; each job its candidates
 *
 * A batch group launches instead (launch: the work queued, nothing waited for) and each frame's
 * thread collects its own job's candidates (DnnJob::collect), so that the next batch launches
 * while this one runs. */
#pragma once

#include <cudanms/dnn.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "torchmodel.h"

struct DnnDetectorConfig {
  std::string model_path;
  cudanms::dnn::Head head = cudanms::dnn::Head::kBlazeFace;
  cudanms::dnn::InputSpec spec;
  int device = -1;             /* a CUDA device, or -1: the CPU */
  bool cuda_graphs = true;     /* on CUDA, replay the network as CUDA graphs (TorchModelOptions) */
  bool half_precision = false; /* on CUDA, float16 weights and activations (TorchModelOptions) */
  bool tf32 = true;            /* on CUDA, float32 convolutions in TF32 (TorchModelOptions) */
  /* On CUDA, the network's tensors stored channels-last (TorchModelOptions); unset: the head's
   * choice, see uses_channels_last(). */
  std::optional<bool> channels_last;

  /* channels_last as set, else whether the head's network runs faster so: NanoDet's dense
   * convolutions do on cuDNN's NHWC kernels (docs/performance.md); BlazeFace's depthwise ones
   * are left as they are. */
  bool uses_channels_last() const;
  /* Equal for configurations one detector can serve. */
  std::string key() const;
};

/* One frame of a batch: what its element gives, and where its candidates go. */
struct DnnJob {
  cudanms::dnn::Image image;
  bool on_device = false; /* the planes are device memory of the detector's context() */
  cudanms::dnn::DecodeParams params;
  /* CUDA: the frame's candidates stay in this buffer (capacity >= max_candidates()), unless it is
   * nullptr; then, and on the CPU, they go to *host. */
  cudanms::DeviceCandidates *device_out = nullptr;
  cudanms::dnn::Candidates *host = nullptr;
  /* Set by launch() on CUDA for a job with host candidates: where they come from. */
  std::shared_ptr<cudanms::dnn::Download> download;
  int download_frame = 0;
  int batch = 0;        /* set by run(): the frames its forward held */
  bool graphed = false; /* set by run(): whether its forward replayed a CUDA graph */
  /* Set by DnnBatchGroup: how long its batch took to fill (from the batch's first frame to its
   * launch) and to launch (DnnDetector::launch: the work queued). */
  double fill_ms = 0, launch_ms = 0;

  /* After launch(): waits for the batch where this job's candidates go to *host, then writes
   * them there (on CUDA; else they are there already). Once. */
  cudanms::Status collect();
};

/* Each stage of a batch timed alone, the stream synchronised around it (benchmarks). */
struct DnnStageTimes {
  double preprocess_ms = 0, network_ms = 0, decode_ms = 0;
};

class DnnDetector {
 public:
  /* The model on the CUDA device (the device's primary context, LibTorch's) or the CPU, checked
   * by a dry run on a blank frame: nullptr when it cannot load or its outputs do not fit the head
   * and input, with *why, e.g. "is not a TorchScript network LibTorch can load", and the cause
   * in *detail. */
  static std::unique_ptr<DnnDetector> open(const DnnDetectorConfig &config, std::string *why,
                                           std::string *detail);
  /* On CUDA with graphs, the network captured for every batch of 1 to `max_batch` frames
   * (TorchModel::warm_up), so that the first frames run as fast as the later ones. */
  cudanms::Status warm_up(int max_batch);
  ~DnnDetector();

  /* Pre-processing, one forward, decoding for up to cudanms::dnn::kMaxBatch frames. On CUDA it
   * returns once the work is queued: device candidates are ready at their event, host candidates
   * once each job is collected. With `times`, each stage is waited for and timed (slower: for
   * benchmarks). */
  cudanms::Status launch(DnnJob *const *jobs, int count, DnnStageTimes *times = nullptr);
  /* launch(), then every job collected. */
  cudanms::Status run(DnnJob *const *jobs, int count, DnnStageTimes *times = nullptr);

  const DnnDetectorConfig &config() const { return config_; }
  int anchors() const { return described_.anchors; }
  int classes() const { return described_.classes; }
  /* The most candidates a frame can give with these params (cudanms::dnn::max_candidates). */
  size_t max_candidates(const cudanms::dnn::DecodeParams &params) const {
    return cudanms::dnn::max_candidates(described_, params);
  }
  int points_per_candidate() const;
  bool on_cuda() const { return stage_ != nullptr; }
  /* Where frames in device memory must be (a CUcontext); nullptr on the CPU. */
  void *context() const;
  std::string device_name() const;
  /* Why the network cannot run as a CUDA graph; empty while it can (or on the CPU). */
  std::string graph_problem() const;
  /* Its batches' times on the GPU so far (none on the CPU). Any thread. */
  cudanms::dnn::GpuTimes gpu_times() const;

 private:
  DnnDetector() = default;
  cudanms::Status forward(float *input, int count, cudanms::dnn::Outputs *outputs);
  cudanms::Status run_cuda(DnnJob *const *jobs, int count, DnnStageTimes *times);
  cudanms::Status run_cpu(DnnJob *const *jobs, int count, DnnStageTimes *times);

  DnnDetectorConfig config_;
  /* The outputs' shapes from the dry run (no tensors); read by elements while batches run. */
  cudanms::dnn::Outputs described_;
  std::unique_ptr<cudanms::dnn::CudaStage> stage_; /* before model_: its stream outlives it */
  std::unique_ptr<TorchModel> model_;
  std::vector<float> input_; /* the CPU's input tensor */
  /* CUDA: buffers for frames whose candidates go to the host. */
  std::shared_ptr<cudanms::DeviceCandidatesPool> scratch_pool_;
  std::vector<std::shared_ptr<cudanms::DeviceCandidates>> scratch_;
};
