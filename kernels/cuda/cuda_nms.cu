// The CUDA backend. Per frame, on one stream, with one host synchronisation at the end:
//   host      the candidates copied as they are into one pinned buffer: no per-candidate work
//   H2D       one copy, which also zeroes the frame's counters. Device candidates (a producer's
//             buffers, their count a device word) skip both: the stream waits on their event,
//             the counters are zeroed on the device, and the kernels read them in place.
//   classify  rules 1-2 (cudanms/nms.h) on the device: each candidate's sort key is its score
//             (-0.0 made +0.0), or -inf when it is invalid or below the score threshold
//   rank      rule 3: eligible candidates ordered by key, descending, equal keys by index, and the
//             best Dmax gathered into rank order. Up to kCountingRankMax candidates each one's
//             rank is counted in parallel, one launch; larger frames use CUB's radix sort (stable,
//             so equal keys keep index order) and a gather. Device candidates are always
//             counted, a tile of keys at a time: the sort would need their count on the host.
//   pairs     one warp per (rank i, run of 32-rank chunks j < i), a ballot per chunk; where j
//             suppresses i, greedy appends j to i's predecessor list and matrix counts it:
//             memory O(Dmax * kMaxPredecessors), not Dmax^2
//   settle    one block. Greedy: the unique fixpoint of "i is kept iff no predecessor is kept",
//             reached by in-place sweeps, each settling at least the best-ranked undecided
//             candidate (Cluster-NMS on edges, REFERENCE.md). Matrix: kept iff no suppressor.
//             Then the kept candidates' indices, in rank order, capped at max_detections.
//   D2H       one copy of the counts and the kept indices (device candidates: and the kept
//             values, written by a kernel into mapped host memory)
// The number of ranked candidates is known only on the device, so every kernel after classify
// reads it there and launches are sized for the most it can be.
// A frame where a candidate has more than kMaxPredecessors predecessors, or that needs more than
// kMaxSweeps sweeps (adversarial input), is redone on the CPU, which computes the same result;
// so is a frame ranking more than kMaxCudaCandidates.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda/atomic>
#include <string>

#include "common/overlap.h"
#include "cpu/cpu_nms.h"
#include "cuda_device.h"
#include "cuda_nms.h"
#include "cudanms/device_candidates.h"

#define CUDANMS_TRY(call) CUDANMS_CUDA_TRY(call)

