// dnn::CudaStage: a DNN element's stream, input tensor and staging, in one CUDA context.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "batch_timeline.h"
#include "cuda_device.h"
#include "cudanms/dnn.h"
#include "host_wait.h"

namespace cudanms::dnn {
namespace {

using detail::DeviceArray;
using detail::kBlockingEventFlags;
using detail::DeviceBinding;
using detail::MappedArray;

int planes_of(PixelFormat format) {
  return format == PixelFormat::kI420 ? 3 : format == PixelFormat::kNV12 ? 2 : 1;
}

// Bytes per row and rows of plane p of a frame, as the kernels read them.
void plane_extent(const Image &image, int p, size_t *row_bytes, int *rows) {
  const int chroma_w = (image.width + 1) / 2, chroma_h = (image.height + 1) / 2;
  switch (image.format) {
    case PixelFormat::kRGB:
    case PixelFormat::kBGR:
      *row_bytes = 3 * static_cast<size_t>(image.width), *rows = image.height;
      return;
    case PixelFormat::kRGBx:
    case PixelFormat::kBGRx:
      *row_bytes = 4 * static_cast<size_t>(image.width), *rows = image.height;
      return;
    case PixelFormat::kI420:
      *row_bytes = p == 0 ? image.width : chroma_w, *rows = p == 0 ? image.height : chroma_h;
      return;
    default:  // kNV12
      *row_bytes = p == 0 ? image.width : 2 * static_cast<size_t>(chroma_w);
      *rows = p == 0 ? image.height : chroma_h;
      return;
  }
}

// The frames whose candidates go to the host (counts[i] set), and where they are.
struct Packing {
  const float4 *boxes[kMaxBatch];
  const float *scores[kMaxBatch];
  const int32_t *class_ids[kMaxBatch];
  const uint32_t *counts[kMaxBatch];  // nullptr: the frame's candidates stay on the device
  uint32_t capacity[kMaxBatch];
  const float *points[kMaxBatch];  // point_floats per candidate, or nullptr
  int point_floats;
};

// A block per frame: its candidates into the mapped `out` after the frames before it, as the
// host reads them (boxes 4n, scores n, class ids n as their bits, points), its count into
// counts[frame]. A count past the capacity goes out as it is, with capacity candidates.
__global__ void pack_candidates(const Packing p, uint32_t *counts, float *out) {
  const int frame = blockIdx.x;
  if (!p.counts[frame]) return;
  const size_t floats_per = 6 + static_cast<size_t>(p.point_floats);
  size_t offset = 0;
  for (int i = 0; i < frame; i++)
    if (p.counts[i]) offset += min(*p.counts[i], p.capacity[i]) * floats_per;
  const uint32_t count = *p.counts[frame];
  const uint32_t n = min(count, p.capacity[frame]);
  if (threadIdx.x == 0) counts[frame] = count;
  float *o = out + offset;
  for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float4 b = p.boxes[frame][k];
    o[4 * k] = b.x, o[4 * k + 1] = b.y, o[4 * k + 2] = b.z, o[4 * k + 3] = b.w;
    o[4 * n + k] = p.scores[frame][k];
    o[5 * n + k] = __int_as_float(p.class_ids[frame][k]);
  }
  if (!p.points[frame]) return;
  for (size_t k = threadIdx.x; k < static_cast<size_t>(n) * p.point_floats; k += blockDim.x)
    o[6 * n + k] = p.points[frame][k];
}

// Host-mapped memory that one batch's downloaded candidates are packed into, with the event
// after the packing.
struct DownloadSlot {
  MappedArray<uint32_t> counts;  // per frame, then
  MappedArray<float> packed;     // the frames' candidates, one after another (pack_candidates)
  cudaEvent_t done = nullptr;
  bool taken = false;  // under DownloadSlots' lock
};

// A stage's download slots, shared with its downloads (one may outlive the stage). A batch's slot
// stays taken until each of its frames is read; when none is free another is made, so a batch
// never waits for an earlier batch's readers (a camera's frame may be read batches later).
class DownloadSlots {
 public:
  explicit DownloadSlots(void *context) : context_(context) {}
  ~DownloadSlots() {
    DeviceBinding::Scope scope(context_);
    for (auto &slot : slots_)
      if (slot->done) cudaEventDestroy(slot->done);
    slots_.clear();
  }
  // In the context.
  Status acquire(DownloadSlot **out) {
    std::lock_guard<std::mutex> guard(lock_);
    for (auto &slot : slots_) {
      if (slot->taken) continue;
      slot->taken = true;
      *out = slot.get();
      return Status::Ok();
    }
    auto slot = std::make_unique<DownloadSlot>();
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&slot->done, kBlockingEventFlags));
    slot->taken = true;
    *out = slot.get();
    slots_.push_back(std::move(slot));
    return Status::Ok();
  }
  void release(DownloadSlot *slot) {
    std::lock_guard<std::mutex> guard(lock_);
    slot->taken = false;
  }
  void *context() const { return context_; }

 private:
  void *context_;
  std::mutex lock_;
  std::vector<std::unique_ptr<DownloadSlot>> slots_;
};

