// The CUDA backend. Per frame, on one stream, with one host synchronisation at the end:
//   host    rules 1-3 (common/select.h); the selected candidates packed into one pinned buffer
//   H2D     one copy
//   rank    scores sorted descending by a stable radix sort, so equal scores keep index order;
//           boxes and classes gathered into rank order. Up to kSmallFrame candidates, one block
//           does it all in one launch; larger frames use CUB's device-wide sort and a gather.
//   pairs   tiles of ranks i x j < i; where j suppresses i, greedy appends j to i's predecessor
//           list and matrix counts it: memory O(Dmax * kMaxPredecessors), not Dmax^2
//   settle  one block. Greedy: the unique fixpoint of "i is kept iff no predecessor is kept",
//           reached by in-place sweeps, each settling at least the best-ranked undecided
//           candidate (Cluster-NMS on edges, REFERENCE.md). Matrix: kept iff no suppressor.
//           Then the kept ranks are compacted in rank order, capped at max_detections.
//   D2H     one copy; the host maps packed positions to candidate indices
// A frame where a candidate has more than kMaxPredecessors predecessors, or that needs more than
// kMaxSweeps sweeps (adversarial input), is redone on the CPU, which computes the same result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "common/overlap.h"
#include "common/select.h"
#include "cpu/cpu_nms.h"
#include "cuda_nms.h"