namespace cudanms {
namespace detail {
namespace {

constexpr uint32_t kWarp = 32;
constexpr uint32_t kFullMask = 0xffffffffu;
constexpr uint32_t kMaxPredecessors = 512;
constexpr uint32_t kMaxSweeps = 256;
constexpr int kSettleThreads = 1024;
constexpr int kScanItems = 8;  // ranks per thread per compaction step
constexpr int kClassifyThreads = 256;
constexpr uint32_t kCountingRankMax = 16 * 1024;
constexpr int kCountingWarps = 32;   // each counts over a 32nd of the frame
constexpr int kPairWarps = 8;        // ranks i per pair block, a warp each
constexpr uint32_t kPairChunks = 8;  // 32-rank chunks of j per warp
// Up to this many ranked candidates, the settle kernel keeps predecessor counts in shared memory.
constexpr uint32_t kSharedCounts = 16 * 1024;

// The settle kernel keeps one status byte per ranked candidate in shared memory; frames that
// rank more are run on the CPU.
constexpr size_t kMaxCudaCandidates = 128 * 1024;

enum : uint8_t { kUndecided = 0, kKept = 1, kSuppressed = 2 };

// The frame's counters, at the head of both the staged input (zeroed by the copy to the device)
// and the output (copied back), followed by the kept indices in the output.
enum : uint32_t {
  kInvalid,
  kBelowScore,
  kEligible,
  kKeptCount,
  kFallback,
  kIn,              // device candidates: the producer's count
  kCountOverflow,   // device candidates: that count was above the capacity
  kHeaderWords = 8  // keeps what follows 16-byte aligned
};

__device__ Box to_box(float4 v) { return {v.x, v.y, v.z, v.w}; }

// How many candidates NMS processes: the eligible ones, at most Dmax.
__device__ uint32_t ranked_count(const uint32_t *header, uint32_t dmax) {
  return min(header[kEligible], dmax);
}

// Warp-aggregated: one atomic per warp and counter.
__device__ void count_in(uint32_t *counter, bool flag) {
  const uint32_t votes = __ballot_sync(kFullMask, flag);
  if (threadIdx.x % kWarp == 0 && votes != 0) atomicAdd(counter, __popc(votes));
}

// n is the capacity; device candidates bring their count, and the slots past it are never read.
__global__ void __launch_bounds__(kClassifyThreads)
    classify_kernel(const float4 *boxes, const float *scores, uint32_t n, const uint32_t *d_count,
                    float score_threshold, float *keys, uint32_t *header) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = d_count ? min(*d_count, n) : n;
  if (d_count && p == 0) {
    header[kIn] = *d_count;
    header[kCountOverflow] = *d_count > n;
  }
  bool valid = false;
  bool below = false;
  if (p < count) {
    const float s = scores[p];
    valid = is_valid(to_box(boxes[p]), s);
    below = valid && s < score_threshold;
    keys[p] = valid && !below ? s + 0.0f : -INFINITY;  // radix sort would put -0.0 below +0.0
  }
  count_in(&header[kInvalid], p < count && !valid);
  count_in(&header[kBelowScore], below);
  count_in(&header[kEligible], valid && !below);
}

// Puts the candidate `p` of key `key` at rank r, if r < Dmax, and zeroes its predecessor count.
__device__ void place(uint32_t r, uint32_t p, float key, const float4 *boxes,
                      const int32_t *classes, float4 *rank_boxes, float *rank_scores,
                      int32_t *rank_classes, uint32_t *order, uint32_t *counts) {
  order[r] = p;
  rank_scores[r] = key;
  rank_boxes[r] = boxes[p];
  rank_classes[r] = classes ? classes[p] : 0;
  counts[r] = 0;
}

// The rank stage in one launch: an eligible candidate's rank is the number of candidates ranked
// before it (ineligible keys are -inf, below every eligible one). Block b ranks the 32 candidates
// 32b + lane; its warps count over slices of the keys, staged in shared memory a tile of
// kCountingRankMax at a time. Host frames take it up to one tile (larger ones are sorted);
// device candidates always, as only the device knows their count: blocks past it leave at once,
// so the work follows the frame's count, not the buffer's capacity.
__global__ void __launch_bounds__(kCountingWarps *kWarp)
    counting_rank_kernel(const float *keys, uint32_t n, const uint32_t *d_count,
                         const float4 *boxes, const int32_t *classes, uint32_t dmax,
                         float4 *rank_boxes, float *rank_scores, int32_t *rank_classes,
                         uint32_t *order, uint32_t *counts) {
  extern __shared__ float s_keys[];
  __shared__ uint32_t s_before[kCountingWarps][kWarp];
  const uint32_t count = d_count ? min(*d_count, n) : n;
  if (blockIdx.x * kWarp >= count) return;  // the whole block
  const uint32_t warp = threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t p = blockIdx.x * kWarp + lane;
  const float key = p < count ? keys[p] : -INFINITY;
  uint32_t before = 0;
  for (uint32_t tile = 0; tile < count; tile += kCountingRankMax) {
    const uint32_t size = min(kCountingRankMax, count - tile);
    __syncthreads();  // every warp is done with the previous tile
    for (uint32_t j = threadIdx.x; j < size; j += blockDim.x) s_keys[j] = keys[tile + j];
    __syncthreads();
    const uint32_t slice = (size + kCountingWarps - 1) / kCountingWarps;
    const uint32_t end = min(size, (warp + 1) * slice);
#pragma unroll 8
    for (uint32_t j = warp * slice; j < end; ++j) {
      const float other = s_keys[j];  // every lane reads the same word: a broadcast
      before += other > key || (other == key && tile + j < p);
    }
  }
  s_before[warp][lane] = before;
  __syncthreads();
  if (warp == 0 && key != -INFINITY) {
    uint32_t r = 0;
    for (int w = 0; w < kCountingWarps; ++w) r += s_before[w][lane];
    if (r < dmax) {
      place(r, p, key, boxes, classes, rank_boxes, rank_scores, rank_classes, order, counts);
    }
  }
}

// After CUB's sort of the keys: the best ranks gathered, in place over `order`.
__global__ void gather_kernel(const float *sorted_keys, const float4 *boxes, const int32_t *classes,
                              const uint32_t *header, uint32_t dmax, float4 *rank_boxes,
                              float *rank_scores, int32_t *rank_classes, uint32_t *order,
                              uint32_t *counts) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < ranked_count(header, dmax)) {
    place(r, order[r], sorted_keys[r], boxes, classes, rank_boxes, rank_scores, rank_classes, order,
          counts);
  }
}

