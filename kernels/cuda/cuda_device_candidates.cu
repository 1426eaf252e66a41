// The device candidates pool: one device allocation and one event per buffer, made while fewer
// than max_buffers exist and recycled through a free list after that.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "cuda_device.h"
#include "cudanms/device_candidates.h"
#include "host_wait.h"

namespace cudanms {
namespace detail {
namespace {

// capacity boxes, scores and class ids, then the count, in one allocation.
struct Layout {
  explicit Layout(size_t capacity)
      : scores(capacity * 4 * sizeof(float)),
        class_ids(scores + capacity * sizeof(float)),
        count(class_ids + capacity * sizeof(int32_t)),
        bytes(count + sizeof(uint32_t)) {}
  size_t scores, class_ids, count, bytes;
};

// A download copies this many candidates with the count, in one round trip: a frame of as many
// or fewer (a cascade's or BlazeFace's few faces) needs no second one. A sealed buffer has them
// in host-mapped memory already: no round trip.
constexpr size_t kStagedCandidates = 64;

// Where seal's copy of a buffer's count and first `staged` candidates goes: its host-mapped
// staging, laid out as a buffer of `staged`.
struct Summary {
  const float4 *boxes;
  const float *scores;
  const int32_t *class_ids;
  const uint32_t *count;
  uint32_t staged;
  float4 *staged_boxes;
  float *staged_scores;
  int32_t *staged_class_ids;
  uint32_t *staged_count;
};
// Buffers sealed by one launch: 32 x 72 bytes stay within a kernel's 4 KB of parameters.
constexpr int kSummariesPerLaunch = 32;
struct Summaries {
  Summary of[kSummariesPerLaunch];
};

// A block per buffer: its count and first candidates into its staging.
__global__ void summarise(const Summaries summaries) {
  const Summary &m = summaries.of[blockIdx.x];
  const uint32_t n = *m.count;
  for (uint32_t i = threadIdx.x; i < min(n, m.staged); i += blockDim.x) {
    m.staged_boxes[i] = m.boxes[i];
    m.staged_scores[i] = m.scores[i];
    m.staged_class_ids[i] = m.class_ids[i];
  }
  if (threadIdx.x == 0) *m.staged_count = n;
}

class Buffer final : public DeviceCandidates {
 public:
  Buffer(size_t capacity, void *context) : capacity_(capacity), context_(context) {}
  ~Buffer() override {
    cudaFree(memory_);
    if (ready_) cudaEventDestroy(ready_);
    if (downloaded_) cudaEventDestroy(downloaded_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  Status allocate() {
    const size_t bytes = Layout(capacity_).bytes;
    CUDANMS_CUDA_TRY(cudaMalloc(&memory_, bytes));
    // Consumers on the host wait on these (host_wait.h).
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&ready_, kBlockingEventFlags));
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&downloaded_, kBlockingEventFlags));
    CUDANMS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Zeroed once, as a download's fixed-size first copy reads past a small frame's count; and
    // finished here, before a producer's stream (which need not wait for this one) writes it.
    CUDANMS_CUDA_TRY(cudaMemsetAsync(memory_, 0, bytes, stream_));
    CUDANMS_CUDA_TRY(cudaStreamSynchronize(stream_));
    return staged_.reserve(Layout(std::min(capacity_, kStagedCandidates)).bytes);
  }
  float *boxes() const override { return reinterpret_cast<float *>(memory_); }
  float *scores() const override { return reinterpret_cast<float *>(at(Layout(capacity_).scores)); }
  int32_t *class_ids() const override {
    return reinterpret_cast<int32_t *>(at(Layout(capacity_).class_ids));
  }
  uint32_t *count() const override {
    return reinterpret_cast<uint32_t *>(at(Layout(capacity_).count));
  }
  size_t capacity() const override { return capacity_; }
  void *ready() const override { return ready_; }
  void *context() const override { return context_; }

  Status seal(void *stream) override {
    DeviceCandidates *self = this;
    return seal_all(&self, 1, stream);
  }
  // Where seal's kernel copies this buffer's summary.
  Summary summary() const {
    const size_t n_staged = std::min(capacity_, kStagedCandidates);
    const Layout staged(n_staged), full(capacity_);
    unsigned char *mapped = staged_.device();
    return {reinterpret_cast<const float4 *>(memory_),
            reinterpret_cast<const float *>(at(full.scores)),
            reinterpret_cast<const int32_t *>(at(full.class_ids)),
            reinterpret_cast<const uint32_t *>(at(full.count)),
            static_cast<uint32_t>(n_staged),
            reinterpret_cast<float4 *>(mapped),
            reinterpret_cast<float *>(mapped + staged.scores),
            reinterpret_cast<int32_t *>(mapped + staged.class_ids),
            reinterpret_cast<uint32_t *>(mapped + staged.count)};
  }
  // After its summary's kernel on `stream`: ready there, its summary valid.
  Status sealed_on(cudaStream_t stream) {
    CUDANMS_CUDA_TRY(cudaEventRecord(ready_, stream));
    sealed_ = true;
    return Status::Ok();
  }
  const uint32_t *host_count() const override {
    if (!sealed_) return nullptr;
    return reinterpret_cast<const uint32_t *>(staged_.get() +
                                              Layout(std::min(capacity_, kStagedCandidates)).count);
  }
  // Back in the pool: the next producer seals again, or its consumers copy.
  void unseal() { sealed_ = false; }

