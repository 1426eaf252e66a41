#include "dnndetector.h"

#include <chrono>
#include <sstream>

namespace dnn = cudanms::dnn;
using cudanms::Status;

namespace {

/* With times: waits for the stage (on CUDA), then times->*stage_ms is the time since *since,
 * and *since now. */
Status lap(DnnStageTimes *times, dnn::CudaStage *stage,
           std::chrono::steady_clock::time_point *since, double DnnStageTimes::*stage_ms) {
  if (!times) return Status::Ok();
  if (stage) {
    Status status = stage->synchronize();
    if (!status.ok()) return status;
  }
  const auto now = std::chrono::steady_clock::now();
  times->*stage_ms = std::chrono::duration<double, std::milli>(now - *since).count();
  *since = now;
  return Status::Ok();
}

}  // namespace

std::string DnnDetectorConfig::key() const {
  std::ostringstream key;
  key << model_path << '\n'
      << static_cast<int>(head) << ' ' << device << ' ' << spec.width << 'x' << spec.height << ' '
      << spec.letterbox << ' ' << spec.pad_value << ' ' << spec.bgr << ' ' << cuda_graphs << ' '
      << half_precision << ' ' << tf32 << ' ' << uses_channels_last();
  for (int c = 0; c < 3; c++) key << ' ' << spec.mean[c] << '/' << spec.scale[c];
  return key.str();
}

bool DnnDetectorConfig::uses_channels_last() const {
  return channels_last.value_or(head == dnn::Head::kNanoDet);
}

DnnDetector::~DnnDetector() = default;

std::unique_ptr<DnnDetector> DnnDetector::open(const DnnDetectorConfig &config, std::string *why,
                                               std::string *detail) {
  std::unique_ptr<DnnDetector> detector(new DnnDetector());
  detector->config_ = config;
  if (config.device >= 0) {
    /* LibTorch's cuDNN and cuBLAS handles belong to the primary context: the stage's stream must
     * be of that context too. */
    Status status;
    detector->stage_ = dnn::CudaStage::create(config.device, &status);
    if (!detector->stage_) {
      *why = "cannot run on CUDA device " + std::to_string(config.device);
      *detail = status.message();
      return nullptr;
    }
  }
  TorchModelOptions options;
  options.graphs = config.cuda_graphs;
  options.half = config.half_precision;
  options.tf32 = config.tf32;
  options.channels_last = config.uses_channels_last();
  detector->model_ = TorchModel::load(config.model_path, config.device, detail, options);
  if (!detector->model_) {
    *why = "is not a TorchScript network LibTorch can load";
    return nullptr;
  }

  /* A dry run on a blank frame checks, when the element starts and not on its first frame, that
   * the network takes this input and gives the head's outputs. */
  const std::vector<uint8_t> blank(3 * 16);
  DnnJob job;
  job.image.format = dnn::PixelFormat::kRGB;
  job.image.width = job.image.height = 4;
  job.image.planes[0] = blank.data();
  job.image.strides[0] = 3 * 4;
  dnn::Candidates ignored;
  job.host = &ignored;
  DnnJob *jobs[] = {&job};
  const Status status = detector->run(jobs, 1);
  if (!status.ok()) {
    *why = std::string("does not fit decoder ") + dnn::head_name(config.head) + " with a " +
           std::to_string(config.spec.width) + "x" + std::to_string(config.spec.height) + " input";
    *detail = status.message();
    return nullptr;
  }
  return detector;
}

Status DnnDetector::warm_up(int max_batch) {
  if (!stage_) return Status::Ok();
  std::string why;
  if (!model_->warm_up(max_batch, config_.spec.height, config_.spec.width, stage_->stream(), &why))
    return Status::Error(why);
  const Status status = stage_->synchronize();
  stage_->restart_gpu_times(); /* the dry run's and the warm-up's are not the stream's work */
  return status;
}

int DnnDetector::points_per_candidate() const {
  dnn::Outputs outputs;
  outputs.head = config_.head;
  return outputs.points_per_candidate();
}

void *DnnDetector::context() const { return stage_ ? stage_->context() : nullptr; }

std::string DnnDetector::device_name() const { return stage_ ? stage_->device_name() : "cpu"; }

std::string DnnDetector::graph_problem() const { return model_->graph_problem(); }

dnn::GpuTimes DnnDetector::gpu_times() const {
  return stage_ ? stage_->gpu_times() : dnn::GpuTimes();
}

/* Runs the network on `count` frames in `input` (host or device memory, as the model's); then
 * *outputs describes its output tensors. */
Status DnnDetector::forward(float *input, int count, dnn::Outputs *outputs) {
  std::string why;
  const dnn::InputSpec &spec = config_.spec;
  if (!model_->forward(input, count, spec.height, spec.width, stage_ ? stage_->stream() : nullptr,
                       &why))
    return Status::Error(why);
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < model_->outputs(); i++) shapes.push_back(model_->shape(i));
  Status status = dnn::Outputs::describe(config_.head, shapes, outputs, spec.width, spec.height);
  if (!status.ok()) return status;
  if (outputs->batch != count) {
    return Status::Error("the network gave " + std::to_string(outputs->batch) + " results for " +
                         std::to_string(count) +
                         " frames: its batch dimension must follow the "
                         "input's");
  }
  for (size_t i = 0; i < 2 && i < model_->outputs(); i++) outputs->tensors[i] = model_->output(i);
  if (described_.anchors == 0) { /* open()'s dry run */
    described_ = *outputs;
    described_.tensors[0] = described_.tensors[1] = nullptr;
  }
  return Status::Ok();
}