// Warp w of block (x, y) tests rank i = 8y + w against the ranks j < i of chunks
// [8x, 8x + 8): lane l takes j = 32c + l, and a ballot gathers the chunk's verdicts.
template <Method kMethod>
__global__ void __launch_bounds__(kPairWarps *kWarp)
    pairs_kernel(const float4 *rank_boxes, const float *rank_scores, const int32_t *rank_classes,
                 const uint32_t *header, uint32_t dmax, Overlap overlap_kind, float threshold,
                 uint32_t *counts, uint32_t *predecessors) {
  const uint32_t m = ranked_count(header, dmax);
  const uint32_t i = blockIdx.y * kPairWarps + threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t first_chunk = blockIdx.x * kPairChunks;
  if (i >= m || first_chunk * kWarp >= i) return;  // the whole warp: i is per warp
  const Box b = to_box(rank_boxes[i]);
  const float score_b = rank_scores[i];
  const int32_t class_b = rank_classes[i];
  const uint32_t chunks = min(first_chunk + kPairChunks, (i + kWarp - 1) / kWarp) - first_chunk;
  // Every chunk's loads first, so that the warp waits for memory once, not once per chunk.
  Box a[kPairChunks];
  float score_a[kPairChunks];
  bool same_class[kPairChunks];
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    const uint32_t j = (first_chunk + c) * kWarp + lane;
    const bool before_i = c < chunks && j < i;
    same_class[c] = before_i && rank_classes[j] == class_b;
    if (before_i) {
      a[c] = to_box(rank_boxes[j]);
      if (kMethod == Method::kMatrix) score_a[c] = rank_scores[j];
    }
  }
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    if (c >= chunks) break;
    const uint32_t j = (first_chunk + c) * kWarp + lane;
    const bool suppresses =
        same_class[c] &&
        (kMethod == Method::kGreedy
             ? greedy_suppresses(overlap_kind, threshold, a[c], b)
             : matrix_suppresses(overlap_kind, threshold, a[c], score_a[c], b, score_b));
    const uint32_t bits = __ballot_sync(kFullMask, suppresses);
    if (bits == 0) continue;
    if (kMethod == Method::kMatrix) {
      if (lane == 0) atomicAdd(&counts[i], 1u);  // one suppressor settles it
      return;
    }
    uint32_t base = 0;
    if (lane == 0) base = atomicAdd(&counts[i], static_cast<uint32_t>(__popc(bits)));
    base = __shfl_sync(kFullMask, base, 0);
    const uint32_t slot = base + __popc(bits & ((1u << lane) - 1));
    if (suppresses && slot < kMaxPredecessors) {
      predecessors[size_t{i} * kMaxPredecessors + slot] = j;
    }
  }
}

// Shared memory of the settle kernel: a status byte per ranked candidate, in 32-bit words, then
// (up to kSharedCounts of them) a 16-bit predecessor count each.
__host__ __device__ uint32_t settle_counts_offset(uint32_t m) { return (m + 3) & ~3u; }
__host__ __device__ size_t settle_shared_bytes(uint32_t m) {
  return settle_counts_offset(m) + (m <= kSharedCounts ? 2 * size_t{m} : 0);
}

// During the sweeps a candidate's status is read by other threads while its owner may settle
// it. Statuses only go from undecided (0) to final, so the owner sets it with an atomic OR into
// its 32-bit word and readers load words with relaxed atomics: an early or late read is
// harmless, and there is no data race under the CUDA memory model, nor for compute-sanitizer
// racecheck (which flags relaxed byte loads and stores, but not this).
__device__ uint8_t load_status(uint32_t *statuses, uint32_t i) {
  const uint32_t word = cuda::atomic_ref<uint32_t, cuda::thread_scope_block>(statuses[i / 4])
                            .load(cuda::memory_order_relaxed);
  return static_cast<uint8_t>(word >> (8 * (i % 4)));
}
__device__ void settle_status(uint32_t *statuses, uint32_t i, uint8_t status) {
  atomicOr_block(&statuses[i / 4], static_cast<uint32_t>(status) << (8 * (i % 4)));
}