  // The count and the first candidates in pinned memory after the ready event: already there
  // once sealed, else copied there with one synchronisation; only a larger frame then copies all
  // of them. The staging is the buffer's: consumers on two branches of a tee take turns.
  Status download(HostCandidates *out) const override {
    std::lock_guard<std::mutex> lock(download_mutex_);
    *out = HostCandidates();
    DeviceBinding::Scope scope(context_);
    if (!scope.ok()) return Status::Error("cannot make the candidates' CUDA context current");
    const size_t n_staged = std::min(capacity_, kStagedCandidates);
    const Layout staged(n_staged), full(capacity_);
    unsigned char *host = staged_.get();
    if (sealed_) {
      CUDANMS_CUDA_TRY(waits_.event(ready_));
      return from_staging(out);
    }
    CUDANMS_CUDA_TRY(cudaStreamWaitEvent(stream_, ready_, 0));
    CUDANMS_CUDA_TRY(cudaMemcpyAsync(host + staged.count, at(full.count), sizeof(uint32_t),
                                     cudaMemcpyDeviceToHost, stream_));
    CUDANMS_CUDA_TRY(
        cudaMemcpyAsync(host, memory_, staged.scores, cudaMemcpyDeviceToHost, stream_));
    CUDANMS_CUDA_TRY(cudaMemcpyAsync(host + staged.scores, at(full.scores),
                                     n_staged * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDANMS_CUDA_TRY(cudaMemcpyAsync(host + staged.class_ids, at(full.class_ids),
                                     n_staged * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUDANMS_CUDA_TRY(waits_.stream(stream_, downloaded_));
    return from_staging(out);
  }

 private:
  // The staged candidates, or all of them when there are more.
  Status from_staging(HostCandidates *out) const {
    const size_t n_staged = std::min(capacity_, kStagedCandidates);
    const Layout staged(n_staged);
    const unsigned char *host = staged_.get();
    uint32_t n = 0;
    std::memcpy(&n, host + staged.count, sizeof n);
    if (n > n_staged) return cudanms::download(view(), out);  // it reports a count past capacity
    const auto *boxes = reinterpret_cast<const float *>(host);
    const auto *scores = reinterpret_cast<const float *>(host + staged.scores);
    const auto *class_ids = reinterpret_cast<const int32_t *>(host + staged.class_ids);
    out->boxes.assign(boxes, boxes + 4 * size_t{n});
    out->scores.assign(scores, scores + n);
    out->class_ids.assign(class_ids, class_ids + n);
    return Status::Ok();
  }

  unsigned char *at(size_t offset) const { return static_cast<unsigned char *>(memory_) + offset; }
  size_t capacity_;
  void *context_;
  void *memory_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t downloaded_ = nullptr;  // the host's wait for a download
  mutable HostWait waits_;
  cudaStream_t stream_ = nullptr;      // the downloads' copies
  MappedArray<unsigned char> staged_;  // pinned: seal's summary, or a download's first copy
  mutable std::mutex download_mutex_;
  // Set by the producer's thread before the buffer is handed on, read by its consumers.
  std::atomic<bool> sealed_{false};
};

class Pool final : public DeviceCandidatesPool, public std::enable_shared_from_this<Pool> {
 public:
  explicit Pool(const DeviceCandidatesPoolOptions &options) : options_(options) {}
  ~Pool() override {
    DeviceBinding::Scope scope(binding_.context());
    free_.clear();  // every buffer has come back: the handed-out ones hold the pool
  }
  Status init() {
    if (options_.capacity == 0 || options_.capacity > kMaxCount) {
      return Status::Error("a device candidates buffer holds 1 to 2^32 - 1 candidates");
    }
    if (options_.max_buffers == 0) return Status::Error("a pool needs at least one buffer");
    return binding_.open(options_.device);
  }

  std::shared_ptr<DeviceCandidates> acquire(Status *status) override {
    *status = Status::Ok();
    std::unique_ptr<Buffer> buffer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        buffer = std::move(free_.back());
        free_.pop_back();
      } else if (allocated_ < options_.max_buffers) {
        ++allocated_;  // claimed now; given back below if the allocation fails
      } else {
        return nullptr;
      }
    }
    if (!buffer) {
      DeviceBinding::Scope scope(binding_.context());
      buffer = std::make_unique<Buffer>(options_.capacity, binding_.context());
      *status =
          scope.ok() ? buffer->allocate() : Status::Error("cannot make the CUDA context current");
      if (!status->ok()) {
        buffer.reset();
        std::lock_guard<std::mutex> lock(mutex_);
        --allocated_;
        return nullptr;
      }
    }
    // The buffer comes back to this pool, which lives as long as any of its buffers is out.
    std::shared_ptr<Pool> self = shared_from_this();
    Buffer *raw = buffer.release();
    return std::shared_ptr<DeviceCandidates>(raw, [self](DeviceCandidates *b) {
      static_cast<Buffer *>(b)->unseal();
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->free_.emplace_back(static_cast<Buffer *>(b));
    });
  }
  size_t capacity() const override { return options_.capacity; }
  size_t buffers() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
  }
  size_t bytes() const override { return buffers() * Layout(options_.capacity).bytes; }

 private:
  DeviceCandidatesPoolOptions options_;  // its keep_alive outlives the memory: declared first
  DeviceBinding binding_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Buffer>> free_;
  size_t allocated_ = 0;
};

}  // namespace
}  // namespace detail

