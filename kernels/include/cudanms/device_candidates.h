// Per-frame candidate buffers in device memory, from a pool their producer owns: a GPU detector
// writes a frame's candidates and their count into one without the host seeing them, NMS reads
// them in place (Context::run on DeviceCandidatesView), and the buffer goes back to the pool when
// its last reference is dropped, from any thread. No device allocation per frame.
//
//   auto pool = cudanms::DeviceCandidatesPool::create({device, capacity}, &status);
//   std::shared_ptr<cudanms::DeviceCandidates> c = pool->acquire(&status);
//   detector->detect(image, params, class_id, c.get());      // kernels fill it, then c->seal()
//   nms->run(c->view(), params, &result);                     // waits on the event, on the GPU
//   cudanms::HostCandidates host; c->download(&host);         // only where host boxes are needed
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms {

// Candidates in host memory, as a download leaves them.
struct HostCandidates {
  std::vector<float> boxes;  // 4 per candidate
  std::vector<float> scores;
  std::vector<int32_t> class_ids;
  CandidatesView view() const {
    return {boxes.data(), scores.data(), class_ids.data(), scores.size()};
  }
};

// Waits for the view's ready event, then copies its count and that many candidates to the host:
// the one copy a consumer that needs host boxes makes. A count above the capacity is an error.
Status download(const DeviceCandidatesView &view, HostCandidates *out);

// Waits for the view's ready event, then reads its count (one word) into *count, from host_count
// where the view has it, else by a copy: what a consumer reads to choose where a frame's NMS runs
// before it moves any candidate.
Status device_count(const DeviceCandidatesView &view, uint32_t *count);

// One pooled buffer. Its memory is valid while a reference is held; its contents once its ready
// event has completed.
class DeviceCandidates {
 public:
  virtual ~DeviceCandidates() = default;
  virtual float *boxes() const = 0;  // capacity x 4, 16-byte aligned
  virtual float *scores() const = 0;
  virtual int32_t *class_ids() const = 0;
  virtual uint32_t *count() const = 0;  // one device word
  virtual size_t capacity() const = 0;
  virtual void *ready() const = 0;    // a cudaEvent_t the producer records after writing
  virtual void *context() const = 0;  // the CUcontext of the memory
  // The producer's last call, after its work on `stream` (a cudaStream_t of context()) has
  // written the candidates and the count: records the ready event there. A pooled buffer first
  // copies the count and its first candidates (64) into host-mapped memory on the GPU, so that
  // after the event a consumer reads a small frame there with no copy (host_count, download).
  // Once sealed, each refill of the same acquisition is sealed too; back in its pool a buffer
  // is unsealed.
  virtual Status seal(void *stream);
  // The count in host-mapped memory, valid once the ready event has completed; nullptr where the
  // buffer was not sealed.
  virtual const uint32_t *host_count() const { return nullptr; }
  DeviceCandidatesView view() const {
    return {boxes(), scores(), class_ids(), count(), capacity(), ready(), context(), host_count()};
  }
  // cudanms::download of view(); a pooled buffer brings a small frame back in one round trip, or
  // none once sealed.
  virtual Status download(HostCandidates *out) const { return cudanms::download(view(), out); }
};

// Seals n buffers of one CUDA context after their producer's work on `stream`, as each one's
// seal() would, with one summary kernel for the pooled ones (a batch of 32 frames had 32 launches).
Status seal_all(DeviceCandidates *const *buffers, int n, void *stream);

struct DeviceCandidatesPoolOptions {
  int device = 0;
  size_t capacity = 4096;  // candidates per buffer
  size_t max_buffers = 8;  // buffers in flight at most: the pool's memory bound
  // Released after the pool's memory is freed: whatever keeps its CUDA context alive (e.g. a
  // reference to a GstCudaContext).
  std::shared_ptr<void> keep_alive;
};

// Works in the CUDA context current on the creating thread when it is on the device, else the
// device's primary context (as Context and cascade::Detector do).
class DeviceCandidatesPool {
 public:
  static std::shared_ptr<DeviceCandidatesPool> create(const DeviceCandidatesPoolOptions &options,
                                                      Status *status);
  virtual ~DeviceCandidatesPool() = default;
  // A free buffer, or a new one while fewer than max_buffers exist; nullptr with an ok status
  // when all are in use (the caller decides: wait, or hand over host candidates instead).
  virtual std::shared_ptr<DeviceCandidates> acquire(Status *status) = 0;
  virtual size_t capacity() const = 0;
  virtual size_t buffers() const = 0;  // allocated so far
  virtual size_t bytes() const = 0;    // device memory they take
};

}  // namespace cudanms