Status DnnJob::collect() {
  if (!download) return Status::Ok();
  const Status status = download->take(download_frame, host);
  download.reset();
  return status;
}

Status DnnDetector::launch(DnnJob *const *jobs, int count, DnnStageTimes *times) {
  if (count < 1 || count > dnn::kMaxBatch)
    return Status::Error("a batch holds 1 to " + std::to_string(dnn::kMaxBatch) + " frames");
  for (int i = 0; i < count; i++) jobs[i]->batch = count, jobs[i]->download.reset();
  return stage_ ? run_cuda(jobs, count, times) : run_cpu(jobs, count, times);
}

Status DnnDetector::run(DnnJob *const *jobs, int count, DnnStageTimes *times) {
  Status status = launch(jobs, count, times);
  for (int i = 0; i < count && status.ok(); i++) status = jobs[i]->collect();
  return status;
}

Status DnnDetector::run_cuda(DnnJob *const *jobs, int count, DnnStageTimes *times) {
  auto since = std::chrono::steady_clock::now();
  dnn::Image images[dnn::kMaxBatch];
  bool on_device[dnn::kMaxBatch];
  for (int i = 0; i < count; i++) images[i] = jobs[i]->image, on_device[i] = jobs[i]->on_device;
  float *d_input = nullptr;
  Status status = stage_->preprocess(images, on_device, count, config_.spec, &d_input);
  if (status.ok()) status = lap(times, stage_.get(), &since, &DnnStageTimes::preprocess_ms);
  if (!status.ok()) return status;
  dnn::Outputs outputs;
  const size_t replays = model_->graph_replays();
  status = forward(d_input, count, &outputs);
  if (status.ok()) status = lap(times, stage_.get(), &since, &DnnStageTimes::network_ms);
  if (!status.ok()) return status;
  const bool graphed = model_->graph_replays() != replays;
  for (int i = 0; i < count; i++) jobs[i]->graphed = graphed;

  dnn::Letterbox boxes[dnn::kMaxBatch];
  dnn::DecodeParams params[dnn::kMaxBatch];
  cudanms::DeviceCandidates *targets[dnn::kMaxBatch];
  bool to_host[dnn::kMaxBatch];
  size_t scratch_used = 0;
  for (int i = 0; i < count; i++) {
    const DnnJob &job = *jobs[i];
    boxes[i] = dnn::Letterbox::fit(job.image.width, job.image.height, config_.spec);
    params[i] = job.params;
    to_host[i] = !job.device_out;
    if (to_host[i] && !job.host) return Status::Error("a frame's candidates have nowhere to go");
    targets[i] = job.device_out;
    if (targets[i]) continue;
    if (!scratch_pool_) {
      cudanms::DeviceCandidatesPoolOptions options;
      options.device = config_.device;
      options.capacity = max_candidates(dnn::DecodeParams());
      options.max_buffers = dnn::kMaxBatch;
      scratch_pool_ = cudanms::DeviceCandidatesPool::create(options, &status);
      if (!scratch_pool_) return status;
    }
    if (scratch_used == scratch_.size()) {
      std::shared_ptr<cudanms::DeviceCandidates> buffer = scratch_pool_->acquire(&status);
      if (!buffer) return status.ok() ? Status::Error("no scratch candidates buffer") : status;
      scratch_.push_back(std::move(buffer));
    }
    targets[i] = scratch_[scratch_used++].get();
  }
  std::shared_ptr<dnn::Download> download;
  status = stage_->decode(outputs, boxes, targets, params, to_host, &download);
  if (status.ok()) status = lap(times, stage_.get(), &since, &DnnStageTimes::decode_ms);
  for (int i = 0; i < count; i++) {
    if (!to_host[i]) continue;
    jobs[i]->download = download;
    jobs[i]->download_frame = i;
  }
  /* Frames in pinned memory were copied asynchronously: their elements may release them now. */
  if (status.ok()) status = stage_->frames_copied();
  return status;
}

Status DnnDetector::run_cpu(DnnJob *const *jobs, int count, DnnStageTimes *times) {
  auto since = std::chrono::steady_clock::now();
  const dnn::InputSpec &spec = config_.spec;
  const size_t frame_floats = 3 * static_cast<size_t>(spec.width) * spec.height;
  input_.resize(frame_floats * count);
  for (int i = 0; i < count; i++) {
    if (jobs[i]->on_device) return Status::Error("the CPU backend cannot read device memory");
    Status status = dnn::preprocess(jobs[i]->image, spec, input_.data() + i * frame_floats);
    if (!status.ok()) return status;
  }
  Status status = lap(times, nullptr, &since, &DnnStageTimes::preprocess_ms);
  dnn::Outputs outputs;
  if (status.ok()) status = forward(input_.data(), count, &outputs);
  if (status.ok()) status = lap(times, nullptr, &since, &DnnStageTimes::network_ms);
  if (!status.ok()) return status;
  for (int i = 0; i < count; i++) {
    const DnnJob &job = *jobs[i];
    if (!job.host) return Status::Error("the CPU backend gives candidates in host memory only");
    const dnn::Letterbox box = dnn::Letterbox::fit(job.image.width, job.image.height, spec);
    status = dnn::decode(outputs, i, box, job.params, job.host);
    if (!status.ok()) return status;
  }
  return lap(times, nullptr, &since, &DnnStageTimes::decode_ms);
}
