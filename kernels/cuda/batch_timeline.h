// A stream's batches on the GPU, timed by events that are read once they have passed and never
// waited for (dnn::GpuTimes): the thread that launches batches marks each one's start, decoding
// and end; any thread reads the totals. In the stream's CUDA context.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <mutex>

#include "cudanms/dnn.h"

namespace cudanms::detail {

class BatchTimeline {
 public:
  BatchTimeline() = default;
  BatchTimeline(const BatchTimeline &) = delete;
  BatchTimeline &operator=(const BatchTimeline &) = delete;
  ~BatchTimeline() {
    for (Batch &b : batches_)
      for (cudaEvent_t e : {b.start, b.decoding, b.end})
        if (e) cudaEventDestroy(e);
  }

  cudaError_t open() {
    for (Batch &b : batches_)
      for (cudaEvent_t *e : {&b.start, &b.decoding, &b.end}) {
        const cudaError_t made = cudaEventCreate(e);
        if (made != cudaSuccess) return made;
      }
    return cudaSuccess;
  }

  // A batch starts on `stream` where the stream is now. A batch that never ended is forgotten;
  // with every slot still running (kSlots batches in flight), this one goes untimed.
  void start(cudaStream_t stream) {
    std::lock_guard<std::mutex> guard(lock_);
    harvest();
    if (current_ >= 0) broken_ = true, current_ = -1;
    for (int i = 0; i < kSlots; i++) {
      if (i == last_ || in_flight(i)) continue;
      if (cudaEventRecord(batches_[i].start, stream) != cudaSuccess) break;
      current_ = i;
      batches_[i].after_untimed = broken_;
      broken_ = false;
      return;
    }
    broken_ = true;
  }
  void decoding(cudaStream_t stream) { mark(stream, &Batch::decoding, false); }
  void end(cudaStream_t stream) { mark(stream, &Batch::end, true); }

  dnn::GpuTimes totals() {
    std::lock_guard<std::mutex> guard(lock_);
    harvest();
    return totals_;
  }

  // From zero, the batches before forgotten (a warm-up's are not the stream's work).
  void restart() {
    std::lock_guard<std::mutex> guard(lock_);
    in_flight_.clear();
    current_ = last_ = -1;
    broken_ = false;
    totals_ = dnn::GpuTimes();
  }

 private:
  static constexpr int kSlots = 8;
  struct Batch {
    cudaEvent_t start = nullptr, decoding = nullptr, end = nullptr;
    bool after_untimed = false;  // a batch between the one before and this went untimed
  };

  bool in_flight(int i) const {
    for (int j : in_flight_)
      if (j == i) return true;
    return false;
  }

  void mark(cudaStream_t stream, cudaEvent_t Batch::*event, bool ends) {
    std::lock_guard<std::mutex> guard(lock_);
    if (current_ < 0) return;
    if (cudaEventRecord(batches_[current_].*event, stream) != cudaSuccess) {
      broken_ = true, current_ = -1;
      return;
    }
    if (!ends) return;
    in_flight_.push_back(current_);
    current_ = -1;
  }

  // The batches that have passed, in order, into totals_.
  void harvest() {
    while (!in_flight_.empty()) {
      const int i = in_flight_.front();
      const Batch &b = batches_[i];
      const cudaError_t passed = cudaEventQuery(b.end);
      if (passed == cudaErrorNotReady) return;
      in_flight_.pop_front();
      float forward = 0, decode = 0, idle = 0;
      if (passed != cudaSuccess || cudaEventElapsedTime(&forward, b.start, b.decoding) ||
          cudaEventElapsedTime(&decode, b.decoding, b.end)) {
        last_ = -1;
        continue;
      }
      totals_.batches++;
      totals_.forward_ms += forward;
      totals_.decode_ms += decode;
      if (last_ >= 0 && !b.after_untimed &&
          cudaEventElapsedTime(&idle, batches_[last_].end, b.start) == cudaSuccess) {
        totals_.gaps++;
        totals_.idle_ms += idle > 0 ? idle : 0;
      }
      last_ = i;
    }
  }

  std::mutex lock_;
  Batch batches_[kSlots];
  std::deque<int> in_flight_;  // ended on the stream, not yet passed, in order
  int current_ = -1;           // started, not yet ended
  int last_ = -1;              // the last batch harvested: the next one's gap starts at its end
  bool broken_ = false;        // the next batch follows one that went untimed
  dnn::GpuTimes totals_;
};

}  // namespace cudanms::detail