std::shared_ptr<DeviceCandidatesPool> DeviceCandidatesPool::create(
    const DeviceCandidatesPoolOptions &options, Status *status) {
  auto pool = std::make_shared<detail::Pool>(options);
  *status = pool->init();
  if (!status->ok()) return nullptr;
  return pool;
}

Status seal_all(DeviceCandidates *const *buffers, int n, void *stream) {
  if (n < 1) return Status::Ok();
  detail::DeviceBinding::Scope scope(buffers[0]->context());
  if (!scope.ok()) return Status::Error("cannot make the candidates' CUDA context current");
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The pooled buffers a launch at a time, no allocation (a cascade seals every frame).
  detail::Summaries summaries;
  detail::Buffer *chunk[detail::kSummariesPerLaunch];
  int filled = 0;
  auto launch = [&]() -> Status {
    if (filled == 0) return Status::Ok();
    detail::summarise<<<static_cast<unsigned>(filled), detail::kStagedCandidates, 0, s>>>(
        summaries);
    CUDANMS_CUDA_TRY(cudaGetLastError());
    for (int i = 0; i < filled; i++) {
      Status status = chunk[i]->sealed_on(s);
      if (!status.ok()) return status;
    }
    filled = 0;
    return Status::Ok();
  };
  for (int i = 0; i < n; i++) {
    Status status;
    if (auto *b = dynamic_cast<detail::Buffer *>(buffers[i])) {
      summaries.of[filled] = b->summary();
      chunk[filled++] = b;
      if (filled == detail::kSummariesPerLaunch) status = launch();
    } else {
      status = buffers[i]->seal(stream);
    }
    if (!status.ok()) return status;
  }
  return launch();
}

Status DeviceCandidates::seal(void *stream) {
  detail::DeviceBinding::Scope scope(context());
  if (!scope.ok()) return Status::Error("cannot make the candidates' CUDA context current");
  CUDANMS_CUDA_TRY(
      cudaEventRecord(static_cast<cudaEvent_t>(ready()), static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

Status device_count(const DeviceCandidatesView &view, uint32_t *count) {
  *count = 0;
  if (view.capacity == 0) return Status::Ok();
  if (view.count == nullptr) return Status::Error("device candidates have no count");
  detail::DeviceBinding::Scope scope(view.context);
  if (!scope.ok()) return Status::Error("cannot make the candidates' CUDA context current");
  thread_local detail::HostWait waits;  // the calling thread's: a view has no owner here
  if (view.ready) CUDANMS_CUDA_TRY(waits.event(static_cast<cudaEvent_t>(view.ready)));
  if (view.host_count && view.ready) {
    *count = *static_cast<const volatile uint32_t *>(view.host_count);
  } else {
    CUDANMS_CUDA_TRY(cudaMemcpy(count, view.count, sizeof *count, cudaMemcpyDeviceToHost));
  }
  if (*count > view.capacity) {
    return Status::Error("the producer counted " + std::to_string(*count) +
                         " candidates in a buffer of " + std::to_string(view.capacity));
  }
  return Status::Ok();
}

Status download(const DeviceCandidatesView &view, HostCandidates *out) {
  *out = HostCandidates();
  if (view.capacity == 0) return Status::Ok();
  if (view.count == nullptr || view.boxes == nullptr || view.scores == nullptr) {
    return Status::Error("device candidates have no boxes, scores or count");
  }
  uint32_t n = 0;
  const Status counted = device_count(view, &n);
  if (!counted.ok()) return counted;
  detail::DeviceBinding::Scope scope(view.context);
  if (!scope.ok()) return Status::Error("cannot make the candidates' CUDA context current");
  out->boxes.resize(4 * size_t{n});
  out->scores.resize(n);
  out->class_ids.assign(n, 0);
  if (n == 0) return Status::Ok();
  CUDANMS_CUDA_TRY(cudaMemcpy(out->boxes.data(), view.boxes, out->boxes.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
  CUDANMS_CUDA_TRY(
      cudaMemcpy(out->scores.data(), view.scores, n * sizeof(float), cudaMemcpyDeviceToHost));
  if (view.class_ids) {
    CUDANMS_CUDA_TRY(cudaMemcpy(out->class_ids.data(), view.class_ids, n * sizeof(int32_t),
                                cudaMemcpyDeviceToHost));
  }
  return Status::Ok();
}

}  // namespace cudanms