// A greedy candidate's status from its predecessors': suppressed by a kept one, kept when all
// are suppressed, else undecided. Predecessors are read four at a time (rows are 2 KiB aligned).
__device__ uint8_t greedy_verdict(const uint32_t *row, uint32_t n, uint32_t *statuses) {
  const uint4 *row4 = reinterpret_cast<const uint4 *>(row);
  bool all_suppressed = true;
  for (uint32_t k = 0; k < n; k += 8) {
    const uint4 first = __ldg(&row4[k / 4]);
    const uint4 second = k + 4 < n ? __ldg(&row4[k / 4 + 1]) : make_uint4(0, 0, 0, 0);
    const uint32_t p[8] = {first.x,  first.y,  first.z,  first.w,
                           second.x, second.y, second.z, second.w};
#pragma unroll
    for (uint32_t q = 0; q < 8; ++q) {
      if (k + q >= n) break;
      const uint8_t s = load_status(statuses, p[q]);
      if (s == kKept) return kSuppressed;
      all_suppressed &= s == kSuppressed;
    }
  }
  return all_suppressed ? kKept : kUndecided;
}

// Writes the output: the staged counters, the kept count, the fallback flag and the indices of
// the kept candidates in rank order, at most `limit` of them.
template <Method kMethod>
__global__ void __launch_bounds__(kSettleThreads)
    settle_kernel(const uint32_t *header, uint32_t dmax, const uint32_t *counts,
                  const uint32_t *predecessors, const uint32_t *order, uint32_t limit,
                  uint32_t *out) {
  extern __shared__ uint32_t s_dynamic[];
  const uint32_t m = ranked_count(header, dmax);
  uint32_t *statuses = s_dynamic;                                  // during the sweeps
  uint8_t *status_bytes = reinterpret_cast<uint8_t *>(s_dynamic);  // before and after them
  uint16_t *s_counts = reinterpret_cast<uint16_t *>(status_bytes + settle_counts_offset(m));
  const bool shared_counts = m <= kSharedCounts;
  const uint32_t tid = threadIdx.x;
  if (tid < kHeaderWords && tid != kKeptCount && tid != kFallback) out[tid] = header[tid];

  bool overflow = false;
  for (uint32_t i = tid; i < m; i += kSettleThreads) {
    const uint32_t n = counts[i];
    overflow |= n > kMaxPredecessors;
    status_bytes[i] = n == 0 ? kKept : (kMethod == Method::kGreedy ? kUndecided : kSuppressed);
    if (shared_counts) s_counts[i] = static_cast<uint16_t>(n);
  }
  bool fallback = __syncthreads_or(overflow);

  // A candidate is settled only from final statuses, so a sweep may see its neighbours' updates
  // of the same sweep or not (load_status).
  for (uint32_t sweep = 0; kMethod == Method::kGreedy && !fallback; ++sweep) {
    bool undecided = false;
    for (uint32_t i = tid; i < m; i += kSettleThreads) {
      if (load_status(statuses, i) != kUndecided) continue;
      const uint32_t n = shared_counts ? s_counts[i] : counts[i];
      const uint8_t verdict =
          greedy_verdict(predecessors + size_t{i} * kMaxPredecessors, n, statuses);
      if (verdict == kUndecided) {
        undecided = true;
      } else {
        settle_status(statuses, i, verdict);
      }
    }
    if (!__syncthreads_or(undecided)) break;
    fallback = sweep + 1 == kMaxSweeps;
  }
  if (fallback) {
    if (tid == 0) {
      out[kKeptCount] = 0;
      out[kFallback] = 1;
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
      kept[k] = first + k < m && status_bytes[first + k] == kKept ? 1u : 0u;
    }
    uint32_t total = 0;
    Scan(s_scan).ExclusiveSum(kept, offset, total);
    for (int k = 0; k < kScanItems; ++k) {
      const uint32_t slot = base + offset[k];
      if (kept[k] && slot < limit) out[kHeaderWords + slot] = order[first + k];
    }
    base += total;
    __syncthreads();  // s_scan is reused
  }
  if (tid == 0) {
    out[kKeptCount] = min(base, limit);
    out[kFallback] = 0;
  }
}

