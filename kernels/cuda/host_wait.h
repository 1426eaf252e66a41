// How the host waits for the GPU. CUDA's default for a process with fewer contexts than cores is
// to spin: the waiting thread holds a core for the whole wait, most of a millisecond a frame for
// a 1080p cascade (1.27 core-ms a frame on an H200 with 32 streams, against 0.23 asleep). But a
// sleeping thread wakes ~40 us after the GPU is done, which a short NMS call must not pay (a
// 10 000-candidate frame took 164 us instead of 130). So a HostWait polls while its owner's
// waits usually end within the poll limit, and sleeps in the driver (events made with
// kBlockingEventFlags) once they take longer: NMS on its own polls, a chain that waits for a
// detector's work sleeps.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

namespace cudanms::detail {

constexpr unsigned kBlockingEventFlags = cudaEventBlockingSync | cudaEventDisableTiming;

// The waits of one owner (an NMS context, a detector, a candidates buffer): how long they have
// lately taken decides whether the next one polls or sleeps.
class HostWait {
 public:
  // Until `event` (one of kBlockingEventFlags) has completed.
  cudaError_t event(cudaEvent_t event) {
    using Clock = std::chrono::steady_clock;
    const double limit = poll_limit_us();
    const double budget = typical_us_.load(std::memory_order_relaxed) <= limit
                              ? limit
                              : std::min(limit, kShortPollUs);
    const auto start = Clock::now();
    const auto until = start + std::chrono::duration<double, std::micro>(budget);
    cudaError_t status;
    while ((status = cudaEventQuery(event)) == cudaErrorNotReady) {
      if (Clock::now() >= until) {
        status = cudaEventSynchronize(event);
        break;
      }
    }
    const double waited = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    const float typical = typical_us_.load(std::memory_order_relaxed);
    typical_us_.store(typical == 0 ? waited : 0.75f * typical + 0.25f * waited,
                      std::memory_order_relaxed);
    return status;
  }

  // Until everything queued on `stream` so far has run; `event` (one of kBlockingEventFlags) is
  // recorded on it for that.
  cudaError_t stream(cudaStream_t stream, cudaEvent_t event) {
    const cudaError_t status = cudaEventRecord(event, stream);
    return status == cudaSuccess ? this->event(event) : status;
  }

  // Microseconds a wait may poll: CUDANMS_WAIT_POLL_US (0: always sleep; a large value: always
  // poll, as CUDA's spin), else 300.
  static double poll_limit_us() {
    static const double us = [] {
      const char *value = std::getenv("CUDANMS_WAIT_POLL_US");
      return value ? std::atof(value) : 300.0;
    }();
    return us;
  }

 private:
  static constexpr double kShortPollUs = 10;  // a long wait's poll before it sleeps
  std::atomic<float> typical_us_{0};          // recent waits' mean (exponential), microseconds
};

}  // namespace cudanms::detail