#define CUDANMS_TRY(call)                       \
  do {                                          \
    const cudaError_t cudanms_error_ = (call);  \
    if (cudanms_error_ != cudaSuccess) {        \
      return cuda_error(#call, cudanms_error_); \
    }                                           \
  } while (0)

namespace cudanms {
namespace detail {
namespace {

constexpr uint32_t kTile = 128;  // ranks per side of a pair tile, one thread per row
constexpr uint32_t kMaxPredecessors = 128;
constexpr uint32_t kMaxSweeps = 256;
constexpr int kSettleThreads = 1024;
constexpr int kScanItems = 8;  // ranks per thread per compaction step
constexpr int kRankThreads = 1024;
constexpr int kRankItems = 4;
constexpr uint32_t kSmallFrame = kRankThreads * kRankItems;

// The settle kernel keeps one status byte per candidate in shared memory.
constexpr size_t kMaxCudaCandidates = 128 * 1024;

enum : uint8_t { kUndecided = 0, kKept = 1, kSuppressed = 2 };

// Layout of the output buffer copied back per frame.
enum : uint32_t { kOutKept = 0, kOutFallback = 1, kOutPositions = 2 };

Status cuda_error(const char *what, cudaError_t error) {
  return Status::Error(std::string(what) + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

__device__ Box to_box(float4 v) { return {v.x, v.y, v.z, v.w}; }

__global__ void gather_kernel(const float4 *boxes, const int32_t *classes, const uint32_t *order,
                              uint32_t m, float4 *rank_boxes, int32_t *rank_classes) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < m) {
    const uint32_t p = order[r];
    rank_boxes[r] = boxes[p];
    rank_classes[r] = classes[p];
  }
}

// The whole rank stage of a small frame in one block: sort, gather, and zero the counts the pair
// kernel accumulates into. Padding sorts last: valid scores are finite, so above -inf.
__global__ void __launch_bounds__(kRankThreads)
    rank_small_kernel(const float4 *boxes, const float *scores, const int32_t *classes, uint32_t m,
                      float4 *rank_boxes, float *rank_scores, int32_t *rank_classes,
                      uint32_t *order, uint32_t *counts) {
  using Sort = cub::BlockRadixSort<float, kRankThreads, kRankItems, uint32_t>;
  __shared__ typename Sort::TempStorage s_sort;
  float keys[kRankItems];
  uint32_t positions[kRankItems];
  for (int k = 0; k < kRankItems; ++k) {
    const uint32_t p = threadIdx.x * kRankItems + k;  // blocked arrangement
    keys[k] = p < m ? scores[p] : -INFINITY;
    positions[k] = p;
  }
  Sort(s_sort).SortDescending(keys, positions);
  for (int k = 0; k < kRankItems; ++k) {
    const uint32_t r = threadIdx.x * kRankItems + k;
    if (r < m) {
      const uint32_t p = positions[k];
      order[r] = p;
      rank_scores[r] = keys[k];
      rank_boxes[r] = boxes[p];
      rank_classes[r] = classes[p];
      counts[r] = 0;
    }
  }
}

// Block (x, y) tests the ranks i of row tile y against the ranks j < i of column tile x <= y,
// the column tile staged in shared memory.
template <Method kMethod>
__global__ void __launch_bounds__(kTile)
    pairs_kernel(const float4 *rank_boxes, const float *rank_scores, const int32_t *rank_classes,
                 uint32_t m, Overlap overlap_kind, float threshold, uint32_t *counts,
                 uint32_t *predecessors) {
  if (blockIdx.x > blockIdx.y) return;
  __shared__ float4 s_boxes[kTile];
  __shared__ float s_scores[kTile];
  __shared__ int32_t s_classes[kTile];
  const uint32_t first = blockIdx.x * kTile;
  if (first + threadIdx.x < m) {
    s_boxes[threadIdx.x] = rank_boxes[first + threadIdx.x];
    s_scores[threadIdx.x] = rank_scores[first + threadIdx.x];
    s_classes[threadIdx.x] = rank_classes[first + threadIdx.x];
  }
  __syncthreads();
  const uint32_t i = blockIdx.y * kTile + threadIdx.x;
  if (i >= m) return;
  const Box b = to_box(rank_boxes[i]);
  const float score_b = rank_scores[i];
  const int32_t class_b = rank_classes[i];
  const uint32_t end = min(first + kTile, i);
  for (uint32_t j = first; j < end; ++j) {
    const uint32_t t = j - first;
    if (s_classes[t] != class_b) continue;
    const Box a = to_box(s_boxes[t]);
    if (kMethod == Method::kGreedy) {
      if (greedy_suppresses(overlap_kind, threshold, a, b)) {
        const uint32_t slot = atomicAdd(&counts[i], 1u);
        if (slot < kMaxPredecessors) predecessors[size_t{i} * kMaxPredecessors + slot] = j;
      }
    } else if (matrix_suppresses(overlap_kind, threshold, a, s_scores[t], b, score_b)) {
      atomicAdd(&counts[i], 1u);  // one suppressor settles it
      return;
    }
  }
}

// Writes out[kOutKept], out[kOutFallback] and the packed positions of the kept candidates.
template <Method kMethod>
__global__ void __launch_bounds__(kSettleThreads)
    settle_kernel(const uint32_t *counts, const uint32_t *predecessors, const uint32_t *order,
                  uint32_t m, uint32_t limit, uint32_t *out) {
  extern __shared__ uint8_t s_dynamic[];
  volatile uint8_t *status = s_dynamic;
  const uint32_t tid = threadIdx.x;

  bool overflow = false;
  for (uint32_t i = tid; i < m; i += kSettleThreads) {
    const uint32_t n = counts[i];
    overflow |= n > kMaxPredecessors;
    status[i] = n == 0 ? kKept : (kMethod == Method::kGreedy ? kUndecided : kSuppressed);
  }
  bool fallback = __syncthreads_or(overflow);

  // Statuses only ever go from undecided to final, and a candidate is settled only from final
  // statuses, so reading a neighbour's update early or late is harmless.
  for (uint32_t sweep = 0; kMethod == Method::kGreedy && !fallback; ++sweep) {
    bool undecided = false;
    for (uint32_t i = tid; i < m; i += kSettleThreads) {
      if (status[i] != kUndecided) continue;
      const uint32_t *p = predecessors + size_t{i} * kMaxPredecessors;
      const uint32_t n = counts[i];
      bool all_suppressed = true;
      bool suppressed = false;
      for (uint32_t k = 0; k < n && !suppressed; ++k) {
        const uint8_t s = status[p[k]];
        suppressed = s == kKept;
        all_suppressed &= s == kSuppressed;
      }
      if (suppressed) {
        status[i] = kSuppressed;
      } else if (all_suppressed) {
        status[i] = kKept;
      } else {
        undecided = true;
      }
    }
    if (!__syncthreads_or(undecided)) break;
    fallback = sweep + 1 == kMaxSweeps;
  }
  if (fallback) {
    if (tid == 0) {
      out[kOutKept] = 0;
      out[kOutFallback] = 1;
    }
    return;
  }

  using Scan = cub::BlockScan<uint32_t, kSettleThreads>;
  __shared__ typename Scan::TempStorage s_scan;
  uint32_t base = 0;
  for (uint32_t start = 0; start < m; start += kSettleThreads * kScanItems) {
    uint32_t kept[kScanItems];
    uint32_t offset[kScanItems];
    const uint32_t first = start + tid * kScanItems;
    for (int k = 0; k < kScanItems; ++k) {
      kept[k] = first + k < m && status[first + k] == kKept ? 1u : 0u;
    }
    uint32_t total = 0;
    Scan(s_scan).ExclusiveSum(kept, offset, total);
    for (int k = 0; k < kScanItems; ++k) {
      const uint32_t slot = base + offset[k];
      if (kept[k] && slot < limit) out[kOutPositions + slot] = order[first + k];
    }
    base += total;
    __syncthreads();  // s_scan is reused
  }
  if (tid == 0) {
    out[kOutKept] = min(base, limit);
    out[kOutFallback] = 0;
  }
}

__global__ void iota_kernel(uint32_t *values, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }
  Status allocate(size_t count) {
    cudaFree(ptr_);
    ptr_ = nullptr;
    CUDANMS_TRY(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    return Status::Ok();
  }
  T *get() const { return ptr_; }

 private:
  T *ptr_ = nullptr;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  Status allocate(size_t count) {
    cudaFreeHost(ptr_);
    ptr_ = nullptr;
    CUDANMS_TRY(cudaMallocHost(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    return Status::Ok();
  }
  T *get() const { return ptr_; }

 private:
  T *ptr_ = nullptr;
};

// Per candidate in the staging buffer: a float4 box, a score, a class id.
constexpr size_t kStagedBytes = sizeof(float4) + sizeof(float) + sizeof(int32_t);

class CudaContext final : public Context {
 public:
  CudaContext() = default;
  ~CudaContext() override {
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  Status init(const ContextOptions &options) {
    int count = 0;
    CUDANMS_TRY(cudaGetDeviceCount(&count));
    if (options.device < 0 || options.device >= count) {
      return Status::Error("CUDA device " + std::to_string(options.device) + " does not exist (" +
                           std::to_string(count) + " found)");
    }
    device_ = options.device;
    CUDANMS_TRY(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    CUDANMS_TRY(cudaGetDeviceProperties(&prop, device_));
    name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
    if (options.stream != nullptr) {
      stream_ = static_cast<cudaStream_t>(options.stream);
    } else {
      CUDANMS_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    if (options.time_device) {
      CUDANMS_TRY(cudaEventCreate(&start_));
      CUDANMS_TRY(cudaEventCreate(&stop_));
    }
    return reserve(options.max_candidates);
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return name_; }

 private:
  Status run_checked(const CandidatesView &c, const Params &params, Result *result) override {
    select_candidates(c, params, &selected_, &result->counts);
    const auto m = static_cast<uint32_t>(selected_.size());
    if (m == 0) return Status::Ok();
    CUDANMS_TRY(cudaSetDevice(device_));
    Status status = reserve(std::max<size_t>(m, params.max_candidates));
    if (!status.ok()) return status;

    stage(c, params, m);
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    status = launch(params, m);
    if (!status.ok()) return status;
    if (stop_) CUDANMS_TRY(cudaEventRecord(stop_, stream_));
    CUDANMS_TRY(cudaStreamSynchronize(stream_));
    if (stop_) {
      float ms = 0;
      CUDANMS_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      result->device_time_us = 1000.0f * ms;
    }

    const uint32_t *out = h_out_.get();
    if (out[kOutFallback] != 0) return cpu_->run(c, params, result);
    result->kept.resize(out[kOutKept]);
    for (uint32_t k = 0; k < out[kOutKept]; ++k) {
      result->kept[k] = selected_[out[kOutPositions + k]];
    }
    result->counts.kept = out[kOutKept];
    return Status::Ok();
  }

  // Packs the selected candidates into the pinned staging buffer: m boxes, m scores, m classes.
  void stage(const CandidatesView &c, const Params &params, uint32_t m) {
    auto *boxes = reinterpret_cast<float4 *>(h_stage_.get());
    auto *scores = reinterpret_cast<float *>(boxes + m);
    auto *classes = reinterpret_cast<int32_t *>(scores + m);
    for (uint32_t p = 0; p < m; ++p) {
      const size_t index = selected_[p];
      std::memcpy(&boxes[p], c.boxes + 4 * index, sizeof(float4));
      // Radix sort orders -0.0 below +0.0; the rules rank them equal, so canonicalise.
      scores[p] = c.scores[index] + 0.0f;
      classes[p] = (params.class_agnostic || c.class_ids == nullptr) ? 0 : c.class_ids[index];
    }
  }

  Status launch(const Params &params, uint32_t m) {
    auto *d_boxes = reinterpret_cast<float4 *>(d_stage_.get());
    auto *d_scores = reinterpret_cast<float *>(d_boxes + m);
    auto *d_classes = reinterpret_cast<int32_t *>(d_scores + m);
    CUDANMS_TRY(cudaMemcpyAsync(d_stage_.get(), h_stage_.get(), m * kStagedBytes,
                                cudaMemcpyHostToDevice, stream_));

    if (m <= kSmallFrame) {
      rank_small_kernel<<<1, kRankThreads, 0, stream_>>>(
          d_boxes, d_scores, d_classes, m, d_rank_boxes_.get(), d_rank_scores_.get(),
          d_rank_classes_.get(), d_order_.get(), d_counts_.get());
      CUDANMS_TRY(cudaGetLastError());
    } else {
      size_t sort_bytes = sort_temp_bytes_;
      CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
          d_sort_temp_.get(), sort_bytes, d_scores, d_rank_scores_.get(), d_iota_.get(),
          d_order_.get(), static_cast<int>(m), 0, 32, stream_));
      gather_kernel<<<(m + 255) / 256, 256, 0, stream_>>>(
          d_boxes, d_classes, d_order_.get(), m, d_rank_boxes_.get(), d_rank_classes_.get());
      CUDANMS_TRY(cudaGetLastError());
      CUDANMS_TRY(cudaMemsetAsync(d_counts_.get(), 0, m * sizeof(uint32_t), stream_));
    }

    const uint32_t limit = params.max_detections == 0 || params.max_detections > m
                               ? m
                               : static_cast<uint32_t>(params.max_detections);
    const uint32_t tiles = (m + kTile - 1) / kTile;
    const dim3 pair_grid(tiles, tiles);
    if (params.method == Method::kGreedy) {
      pairs_kernel<Method::kGreedy><<<pair_grid, kTile, 0, stream_>>>(
          d_rank_boxes_.get(), d_rank_scores_.get(), d_rank_classes_.get(), m, params.overlap,
          params.threshold, d_counts_.get(), d_predecessors_.get());
      CUDANMS_TRY(cudaGetLastError());
      settle_kernel<Method::kGreedy><<<1, kSettleThreads, m, stream_>>>(
          d_counts_.get(), d_predecessors_.get(), d_order_.get(), m, limit, d_out_.get());
    } else {
      pairs_kernel<Method::kMatrix><<<pair_grid, kTile, 0, stream_>>>(
          d_rank_boxes_.get(), d_rank_scores_.get(), d_rank_classes_.get(), m, params.overlap,
          params.threshold, d_counts_.get(), d_predecessors_.get());
      CUDANMS_TRY(cudaGetLastError());
      settle_kernel<Method::kMatrix><<<1, kSettleThreads, m, stream_>>>(
          d_counts_.get(), d_predecessors_.get(), d_order_.get(), m, limit, d_out_.get());
    }
    CUDANMS_TRY(cudaGetLastError());
    CUDANMS_TRY(cudaMemcpyAsync(h_out_.get(), d_out_.get(),
                                (kOutPositions + size_t{limit}) * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, stream_));
    return Status::Ok();
  }

  // Sizes every buffer for n candidates; a no-op when they are already large enough.
  Status reserve(size_t n) {
    if (n <= capacity_) return Status::Ok();
    if (n > kMaxCudaCandidates) {
      return Status::Error("the CUDA backend takes at most " + std::to_string(kMaxCudaCandidates) +
                           " candidates per frame (max_candidates), asked for " +
                           std::to_string(n));
    }
    capacity_ = 0;
    Status status = Status::Ok();
    auto step = [&status](Status s) {
      if (status.ok()) status = std::move(s);
    };
    step(h_stage_.allocate(n * kStagedBytes));
    step(h_out_.allocate(kOutPositions + n));
    step(d_stage_.allocate(n * kStagedBytes));
    step(d_rank_scores_.allocate(n));
    step(d_iota_.allocate(n));
    step(d_order_.allocate(n));
    step(d_rank_boxes_.allocate(n));
    step(d_rank_classes_.allocate(n));
    step(d_counts_.allocate(n));
    step(d_predecessors_.allocate(n * kMaxPredecessors));
    step(d_out_.allocate(kOutPositions + n));
    if (!status.ok()) return status;
    // One status byte per candidate: past the default 48 KiB, shared memory must be asked for.
    CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kGreedy>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(n)));
    CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kMatrix>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(n)));

    sort_temp_bytes_ = 0;
    CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
        nullptr, sort_temp_bytes_, static_cast<const float *>(nullptr),
        static_cast<float *>(nullptr), static_cast<const uint32_t *>(nullptr),
        static_cast<uint32_t *>(nullptr), static_cast<int>(n), 0, 32, stream_));
    status = d_sort_temp_.allocate(sort_temp_bytes_);
    if (!status.ok()) return status;

    iota_kernel<<<(n + 255) / 256, 256, 0, stream_>>>(d_iota_.get(), static_cast<uint32_t>(n));
    CUDANMS_TRY(cudaGetLastError());
    CUDANMS_TRY(cudaStreamSynchronize(stream_));
    capacity_ = n;
    return Status::Ok();
  }

  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr;  // both set only with ContextOptions::time_device
  cudaEvent_t stop_ = nullptr;
  size_t capacity_ = 0;
  size_t sort_temp_bytes_ = 0;
  std::vector<uint32_t> selected_;  // candidate indices, in packed (ascending index) order
  std::unique_ptr<Context> cpu_ = create_cpu_context({});  // exact redo of adversarial frames

  PinnedBuffer<unsigned char> h_stage_;
  PinnedBuffer<uint32_t> h_out_;
  DeviceBuffer<unsigned char> d_stage_;
  DeviceBuffer<float> d_rank_scores_;
  DeviceBuffer<uint32_t> d_iota_;
  DeviceBuffer<uint32_t> d_order_;  // rank -> packed position
  DeviceBuffer<float4> d_rank_boxes_;
  DeviceBuffer<int32_t> d_rank_classes_;
  DeviceBuffer<uint32_t> d_counts_;        // predecessors (greedy) or suppressors (matrix)
  DeviceBuffer<uint32_t> d_predecessors_;  // kMaxPredecessors ranks per rank
  DeviceBuffer<uint32_t> d_out_;
  DeviceBuffer<unsigned char> d_sort_temp_;
};

}  // namespace

std::unique_ptr<Context> create_cuda_context(const ContextOptions &options, Status *status) {
  auto context = std::make_unique<CudaContext>();
  *status = context->init(options);
  if (!status->ok()) return nullptr;
  return context;
}

}  // namespace detail

bool cuda_compiled() { return true; }

bool cuda_available(std::string *why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(error);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

}  // namespace cudanms