// Device candidates: the kept ones' values, straight into mapped host memory.
__global__ void kept_values_kernel(const uint32_t *out, const float4 *boxes, const float *scores,
                                   const int32_t *classes, float4 *kept_boxes, float *kept_scores,
                                   int32_t *kept_classes) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (out[kFallback] != 0 || k >= out[kKeptCount]) return;
  const uint32_t p = out[kHeaderWords + k];
  kept_boxes[k] = boxes[p];
  kept_scores[k] = scores[p];
  kept_classes[k] = classes ? classes[p] : 0;
}

__global__ void iota_kernel(uint32_t *values, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

// The staged input of n candidates: the counters, n boxes, n scores, and n class ids when the
// frame is per-class. Every part starts 16-byte aligned.
struct StagedLayout {
  explicit StagedLayout(size_t n, bool with_classes)
      : boxes(kHeaderWords * sizeof(uint32_t)),
        scores(boxes + n * sizeof(float4)),
        classes(scores + n * sizeof(float)),
        bytes(classes + (with_classes ? n * sizeof(int32_t) : 0)) {}
  size_t boxes, scores, classes, bytes;
};

// Where a frame's candidates are on the device: the staged copy of host candidates (count
// known on the host) or a producer's buffers (count a device word).
struct Inputs {
  const float4 *boxes;
  const float *scores;
  const int32_t *classes;  // nullptr: one class
  const uint32_t *count;   // nullptr: the capacity n passed to launch()
};

class CudaContext final : public Context {
 public:
  CudaContext() = default;
  ~CudaContext() override {
    DeviceBinding::Scope scope(binding_.context());
    ws_.reset();
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  Status init(const ContextOptions &options) {
    Status status = binding_.open(options.device);
    if (!status.ok()) return status;
    CUDANMS_ENTER(binding_);
    ws_ = std::make_unique<Workspace>();
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
    const size_t reserved = std::min(options.reserve_candidates, kMaxCudaCandidates);
    return reserve(reserved, reserved);
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return binding_.name(); }
  void *cuda_context() const override { return binding_.context(); }

 private:
  // The workspace, freed inside the context's scope.
  struct Workspace {
    MappedArray<unsigned char> h_stage;  // StagedLayout
    MappedArray<uint32_t> h_out;         // counters, then kept indices
    MappedArray<float4> h_kept_boxes;    // device candidates: the kept values
    MappedArray<float> h_kept_scores;
    MappedArray<int32_t> h_kept_classes;
    DeviceArray<unsigned char> d_stage;
    DeviceArray<float> d_keys;
    DeviceArray<float> d_sorted_keys;
    DeviceArray<uint32_t> d_iota;
    DeviceArray<uint32_t> d_order;  // rank -> candidate index
    DeviceArray<float> d_rank_scores;
    DeviceArray<float4> d_rank_boxes;
    DeviceArray<int32_t> d_rank_classes;
    DeviceArray<uint32_t> d_counts;        // predecessors (greedy) or suppressors (matrix)
    DeviceArray<uint32_t> d_predecessors;  // kMaxPredecessors ranks per rank
    DeviceArray<uint32_t> d_out;
    DeviceArray<unsigned char> d_sort_temp;
  };

  uint32_t kept_limit(const Params &params, uint32_t most) const {
    return params.max_detections == 0 || params.max_detections > most
               ? most
               : static_cast<uint32_t>(params.max_detections);
  }

  Status run_checked(const CandidatesView &c, const Params &params, Result *result) override {
    const auto n = static_cast<uint32_t>(c.count);
    result->counts.in = n;
    if (n == 0) return Status::Ok();
    // Launches are sized for the most candidates NMS may process; the device knows how many.
    const auto most = static_cast<uint32_t>(std::min<size_t>(n, params.max_candidates));
    // The settle kernel's statuses would not fit in shared memory: the CPU computes the same.
    if (most > kMaxCudaCandidates) return cpu_->run(c, params, result);
    CUDANMS_ENTER(binding_);
    Status status = reserve(n, most);
    if (!status.ok()) return status;

    const bool with_classes = !params.class_agnostic && c.class_ids != nullptr;
    const StagedLayout layout(n, with_classes);
    unsigned char *h = ws_->h_stage.get();
    std::memset(h, 0, layout.boxes);
    std::memcpy(h + layout.boxes, c.boxes, n * sizeof(float4));
    std::memcpy(h + layout.scores, c.scores, n * sizeof(float));
    if (with_classes) std::memcpy(h + layout.classes, c.class_ids, n * sizeof(int32_t));

    unsigned char *d = ws_->d_stage.get();
    const Inputs in{reinterpret_cast<const float4 *>(d + layout.boxes),
                    reinterpret_cast<const float *>(d + layout.scores),
                    with_classes ? reinterpret_cast<const int32_t *>(d + layout.classes) : nullptr,
                    nullptr};
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemcpyAsync(d, h, layout.bytes, cudaMemcpyHostToDevice, stream_));
    status = launch(params, n, most, kept_limit(params, most), in);
    if (status.ok()) status = finish(result);
    if (!status.ok()) return status;
    if (ws_->h_out.get()[kFallback] != 0) return cpu_->run(c, params, result);
    read_result(params, result);
    return Status::Ok();
  }

  Status run_device_checked(const DeviceCandidatesView &c, const Params &params,
                            Result *result) override {
    if (c.context != binding_.context()) {
      return Status::Error("the device candidates live in another CUDA context than " +
                           binding_.name() + "'s NMS; download them first");
    }
    if (c.capacity == 0) return Status::Ok();
    const auto n = static_cast<uint32_t>(c.capacity);
    const auto most = static_cast<uint32_t>(std::min<size_t>(n, params.max_candidates));
    if (most > kMaxCudaCandidates) return run_downloaded(c, params, result);
    CUDANMS_ENTER(binding_);
    Status status = reserve(n, most);
    if (!status.ok()) return status;

    auto *header = reinterpret_cast<uint32_t *>(ws_->d_stage.get());
    const Inputs in{reinterpret_cast<const float4 *>(c.boxes), c.scores,
                    params.class_agnostic ? nullptr : c.class_ids, c.count};
    const uint32_t limit = kept_limit(params, most);
    if (c.ready) CUDANMS_TRY(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(c.ready), 0));
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemsetAsync(header, 0, kHeaderWords * sizeof(uint32_t), stream_));
    status = launch(params, n, most, limit, in, header);
    if (!status.ok()) return status;
    kept_values_kernel<<<(limit + 255) / 256, 256, 0, stream_>>>(
        ws_->d_out.get(), in.boxes, c.scores, c.class_ids, ws_->h_kept_boxes.device(),
        ws_->h_kept_scores.device(), ws_->h_kept_classes.device());
    CUDANMS_TRY(cudaGetLastError());
    status = finish(result);
    if (!status.ok()) return status;
    const uint32_t *out = ws_->h_out.get();
    if (out[kCountOverflow] != 0) {
      return Status::Error("the producer counted " + std::to_string(out[kIn]) +
                           " candidates in a buffer of " + std::to_string(n));
    }
    if (out[kFallback] != 0) return run_downloaded(c, params, result);
    result->counts.in = out[kIn];
    read_result(params, result);
    const size_t kept = result->counts.kept;
    const float *boxes = reinterpret_cast<const float *>(ws_->h_kept_boxes.get());
    result->kept_boxes.assign(boxes, boxes + 4 * kept);
    result->kept_scores.assign(ws_->h_kept_scores.get(), ws_->h_kept_scores.get() + kept);
    result->kept_class_ids.assign(ws_->h_kept_classes.get(), ws_->h_kept_classes.get() + kept);
    return Status::Ok();
  }

  // Device candidates the GPU path cannot take (more than it ranks, adversarial overlaps): the
  // CPU computes the same result on a download.
  Status run_downloaded(const DeviceCandidatesView &c, const Params &params, Result *result) {
    HostCandidates host;
    Status status = download(c, &host);
    if (!status.ok()) return status;
    status = cpu_->run(host.view(), params, result);
    if (!status.ok()) return status;
    for (const uint32_t p : result->kept) {
      result->kept_boxes.insert(result->kept_boxes.end(), &host.boxes[4 * size_t{p}],
                                &host.boxes[4 * size_t{p} + 4]);
      result->kept_scores.push_back(host.scores[p]);
      result->kept_class_ids.push_back(host.class_ids[p]);
    }
    return Status::Ok();
  }

  // The one synchronisation of a frame.
  Status finish(Result *result) {
    if (stop_) CUDANMS_TRY(cudaEventRecord(stop_, stream_));
    CUDANMS_TRY(cudaStreamSynchronize(stream_));
    if (stop_) {
      float ms = 0;
      CUDANMS_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      result->device_time_us = 1000.0f * ms;
    }
    return Status::Ok();
  }

  void read_result(const Params &params, Result *result) const {
    const uint32_t *out = ws_->h_out.get();
    Counts &counts = result->counts;
    counts.invalid = out[kInvalid];
    counts.below_score = out[kBelowScore];
    counts.over_capacity = out[kEligible] - std::min<size_t>(out[kEligible], params.max_candidates);
    counts.kept = out[kKeptCount];
    result->kept.assign(out + kHeaderWords, out + kHeaderWords + counts.kept);
  }

  // The kernels, for n candidates (the capacity, for device candidates) of which at most `most`
  // are ranked; the header is the staged one unless given.
  Status launch(const Params &params, uint32_t n, uint32_t most, uint32_t limit, const Inputs &in,
                uint32_t *header = nullptr) {
    Workspace &w = *ws_;
    if (header == nullptr) header = reinterpret_cast<uint32_t *>(w.d_stage.get());
    const auto dmax = static_cast<uint32_t>(std::min<size_t>(params.max_candidates, UINT32_MAX));

    classify_kernel<<<(n + kClassifyThreads - 1) / kClassifyThreads, kClassifyThreads, 0,
                      stream_>>>(in.boxes, in.scores, n, in.count, params.score_threshold,
                                 w.d_keys.get(), header);
    CUDANMS_TRY(cudaGetLastError());
    if (n <= kCountingRankMax || in.count != nullptr) {
      const size_t tile_bytes = std::min(n, kCountingRankMax) * sizeof(float);
      counting_rank_kernel<<<(n + kWarp - 1) / kWarp, kCountingWarps * kWarp, tile_bytes,
                             stream_>>>(w.d_keys.get(), n, in.count, in.boxes, in.classes, dmax,
                                        w.d_rank_boxes.get(), w.d_rank_scores.get(),
                                        w.d_rank_classes.get(), w.d_order.get(), w.d_counts.get());
      CUDANMS_TRY(cudaGetLastError());
    } else {
      size_t sort_bytes = sort_temp_bytes_;
      CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
          w.d_sort_temp.get(), sort_bytes, w.d_keys.get(), w.d_sorted_keys.get(), w.d_iota.get(),
          w.d_order.get(), static_cast<int>(n), 0, 32, stream_));
      gather_kernel<<<(most + 255) / 256, 256, 0, stream_>>>(
          w.d_sorted_keys.get(), in.boxes, in.classes, header, dmax, w.d_rank_boxes.get(),
          w.d_rank_scores.get(), w.d_rank_classes.get(), w.d_order.get(), w.d_counts.get());
      CUDANMS_TRY(cudaGetLastError());
    }

    const uint32_t chunks = (most + kWarp - 1) / kWarp;
    const dim3 pair_grid((chunks + kPairChunks - 1) / kPairChunks,
                         (most + kPairWarps - 1) / kPairWarps);
    const size_t settle_bytes = settle_shared_bytes(most);
    if (params.method == Method::kGreedy) {
      pairs_kernel<Method::kGreedy><<<pair_grid, kPairWarps * kWarp, 0, stream_>>>(
          w.d_rank_boxes.get(), w.d_rank_scores.get(), w.d_rank_classes.get(), header, dmax,
          params.overlap, params.threshold, w.d_counts.get(), w.d_predecessors.get());
      CUDANMS_TRY(cudaGetLastError());
      settle_kernel<Method::kGreedy><<<1, kSettleThreads, settle_bytes, stream_>>>(
          header, dmax, w.d_counts.get(), w.d_predecessors.get(), w.d_order.get(), limit,
          w.d_out.get());
    } else {
      pairs_kernel<Method::kMatrix><<<pair_grid, kPairWarps * kWarp, 0, stream_>>>(
          w.d_rank_boxes.get(), w.d_rank_scores.get(), w.d_rank_classes.get(), header, dmax,
          params.overlap, params.threshold, w.d_counts.get(), w.d_predecessors.get());
      CUDANMS_TRY(cudaGetLastError());
      settle_kernel<Method::kMatrix><<<1, kSettleThreads, settle_bytes, stream_>>>(
          header, dmax, w.d_counts.get(), w.d_predecessors.get(), w.d_order.get(), limit,
          w.d_out.get());
    }
    CUDANMS_TRY(cudaGetLastError());
    CUDANMS_TRY(cudaMemcpyAsync(w.h_out.get(), w.d_out.get(),
                                (kHeaderWords + size_t{limit}) * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, stream_));
    return Status::Ok();
  }

  // Sizes the buffers for frames of n candidates of which at most `most` are ranked; a no-op
  // when they are large enough already.
  Status reserve(size_t n, size_t most) {
    Workspace &w = *ws_;
    Status status = Status::Ok();
    auto step = [&status](Status s) {
      if (status.ok()) status = std::move(s);
    };
    if (n > input_capacity_) {
      input_capacity_ = 0;
      const size_t staged = StagedLayout(n, true).bytes;
      step(w.h_stage.reserve(staged));
      step(w.d_stage.reserve(staged));
      step(w.d_keys.reserve(n));
      step(w.d_sorted_keys.reserve(n));
      step(w.d_iota.reserve(n));
      step(w.d_order.reserve(n));
      if (!status.ok()) return status;
      sort_temp_bytes_ = 0;
      CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
          nullptr, sort_temp_bytes_, static_cast<const float *>(nullptr),
          static_cast<float *>(nullptr), static_cast<const uint32_t *>(nullptr),
          static_cast<uint32_t *>(nullptr), static_cast<int>(n), 0, 32, stream_));
      status = w.d_sort_temp.reserve(sort_temp_bytes_);
      if (!status.ok()) return status;
      iota_kernel<<<(n + 255) / 256, 256, 0, stream_>>>(w.d_iota.get(), static_cast<uint32_t>(n));
      CUDANMS_TRY(cudaGetLastError());
      CUDANMS_TRY(cudaStreamSynchronize(stream_));
      // The counting rank stages every key: 64 KiB at its largest, past the default 48 KiB.
      CUDANMS_TRY(cudaFuncSetAttribute(
          counting_rank_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(std::min<size_t>(n, kCountingRankMax) * sizeof(float))));
      input_capacity_ = n;
    }
    if (most > ranked_capacity_) {
      ranked_capacity_ = 0;
      step(w.h_out.reserve(kHeaderWords + most));
      step(w.h_kept_boxes.reserve(most));
      step(w.h_kept_scores.reserve(most));
      step(w.h_kept_classes.reserve(most));
      step(w.d_out.reserve(kHeaderWords + most));
      step(w.d_rank_scores.reserve(most));
      step(w.d_rank_boxes.reserve(most));
      step(w.d_rank_classes.reserve(most));
      step(w.d_counts.reserve(most));
      step(w.d_predecessors.reserve(most * kMaxPredecessors));
      if (!status.ok()) return status;
      // Zeroed once, so that no byte is ever read uninitialised (compute-sanitizer initcheck):
      // the settle kernel reads predecessor rows four slots at a time, past a row's count too,
      // and the copy back takes `limit` kept slots of which the frame may fill fewer.
      CUDANMS_TRY(cudaMemsetAsync(w.d_predecessors.get(), 0,
                                  most * kMaxPredecessors * sizeof(uint32_t), stream_));
      CUDANMS_TRY(
          cudaMemsetAsync(w.d_out.get(), 0, (kHeaderWords + most) * sizeof(uint32_t), stream_));
      CUDANMS_TRY(cudaStreamSynchronize(stream_));
      // Past the default 48 KiB, shared memory must be asked for.
      const auto settle_bytes = static_cast<int>(std::max(
          settle_shared_bytes(static_cast<uint32_t>(std::min<size_t>(most, kSharedCounts))),
          settle_shared_bytes(static_cast<uint32_t>(most))));
      CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kGreedy>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, settle_bytes));
      CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kMatrix>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, settle_bytes));
      ranked_capacity_ = most;
    }
    return Status::Ok();
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr;  // both set only with ContextOptions::time_device
  cudaEvent_t stop_ = nullptr;
  size_t input_capacity_ = 0;   // candidates a frame may bring
  size_t ranked_capacity_ = 0;  // candidates a frame may rank: min(n, Dmax)
  size_t sort_temp_bytes_ = 0;
  std::unique_ptr<Context> cpu_ = create_cpu_context({});  // exact redo of adversarial frames
  std::unique_ptr<Workspace> ws_;
};

}  // namespace

std::unique_ptr<Context> create_cuda_context(const ContextOptions &options, Status *status) {
  auto context = std::make_unique<CudaContext>();
  *status = context->init(options);
  if (!status->ok()) return nullptr;
  return context;
}

}  // namespace detail

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