class PackedDownload final : public Download {
 public:
  PackedDownload(std::shared_ptr<DownloadSlots> slots, DownloadSlot *slot, const Packing &packing,
                 int batch)
      : slots_(std::move(slots)), slot_(slot), batch_(batch), point_floats_(packing.point_floats) {
    for (int i = 0; i < batch; i++)
      capacity_[i] = packing.counts[i] ? packing.capacity[i] : 0, sent_[i] = packing.counts[i];
  }
  ~PackedDownload() override { slots_->release(slot_); }

  bool ready() override {
    DeviceBinding::Scope scope(slots_->context());
    return scope.ok() && cudaEventQuery(slot_->done) != cudaErrorNotReady;
  }

  Status take(int frame, Candidates *out) override {
    if (frame < 0 || frame >= batch_ || !sent_[frame])
      return Status::Error("frame " + std::to_string(frame) + " was not downloaded");
    DeviceBinding::Scope scope(slots_->context());
    if (!scope.ok()) return Status::Error("cannot make the stage's CUDA context current");
    // Asleep, not polling: 32 cameras' threads waiting at once must leave the cores to the
    // threads with work (polling ones made the rate follow the host's load).
    cudaError_t packed = cudaEventQuery(slot_->done);
    if (packed == cudaErrorNotReady) packed = cudaEventSynchronize(slot_->done);
    CUDANMS_CUDA_TRY(packed);
    const uint32_t *counts = slot_->counts.get();
    const size_t floats_per = 6 + static_cast<size_t>(point_floats_);
    const float *at = slot_->packed.get();
    for (int i = 0; i < frame; i++)
      if (sent_[i]) at += std::min(counts[i], capacity_[i]) * floats_per;
    const size_t n = counts[frame];
    if (n > capacity_[frame]) return Status::Error("decoded more candidates than the buffer holds");
    Candidates &c = *out;
    c.clear();
    c.points_per_candidate = point_floats_ / 2;
    c.boxes.assign(at, at + 4 * n);
    c.scores.assign(at + 4 * n, at + 5 * n);
    c.class_ids.resize(n);
    std::memcpy(c.class_ids.data(), at + 5 * n, n * sizeof(int32_t));
    c.points.assign(at + 6 * n, at + 6 * n + point_floats_ * n);
    return Status::Ok();
  }

 private:
  const std::shared_ptr<DownloadSlots> slots_;
  DownloadSlot *const slot_;
  const int batch_;
  const int point_floats_;
  uint32_t capacity_[kMaxBatch] = {};
  bool sent_[kMaxBatch] = {};
};

class Stage final : public CudaStage {
 public:
  ~Stage() override {
    DeviceBinding::Scope scope(binding_.context());
    buffers_.reset();
    downloads_.reset();
    timeline_.reset();
    for (cudaEvent_t event : {copied_, done_, prepared_, consumed_[0], consumed_[1]})
      if (event) cudaEventDestroy(event);
    if (prep_stream_) cudaStreamDestroy(prep_stream_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  Status open(int device) {
    Status status = binding_.open(device);
    if (!status.ok()) return status;
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Its short kernels first where the network's wait for a free SM.
    int lowest, highest;
    CUDANMS_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    CUDANMS_CUDA_TRY(cudaStreamCreateWithPriority(&prep_stream_, cudaStreamNonBlocking, highest));
    // The host waits on these (host_wait.h).
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&copied_, kBlockingEventFlags));
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&done_, kBlockingEventFlags));
    for (cudaEvent_t *event : {&prepared_, &consumed_[0], &consumed_[1]})
      CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    downloads_ = std::make_shared<DownloadSlots>(binding_.context());
    CUDANMS_CUDA_TRY(timeline_->open());
    return Status::Ok();
  }
  void *stream() const override { return stream_; }
  void *context() const override { return binding_.context(); }
  const std::string &device_name() const override { return binding_.name(); }
  Status synchronize() override {
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(waits_.stream(prep_stream_, done_));
    CUDANMS_CUDA_TRY(waits_.stream(stream_, done_));
    return Status::Ok();
  }

  Status preprocess(const Image *images, const bool *on_device, int count, const InputSpec &spec,
                    float **d_input) override {
    CUDANMS_ENTER(binding_);
    if (count < 1 || count > kMaxBatch) return Status::Error("a batch holds 1 to 64 frames");
    // The tensor the last batch read is free once what the stream holds now has run; this batch
    // takes the one before, free once the batch before the last was run.
    CUDANMS_CUDA_TRY(cudaEventRecord(consumed_[input_], stream_));
    input_ ^= 1;
    CUDANMS_CUDA_TRY(cudaStreamWaitEvent(prep_stream_, consumed_[input_], 0));
    DeviceArray<float> &input = buffers_->inputs[input_];
    Status status = input.reserve(static_cast<size_t>(count) * 3 * spec.width * spec.height);
    if (!status.ok()) return status;
    Image device_images[kMaxBatch];
    std::copy(images, images + count, device_images);
    status = upload(device_images, on_device, count);
    if (!status.ok()) return status;
    status = preprocess_cuda(device_images, count, spec, input.get(), prep_stream_);
    if (!status.ok()) return status;
    CUDANMS_CUDA_TRY(cudaEventRecord(prepared_, prep_stream_));
    CUDANMS_CUDA_TRY(cudaStreamWaitEvent(stream_, prepared_, 0));
    timeline_->start(stream_);
    *d_input = input.get();
    return Status::Ok();
  }

  Status frames_copied() override {
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(waits_.event(copied_));
    return Status::Ok();
  }

  Status decode(const Outputs &outputs, const Letterbox *letterboxes,
                DeviceCandidates *const *targets, const DecodeParams *params, const bool *to_host,
                std::shared_ptr<Download> *download) override {
    CUDANMS_ENTER(binding_);
    timeline_->decoding(stream_);
    const Status status = decode_batch(outputs, letterboxes, targets, params, to_host, download);
    if (status.ok()) timeline_->end(stream_);
    return status;
  }

  GpuTimes gpu_times() override {
    DeviceBinding::Scope scope(binding_.context());
    return scope.ok() ? timeline_->totals() : GpuTimes();
  }
  void restart_gpu_times() override { timeline_->restart(); }

 private:
  Status decode_batch(const Outputs &outputs, const Letterbox *letterboxes,
                      DeviceCandidates *const *targets, const DecodeParams *params,
                      const bool *to_host, std::shared_ptr<Download> *download) {
    if (outputs.batch < 1 || outputs.batch > kMaxBatch)
      return Status::Error("a batch holds 1 to 64 frames");
    const int per = outputs.points_per_candidate();
    const size_t frame_points = static_cast<size_t>(outputs.anchors) * 2 * per;
    float *d_points[kMaxBatch] = {};
    if (per > 0) {
      Status status = buffers_->points.reserve(outputs.batch * frame_points);
      if (!status.ok()) return status;
      for (int i = 0; i < outputs.batch; i++)
        d_points[i] = buffers_->points.get() + i * frame_points;
    }
    Status status = buffers_->chunk_counts.reserve(decode_workspace(outputs));
    if (!status.ok()) return status;
    status = decode_cuda(outputs, letterboxes, targets, d_points, params,
                         buffers_->chunk_counts.get(), stream_);
    if (!status.ok()) return status;
    // Sealed where an element reads them in place; those downloaded here need no seal.
    DeviceCandidates *in_place[kMaxBatch];
    int n_in_place = 0;
    for (int i = 0; i < outputs.batch; i++)
      if (!to_host || !to_host[i]) in_place[n_in_place++] = targets[i];
    status = seal_all(in_place, n_in_place, stream_);
    if (!status.ok() || n_in_place == outputs.batch) return status;
    return send(outputs, targets, d_points, to_host, download);
  }

  // The candidates of the frames with to_host[i] into a download slot: one kernel packs every
  // such frame's candidates and count into host-mapped memory (a copy of each frame's count and
  // four of its arrays, ~260 calls a batch of 64, took longer than the GPU work of the whole
  // chain), and the slot's event follows it.
  Status send(const Outputs &outputs, DeviceCandidates *const *targets, float *const *d_points,
              const bool *to_host, std::shared_ptr<Download> *download) {
    const int per = outputs.points_per_candidate();
    const size_t floats_per =
        4 + 1 + 1 + 2 * static_cast<size_t>(per);  // box, score, class, points
    Packing packing{};
    packing.point_floats = 2 * per;
    size_t room = 0;
    for (int i = 0; i < outputs.batch; i++) {
      if (!to_host[i]) continue;
      packing.boxes[i] = reinterpret_cast<const float4 *>(targets[i]->boxes());
      packing.scores[i] = targets[i]->scores();
      packing.class_ids[i] = targets[i]->class_ids();
      packing.counts[i] = targets[i]->count();
      packing.capacity[i] = static_cast<uint32_t>(targets[i]->capacity());
      packing.points[i] = d_points[i];
      room += targets[i]->capacity() * floats_per;
    }
    DownloadSlot *slot = nullptr;
    Status status = downloads_->acquire(&slot);
    if (!status.ok()) return status;
    auto sent = std::make_shared<PackedDownload>(downloads_, slot, packing, outputs.batch);
    status = slot->counts.reserve(kMaxBatch);
    if (status.ok()) status = slot->packed.reserve(room);
    if (!status.ok()) return status;
    pack_candidates<<<outputs.batch, 256, 0, stream_>>>(packing, slot->counts.device(),
                                                        slot->packed.device());
    CUDANMS_CUDA_TRY(cudaGetLastError());
    CUDANMS_CUDA_TRY(cudaEventRecord(slot->done, stream_));
    *download = std::move(sent);
    return Status::Ok();
  }

  // Frames in host memory into the staging buffer, their planes packed; those images then point
  // there.
  Status upload(Image *images, const bool *on_device, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) {
      if (on_device[i]) continue;
      for (int p = 0; p < planes_of(images[i].format); p++) {
        size_t row_bytes;
        int rows;
        plane_extent(images[i], p, &row_bytes, &rows);
        total += (row_bytes + 255) / 256 * 256 * rows;
      }
    }
    if (total == 0) return Status::Ok();
    Status status = buffers_->staging.reserve(total);
    if (!status.ok()) return status;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
      if (on_device[i]) continue;
      Image &image = images[i];
      for (int p = 0; p < planes_of(image.format); p++) {
        size_t row_bytes;
        int rows;
        plane_extent(image, p, &row_bytes, &rows);
        const size_t pitch = (row_bytes + 255) / 256 * 256;
        CUDANMS_CUDA_TRY(cudaMemcpy2DAsync(buffers_->staging.get() + at, pitch, image.planes[p],
                                           image.strides[p], row_bytes, rows,
                                           cudaMemcpyHostToDevice, prep_stream_));
        image.planes[p] = buffers_->staging.get() + at;
        image.strides[p] = static_cast<int>(pitch);
        at += pitch * rows;
      }
    }
    CUDANMS_CUDA_TRY(cudaEventRecord(copied_, prep_stream_));
    return Status::Ok();
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  // Pre-processing runs on a stream of its own into one of two input tensors, so that a batch's
  // pre-processing overlaps the forward before it; stream_ waits for it (prepared_).
  cudaStream_t prep_stream_ = nullptr;
  cudaEvent_t prepared_ = nullptr;
  cudaEvent_t consumed_[2] = {};  // after the last forward that read inputs[i]
  int input_ = 0;                 // the tensor of the last batch
  cudaEvent_t copied_ = nullptr;  // after the last upload of host frames
  cudaEvent_t done_ = nullptr;    // the host's waits for a stream
  detail::HostWait waits_;
  // Freed in the destructor, inside the binding's scope.
  struct Buffers {
    DeviceArray<float> inputs[2];
    DeviceArray<uint8_t> staging;  // reused by the next batch after prep_stream_'s work
    DeviceArray<float> points;
    DeviceArray<uint32_t> chunk_counts;  // decode_cuda's workspace
  };
  std::unique_ptr<Buffers> buffers_ = std::make_unique<Buffers>();
  std::shared_ptr<DownloadSlots> downloads_;
  std::unique_ptr<detail::BatchTimeline> timeline_ = std::make_unique<detail::BatchTimeline>();
};

}  // namespace

std::unique_ptr<CudaStage> CudaStage::create(int device, Status *status) {
  auto stage = std::make_unique<Stage>();
  *status = stage->open(device);
  if (!status->ok()) return nullptr;
  return stage;
}

}  // namespace cudanms::dnn
