// The CUDA backend. Per frame or batch of frames, on one stream, with one host synchronisation
// at the end; every kernel reads a frame's descriptor (FrameArgs), one frame per blockIdx.z.
// Frames of up to kSmallFrameMax candidates run classify to settle in one kernel
// (small_frames.cu); larger ones run these stages:
//   host      the descriptors and the candidates, copied as they are into one pinned buffer: no
//             per-candidate work
//   H2D       one copy, which also zeroes the frames' counters and brings their counts. Device
//             candidates (a producer's buffers, their count a device word) are read in place:
//             the stream waits on their event, and only the descriptor and zeroed counters go up.
//   classify  rules 1-2 (cudanms/nms.h) on the device: each candidate's sort key is its score
//             (-0.0 made +0.0), or -inf when it is invalid or below the score threshold
//   rank      rule 3: eligible candidates ordered by key, descending, equal keys by index, and the
//             best Dmax gathered into rank order. Up to kCountingRankMax candidates each one's
//             rank is counted in parallel, one launch; larger frames use CUB's radix sort (stable,
//             so equal keys keep index order) and a gather. Device candidates are always
//             counted, a tile of keys at a time: the sort would need their count on the host.
//   pairs     where rank j < i suppresses rank i, greedy appends j to i's predecessor list and
//             matrix counts it: memory O(Dmax * kMaxPredecessors), not Dmax^2. A list that
//             overflows is dropped (the settle kernel tests that rank's overlaps again) and no
//             longer filled. A single frame ranking more than kSpatialPairsMin finds its pairs
//             in spatial order, only between tiles of boxes that can meet (spatial_pairs.h);
//             other frames test every pair in rank order, a block per (8 ranks i, 256 ranks j
//             staged in shared memory), a warp per i, a ballot per 32 j < i.
//   settle    greedy: the unique fixpoint of "i is kept iff no predecessor is kept". A single
//             frame: over the whole GPU in one pass, a thread per rank waiting on its earlier
//             predecessors, warps taken in rank order (dataflow_settle_kernel). A batch: one block
//             per frame, rounds of in-place sweeps (Cluster-NMS on edges, REFERENCE.md), each round
//             also walking the first 32 undecided ranks in rank order, so that any input, even a
//             chain of suppressions, settles in at most Dmax / 32 rounds. Matrix: kept iff no
//             suppressor. Then the kept candidates' indices, in rank order, at most
//             max_detections of them, written into mapped host memory.
//   D2H       device candidates only: the kept values, written by a kernel into mapped memory
// The number of candidates and of ranked ones is known only on the device, so every kernel reads
// them there and launches are sized for the most they can be. That makes a host frame's work
// independent of its count within a power-of-two capacity: frames of up to kGraphMax candidates
// replay one CUDA graph per capacity and method, one submission instead of six.
// Soft and weighted frames past kSmallFrameMax run classify and rank, then their own stages
// (valued_methods.h).
// Only a frame ranking more than kMaxCudaCandidates runs on the CPU, which computes the same.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda/atomic>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/class_groups.h"
#include "common/overlap.h"
#include "common/points.h"
#include "cpu/cpu_nms.h"
#include "cuda_device.h"
#include "cuda_nms.h"
#include "cudanms/device_candidates.h"
#include "frame_args.h"
#include "small_frames.h"
#include "spatial_pairs.h"
#include "valued_methods.h"

#define CUDANMS_TRY(call) CUDANMS_CUDA_TRY(call)

namespace cudanms {
namespace detail {
namespace {

constexpr int kSettleThreads = 1024;
constexpr int kDataflowWarps = 8;  // per block of dataflow_settle_kernel
constexpr int kScanItems = 8;      // ranks per thread per compaction step
constexpr int kClassifyThreads = 256;
constexpr uint32_t kCountingRankMax = 16 * 1024;
constexpr int kCountingWarps = 32;          // each counts over a 32nd of the frame
constexpr int kPairWarps = 8;               // per pair block
constexpr uint32_t kPairRows = kPairWarps;  // ranks i per pair block, one per warp
constexpr uint32_t kPairChunks = 8;         // 32-rank chunks of j per pair block
constexpr uint32_t kPairColumns = kPairChunks * kWarp;
// Up to this many ranked candidates, the settle kernel keeps predecessor counts in shared memory.
constexpr uint32_t kSharedCounts = 16 * 1024;

// The settle kernel keeps one status byte per ranked candidate in shared memory; frames that
// rank more are run on the CPU.
constexpr size_t kMaxCudaCandidates = 128 * 1024;

// Host frames of up to kGraphMax candidates replay a CUDA graph captured for a power-of-two
// capacity of at least kGraphMinCapacity; at most kMaxGraphs are kept, the oldest dropped first.
constexpr uint32_t kGraphMax = kCountingRankMax;
constexpr uint32_t kGraphMinCapacity = 256;
constexpr size_t kMaxGraphs = 16;

enum : uint8_t { kUndecided = 0, kKept = 1, kSuppressed = 2 };

// Warp-aggregated: one atomic per warp and counter.
__device__ void count_in(uint32_t *counter, bool flag) {
  const uint32_t votes = __ballot_sync(kFullMask, flag);
  if (threadIdx.x % kWarp == 0 && votes != 0) atomicAdd(counter, __popc(votes));
}

// n is the capacity; the count is a device word (the staged header's, or the producer's), and
// the slots past it are never read.
__global__ void __launch_bounds__(kClassifyThreads) classify_kernel(const FrameArgs *frames) {
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const float4 *boxes = f.boxes;
  const float *scores = f.scores;
  const uint32_t n = f.capacity;
  const uint32_t *d_count = f.count;
  float *keys = f.keys;
  uint32_t *header = f.header;
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = min(*d_count, n);
  if (p == 0 && d_count != header + kIn) {  // a producer's count: into the header
    header[kIn] = *d_count;
    header[kCountOverflow] = *d_count > n;
  }
  bool valid = false;
  bool below = false;
  float4 box = make_float4(0, 0, 0, 0);
  if (p < count) {
    const float s = scores[p];
    box = boxes[p];
    valid = is_valid(to_box(box), s);
    below = valid && s < f.score_threshold;
    keys[p] = valid && !below ? s + 0.0f : -INFINITY;  // radix sort would put -0.0 below +0.0
  }
  count_in(&header[kInvalid], p < count && !valid);
  count_in(&header[kBelowScore], below);
  count_in(&header[kEligible], valid && !below);
  // The eligible centres' extent (frame_args.h), warp by warp: zero is below every key.
  uint32_t extent[4] = {0, 0, 0, 0};  // least x, least y (inverted), most x, most y
  if (valid && !below) {
    const uint32_t x = ordered_bits(0.5f * box.x + 0.5f * box.z);
    const uint32_t y = ordered_bits(0.5f * box.y + 0.5f * box.w);
    extent[0] = ~x;
    extent[1] = ~y;
    extent[2] = x;
    extent[3] = y;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      extent[k] = max(extent[k], __shfl_xor_sync(kFullMask, extent[k], offset));
    }
  }
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t mine = lane == 0   ? extent[0]
                        : lane == 1 ? extent[1]
                        : lane == 2 ? extent[2]
                                    : extent[3];
  if (lane < 4 && mine != 0) atomicMax(&header[kLeastX + lane], mine);
}

// Puts the candidate `p` of key `key` at rank r (< Dmax), zeroes its predecessor count and makes
// it undecided.
__device__ void place(const FrameArgs &f, uint32_t r, uint32_t p, float key) {
  f.order[r] = p;
  f.rank_scores[r] = key;
  f.rank_boxes[r] = f.boxes[p];
  f.rank_classes[r] = class_of(f, p);
  f.counts[r] = 0;
  f.statuses[r] = kUndecided;
}

// The keys of s_keys[from, to) (a multiple of 4 apart, 16-byte aligned) ranked before `key`,
// `before(other, key)` the order's test over that range: a 16-byte broadcast read for 4 tests, into
// 4 counts, so that no test waits on the one before it.
template <typename Before>
__device__ uint32_t count_before(const float *s_keys, uint32_t from, uint32_t to, float key,
                                 Before before) {
  uint32_t counts[4] = {0, 0, 0, 0};
#pragma unroll 4
  for (uint32_t j = from; j < to; j += 4) {
    const float4 o = *reinterpret_cast<const float4 *>(s_keys + j);
    counts[0] += before(o.x, key);
    counts[1] += before(o.y, key);
    counts[2] += before(o.z, key);
    counts[3] += before(o.w, key);
  }
  return counts[0] + counts[1] + counts[2] + counts[3];
}

// The rank stage in one launch: an eligible candidate's rank is the number of candidates ranked
// before it (ineligible keys are -inf, below every eligible one). Block b ranks the 32
// candidates 32b + lane; its warps count over slices of the keys, staged in shared memory a tile
// of kCountingRankMax at a time. Equal keys rank by index, which only the block's own 32 keys
// need tested: the keys before them rank first when equal, those after them never (one float
// test a key, where testing the index too took 51 us at 10 000 on an H100, against 37 us). Host
// frames take it up to one tile (larger ones are sorted); device candidates always, as only the
// device knows their count: blocks past it leave at once, so the work follows the frame's count,
// not the buffer's capacity.
// Two blocks a multiprocessor where one holds 2 048 threads (sm_80 and sm_90).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ >= 900)
constexpr int kCountingBlocksPerSm = 2;
#else
constexpr int kCountingBlocksPerSm = 1;
#endif
__global__ void __launch_bounds__(kCountingWarps *kWarp, kCountingBlocksPerSm)
    counting_rank_kernel(const FrameArgs *frames) {
  extern __shared__ float4 s_tile[];
  __shared__ uint32_t s_before[kCountingWarps][kWarp];
  float *s_keys = reinterpret_cast<float *>(s_tile);
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const float *keys = f.keys;
  const uint32_t count = min(*f.count, f.capacity);
  const uint32_t base = blockIdx.x * kWarp;
  if (base >= count) return;  // the whole block
  const uint32_t warp = threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t p = base + lane;
  const float key = p < count ? keys[p] : -INFINITY;
  uint32_t before = 0;
  for (uint32_t tile = 0; tile < count; tile += kCountingRankMax) {
    const uint32_t size = min(kCountingRankMax, count - tile);
    const uint32_t padded = (size + 3) / 4 * 4;  // -inf past the count: before no key
    __syncthreads();                             // every warp is done with the previous tile
    for (uint32_t j = threadIdx.x; j < padded; j += blockDim.x) {
      s_keys[j] = j < size ? keys[tile + j] : -INFINITY;
    }
    __syncthreads();
    const uint32_t slice = (padded / 4 + kCountingWarps - 1) / kCountingWarps * 4;
    const uint32_t from = min(padded, warp * slice), to = min(padded, from + slice);
    // The block's own keys within this tile, clamped to the warp's slice.
    const auto clamp_to = [](int64_t v, uint32_t lo, uint32_t hi) {
      return static_cast<uint32_t>(min(max(v, int64_t{lo}), int64_t{hi}));
    };
    const int64_t own = int64_t{base} - tile;
    const uint32_t own_from = clamp_to(own, from, to);
    const uint32_t own_to = clamp_to(own + kWarp, own_from, to);
    before += count_before(s_keys, from, own_from, key,
                           [](float other, float k) -> uint32_t { return other >= k; });
    for (uint32_t j = own_from; j < own_to; ++j) {
      const float other = s_keys[j];
      before += other > key || (other == key && tile + j < p);
    }
    before += count_before(s_keys, own_to, to, key,
                           [](float other, float k) -> uint32_t { return other > k; });
  }
  s_before[warp][lane] = before;
  __syncthreads();
  if (warp == 0 && key != -INFINITY) {
    uint32_t r = 0;
    for (int w = 0; w < kCountingWarps; ++w) r += s_before[w][lane];
    if (r < f.dmax) place(f, r, p, key);
  }
}

// After CUB's sort of one frame's keys: the best ranks gathered, in place over `order`.
__global__ void gather_kernel(const FrameArgs *frame, const float *sorted_keys) {
  const FrameArgs f = *frame;
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < ranked_count(f.header, f.dmax)) place(f, r, f.order[r], sorted_keys[r]);
}

// Block (x, y) tests the kPairRows ranks i from kPairRows * x against the ranks j < i of
// [256y, 256y + 256), which it stages in shared memory once for all its rows: warp w takes
// one row (four made small frames slower, their latencies adding up), lane l the ranks
// j = 256y + 32c + l, and a ballot gathers each 32-rank chunk's verdicts. Blocks
// run roughly in order of x first, so a rank's first columns are tested before its later ones:
// where those already settle it (a matrix suppressor, an overflowing greedy list), the rest skip
// it, and piles of duplicates cost O(N), not O(N^2).
template <Method kMethod>
__global__ void __launch_bounds__(kPairWarps *kWarp) pairs_kernel(const FrameArgs *frames) {
  __shared__ float4 s_boxes[kPairColumns];
  __shared__ float s_scores[kPairColumns];
  __shared__ int32_t s_classes[kPairColumns];
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t first_row = blockIdx.x * kPairRows;
  const uint32_t first_j = blockIdx.y * kPairColumns;
  if (first_row >= m || first_j + 1 >= min(first_row + kPairRows, m)) return;  // no j < i here
  for (uint32_t t = threadIdx.x; t < kPairColumns; t += blockDim.x) {
    const uint32_t j = first_j + t;
    if (j >= m) break;
    s_boxes[t] = f.rank_boxes[j];
    s_classes[t] = f.rank_classes[j];
    if (kMethod == Method::kMatrix) s_scores[t] = f.rank_scores[j];
  }
  __syncthreads();

  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t below_lane = (1u << lane) - 1;
  // A count past this settles the rank: other blocks add to it meanwhile, and an early or late
  // read only costs work.
  const uint32_t settled_by = kMethod == Method::kGreedy ? kMaxPredecessors : 0;
  const uint32_t i = first_row + threadIdx.x / kWarp;  // the whole warp's
  if (i >= m || first_j >= i) return;
  if (cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(f.counts[i])
          .load(cuda::memory_order_relaxed) > settled_by) {
    return;
  }
  const Box b = to_box(f.rank_boxes[i]);
  const float score_b = f.rank_scores[i];
  const int32_t class_b = f.rank_classes[i];
  const uint32_t chunks = min(kPairChunks, (i - first_j + kWarp - 1) / kWarp);
  uint32_t bits[kPairChunks];
  uint32_t total = 0;
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    const uint32_t t = c * kWarp + lane;
    bool suppresses = false;
    if (c < chunks && first_j + t < i && s_classes[t] == class_b) {
      const Box a = to_box(s_boxes[t]);
      suppresses = kMethod == Method::kGreedy
                       ? greedy_suppresses(f.overlap, f.threshold, a, b)
                       : matrix_suppresses(f.overlap, f.threshold, a, s_scores[t], b, score_b);
    }
    bits[c] = __ballot_sync(kFullMask, suppresses);
    total += __popc(bits[c]);
  }
  if (total == 0) return;
  if (kMethod == Method::kMatrix) {
    if (lane == 0) atomicAdd(&f.counts[i], 1u);  // one suppressor settles it
    return;
  }
  // One atomic per row reserves the slots of all its chunks.
  uint32_t slot = 0;
  if (lane == 0) slot = atomicAdd(&f.counts[i], total);
  slot = __shfl_sync(kFullMask, slot, 0);
  uint32_t *row = f.predecessors + size_t{i} * kMaxPredecessors;
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    const uint32_t mine = slot + __popc(bits[c] & below_lane);
    if ((bits[c] >> lane) & 1u && mine < kMaxPredecessors) row[mine] = first_j + c * kWarp + lane;
    slot += __popc(bits[c]);
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

// What the settle kernel needs to test a rank's overlaps again, for ranks whose predecessor list
// overflowed.
struct Ranked {
  const float4 *boxes;
  const int32_t *classes;
  Overlap overlap;
  float threshold;
};

__device__ bool suppresses_rank(const Ranked &r, uint32_t j, const Box &b, int32_t class_b) {
  return r.classes[j] == class_b &&
         greedy_suppresses(r.overlap, r.threshold, to_box(r.boxes[j]), b);
}

// Calls visit(j, status of j) for each predecessor j of rank i, n of them, until visit returns
// false: from its list, or, when the list overflowed, by testing every rank before i, in rank
// order.
template <typename StatusOf, typename Visit>
__device__ void for_each_predecessor(uint32_t i, uint32_t n, const uint32_t *predecessors,
                                     const Ranked &ranked, StatusOf status_of, Visit visit) {
  if (n > kMaxPredecessors) {
    const Box b = to_box(ranked.boxes[i]);
    const int32_t class_b = ranked.classes[i];
    for (uint32_t j = 0; j < i; ++j) {
      if (suppresses_rank(ranked, j, b, class_b) && !visit(j, status_of(j))) return;
    }
    return;
  }
  // Rows are 2 KiB aligned: eight predecessors at a time, their statuses all loaded before any
  // is looked at, so that a list costs one wait for memory per eight, not one per predecessor.
  constexpr uint32_t kBatch = 8;
  const uint4 *row4 = reinterpret_cast<const uint4 *>(predecessors + size_t{i} * kMaxPredecessors);
  for (uint32_t k = 0; k < n; k += kBatch) {
    const uint4 first = __ldg(&row4[k / 4]);
    const uint4 second = k + 4 < n ? __ldg(&row4[k / 4 + 1]) : make_uint4(0, 0, 0, 0);
    const uint32_t p[kBatch] = {first.x,  first.y,  first.z,  first.w,
                                second.x, second.y, second.z, second.w};
    uint8_t status[kBatch];
#pragma unroll
    for (uint32_t q = 0; q < kBatch; ++q) {
      status[q] = k + q < n ? status_of(p[q]) : kSuppressed;
    }
#pragma unroll
    for (uint32_t q = 0; q < kBatch; ++q) {
      if (k + q >= n || !visit(p[q], status[q])) return;
    }
  }
}

// A greedy rank's status from its predecessors': suppressed by a kept one, kept when all are
// suppressed, else undecided.
template <typename StatusOf>
__device__ uint8_t greedy_verdict(uint32_t i, uint32_t n, const uint32_t *predecessors,
                                  const Ranked &ranked, StatusOf status_of) {
  // A list is read to its end for a kept predecessor; a test of every rank before i stops at
  // the first undecided one too, as a later sweep will settle it more cheaply.
  const bool stop_at_undecided = n > kMaxPredecessors;
  uint8_t verdict = kKept;
  for_each_predecessor(i, n, predecessors, ranked, status_of, [&](uint32_t, uint8_t s) {
    if (s == kKept) verdict = kSuppressed;
    if (s == kUndecided) verdict = kUndecided;
    return verdict == kKept || (verdict == kUndecided && !stop_at_undecided);
  });
  return verdict;
}

// Decides ranks [t, t + 32) when every rank before t is decided: the greedy rule walked in rank
// order, by one warp. Lane l finds whether a kept rank before t suppresses rank t + l, and which
// ranks of the block do; then ballots decide the block's ranks in order.
__device__ void decide_frontier(uint32_t t, uint32_t m, uint32_t lane, const uint32_t *predecessors,
                                const Ranked &ranked, uint32_t n, uint32_t *statuses) {
  const uint32_t i = t + lane;
  const uint8_t status = i < m ? load_status(statuses, i) : kSuppressed;
  bool kept_before = false;
  uint32_t within = 0;  // bit k: rank t + k suppresses rank i
  if (status == kUndecided) {
    const auto status_of = [statuses](uint32_t j) { return load_status(statuses, j); };
    for_each_predecessor(i, n, predecessors, ranked, status_of, [&](uint32_t j, uint8_t s) {
      if (j >= t) {
        within |= 1u << (j - t);
      } else if (s == kKept) {
        kept_before = true;
      }
      return !kept_before;
    });
  }
  uint32_t kept = __ballot_sync(kFullMask, status == kKept);
  for (uint32_t open = __ballot_sync(kFullMask, status == kUndecided); open != 0;
       open &= open - 1) {
    const int k = __ffs(open) - 1;
    if (__shfl_sync(kFullMask, !kept_before && (within & kept) == 0, k)) kept |= 1u << k;
  }
  if (status == kUndecided) settle_status(statuses, i, (kept >> lane) & 1u ? kKept : kSuppressed);
}

// The exclusive prefix sum of value(i) over i < m, by the whole block: into(i, sum) for each i,
// and the total returned to every thread.
using SettleScan = cub::BlockScan<uint32_t, kSettleThreads>;
template <typename Value, typename Into>
__device__ uint32_t block_prefix_sum(uint32_t m, SettleScan::TempStorage &storage, Value value,
                                     Into into) {
  uint32_t base = 0;
  for (uint32_t start = 0; start < m; start += kSettleThreads * kScanItems) {
    uint32_t items[kScanItems];
    const uint32_t first = start + threadIdx.x * kScanItems;
    for (int k = 0; k < kScanItems; ++k) items[k] = first + k < m ? value(first + k) : 0u;
    uint32_t total = 0;
    SettleScan(storage).ExclusiveSum(items, items, total);
    for (int k = 0; k < kScanItems; ++k) {
      if (first + k < m) into(first + k, base + items[k]);
    }
    base += total;
    __syncthreads();  // the storage is reused
  }
  return base;
}

// The output of a frame whose m ranks are decided, by the whole block: the staged counters, the
// kept count and the indices of the kept candidates in rank order, at most `limit` of them.
// Consecutive threads write consecutive slots: the output is in mapped host memory, where a
// thread writing several slots in turn costs a transaction each (measured: 15 -> 34 us at 10k).
__device__ void copy_counters(const FrameArgs &f) {
  if (threadIdx.x < kHeaderWords && threadIdx.x != kKeptCount) {
    f.out[threadIdx.x] = f.header[threadIdx.x];
  }
}
__device__ void write_kept(const FrameArgs &f, uint32_t slot, uint32_t rank) {
  if (slot >= f.limit) return;
  f.out[kHeaderWords + slot] = f.order[rank];
  if (f.kept_ranks) f.kept_ranks[slot] = rank;
}
__device__ void write_kept_count(const FrameArgs &f, uint32_t kept) {
  if (threadIdx.x == 0) f.out[kKeptCount] = f.header[kKeptCount] = min(kept, f.limit);
}
template <typename IsKept>
__device__ void write_output(const FrameArgs &f, uint32_t m, SettleScan::TempStorage &scan,
                             IsKept is_kept) {
  copy_counters(f);
  const uint32_t kept = block_prefix_sum(
      m, scan, [&](uint32_t i) { return is_kept(i) ? 1u : 0u; },
      [&](uint32_t i, uint32_t slot) {
        if (is_kept(i)) write_kept(f, slot, i);
      });
  write_kept_count(f, kept);
}

// One block per frame settles it in shared memory, then writes its output.
template <Method kMethod>
__global__ void __launch_bounds__(kSettleThreads) settle_kernel(const FrameArgs *frames) {
  const FrameArgs f = frames[blockIdx.x];  // a copy: the stores below cannot alias it
  const uint32_t *header = f.header;
  const uint32_t *counts = f.counts;
  const uint32_t *predecessors = f.predecessors;
  const Ranked ranked{f.rank_boxes, f.rank_classes, f.overlap, f.threshold};
  extern __shared__ uint32_t s_dynamic[];
  __shared__ uint32_t s_frontier[3];  // per round: read, lowered, reset (rounds overlap)
  __shared__ SettleScan::TempStorage s_scan;
  const uint32_t m = ranked_count(header, f.dmax);
  uint32_t *statuses = s_dynamic;                                  // during the sweeps
  uint8_t *status_bytes = reinterpret_cast<uint8_t *>(s_dynamic);  // before and after them
  uint16_t *s_counts = reinterpret_cast<uint16_t *>(status_bytes + settle_counts_offset(m));
  const bool shared_counts = m <= kSharedCounts;
  const uint32_t tid = threadIdx.x;
  if (tid < 3) s_frontier[tid] = tid == 0 ? 0 : m;

  for (uint32_t i = tid; i < m; i += kSettleThreads) {
    const uint32_t n = counts[i];
    status_bytes[i] = n == 0 ? kKept : (kMethod == Method::kGreedy ? kUndecided : kSuppressed);
    if (shared_counts) s_counts[i] = static_cast<uint16_t>(min(n, 0xffffu));
  }
  __syncthreads();
  auto count_of = [&](uint32_t i) { return shared_counts ? s_counts[i] : counts[i]; };
  const auto status_of = [statuses](uint32_t j) { return load_status(statuses, j); };

  // Each round, warp 0 decides the 32 ranks from the first undecided one (the frontier), while
  // the other warps sweep the undecided ranks past them. A rank is settled only from final
  // statuses, so a sweep may see its neighbours' updates of the same round or not (load_status).
  for (uint32_t round = 0; kMethod == Method::kGreedy; ++round) {
    const uint32_t frontier = s_frontier[round % 3];
    if (frontier >= m) break;
    if (tid == 0) s_frontier[(round + 2) % 3] = m;
    if (tid < kWarp) {
      const uint32_t i = frontier + tid;
      decide_frontier(frontier, m, tid, predecessors, ranked, i < m ? count_of(i) : 0, statuses);
    }
    uint32_t first_undecided = m;
    for (uint32_t i = frontier + tid; tid >= kWarp && i < m; i += kSettleThreads - kWarp) {
      if (load_status(statuses, i) != kUndecided) continue;
      const uint8_t verdict = greedy_verdict(i, count_of(i), predecessors, ranked, status_of);
      if (verdict == kUndecided) {
        first_undecided = min(first_undecided, i);
      } else {
        settle_status(statuses, i, verdict);
      }
    }
    if (first_undecided < m) atomicMin_block(&s_frontier[(round + 1) % 3], first_undecided);
    __syncthreads();
  }

  write_output(f, m, s_scan, [&](uint32_t i) { return status_bytes[i] == kKept; });
}

// Greedy's settle of a single frame over the whole GPU, in one pass: a thread per rank, in warps
// of 32 ranks taken in rank order from a ticket counter, so that a thread waits only on ranks of
// warps already running (whatever the GPU schedules; lanes of one warp wait on one another under
// independent thread scheduling). Rank i reads its predecessors' statuses: one kept suppresses
// it, all suppressed keep it, else it reads them again. It publishes its own status at once, so
// waits follow chains of suppression, not the order of the words; most ranks are settled by the
// first kept rank of their cluster. A rank whose list overflowed tests the ranks before it in
// rank order and waits on the first undecided suppressor.
__global__ void __launch_bounds__(kDataflowWarps *kWarp)
    dataflow_settle_kernel(const FrameArgs *frame) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t lane = threadIdx.x % kWarp;
  uint32_t ticket = 0;
  if (lane == 0) ticket = atomicAdd(&f.header[kSettleTickets], 1u);
  const uint32_t word = __shfl_sync(kFullMask, ticket, 0);
  const uint32_t i = word * kWarp + lane;
  if (word * kWarp >= m) return;  // the whole warp
  const Ranked ranked{f.rank_boxes, f.rank_classes, f.overlap, f.threshold};
  const auto status_of = [&f](uint32_t j) {
    return static_cast<uint8_t>(cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(f.statuses[j])
                                    .load(cuda::memory_order_relaxed));
  };
  uint8_t verdict = kSuppressed;  // past m: not kept
  if (i < m) {
    const uint32_t n = f.counts[i];
    verdict = greedy_verdict(i, n, f.predecessors, ranked, status_of);
    while (verdict == kUndecided) {
      __nanosleep(32);
      verdict = greedy_verdict(i, n, f.predecessors, ranked, status_of);
    }
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(f.statuses[i])
        .store(verdict, cuda::memory_order_relaxed);
  }
  const uint32_t kept = __ballot_sync(kFullMask, verdict == kKept);
  if (lane == 0) f.kept_words[word] = kept;
}

// The output of a single frame after dataflow_settle_kernel, from its words of kept ranks. Block
// b writes the kept ranks among [1024b, 1024b + 1024), a thread each, after summing the words
// before them itself: no pass between blocks, and no thread walks the ranks in turn (one block
// doing so took 49 us at 100 000 candidates, a global read's latency per 1 024 ranks).
__global__ void __launch_bounds__(kSettleThreads) output_kernel(const FrameArgs *frame) {
  constexpr uint32_t kWords = kSettleThreads / kWarp;  // the block's words of ranks
  __shared__ uint32_t s_sums[kWords][2];               // per warp: kept before the block, in all
  __shared__ uint32_t s_first_slot[kWords];            // per word of the block
  const FrameArgs f = *frame;                          // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t words = (m + kWarp - 1) / kWarp;
  const uint32_t first_word = blockIdx.x * kWords;
  if (first_word >= words && blockIdx.x > 0) return;  // launched for the most ranks there can be
  const uint32_t warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  uint32_t before = 0, total = 0;
  for (uint32_t w = threadIdx.x; w < words; w += kSettleThreads) {
    const uint32_t kept = __popc(f.kept_words[w]);
    total += kept;
    if (w < first_word) before += kept;
  }
  before = warp_sum(before);
  total = warp_sum(total);
  if (lane == 0) {
    s_sums[warp][0] = before;
    s_sums[warp][1] = total;
  }
  __syncthreads();
  if (warp == 0) {  // the slot of each of the block's words: the sums, then a scan of its words
    before = warp_sum(s_sums[lane][0]);
    total = warp_sum(s_sums[lane][1]);
    const uint32_t w = first_word + lane;
    const uint32_t here = w < words ? __popc(f.kept_words[w]) : 0;
    s_first_slot[lane] = before + warp_inclusive_sum(here, lane) - here;
    if (blockIdx.x == 0) write_kept_count(f, total);
  }
  if (blockIdx.x == 0) copy_counters(f);
  __syncthreads();
  const uint32_t i = first_word * kWarp + threadIdx.x;
  if (i < m) {
    const uint32_t bits = f.kept_words[i / kWarp], bit = i % kWarp;
    if ((bits >> bit) & 1u) write_kept(f, s_first_slot[warp] + __popc(bits & ((1u << bit) - 1)), i);
  }
}

// Device candidates: the kept ones' values, straight into mapped host memory.
__global__ void kept_values_kernel(const uint32_t *out, const float4 *boxes, const float *scores,
                                   const int32_t *classes, float4 *kept_boxes, float *kept_scores,
                                   int32_t *kept_classes) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= out[kKeptCount]) return;
  const uint32_t p = out[kHeaderWords + k];
  kept_boxes[k] = boxes[p];
  kept_scores[k] = scores[p];
  kept_classes[k] = classes ? classes[p] : 0;
}

__global__ void iota_kernel(uint32_t *values, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

constexpr size_t round16(size_t bytes) { return (bytes + 15) & ~size_t{15}; }

// A frame staged in pinned memory for the copy to the device: its counters (the count among
// them), then room for `capacity` boxes, scores and, when it is per-class, class ids. Every part
// starts 16-byte aligned.
struct StagedLayout {
  explicit StagedLayout(size_t capacity, bool with_classes)
      : boxes(kHeaderWords * sizeof(uint32_t)),
        scores(boxes + capacity * sizeof(float4)),
        classes(scores + round16(capacity * sizeof(float))),
        bytes(classes + (with_classes ? round16(capacity * sizeof(int32_t)) : 0)) {}
  size_t boxes, scores, classes, bytes;
};

// Frame descriptors at the head of the staged buffer, the frames after them.
size_t args_bytes(size_t frames) { return round16(frames * sizeof(FrameArgs)); }

// The capacity a host frame of n candidates is staged in: n past kGraphMax, else n rounded up to
// an eighth of the power of two above it (at least kGraphMinCapacity), so that four graphs serve
// each doubling of the count and the copy carries at most a quarter more than the candidates.
uint32_t staged_capacity(uint32_t n) {
  if (n > kGraphMax) return n;
  if (n <= kGraphMinCapacity) return kGraphMinCapacity;
  uint32_t power = kGraphMinCapacity;
  while (power < n) power *= 2;
  const uint32_t step = power / 8;
  return (n + step - 1) / step * step;
}

// What a captured graph's launches depend on: the parameters travel in the frame's descriptor.
struct GraphKey {
  uint32_t capacity, most;
  bool with_classes;
  Method method;
  bool operator==(const GraphKey &o) const {
    return std::tie(capacity, most, with_classes, method) ==
           std::tie(o.capacity, o.most, o.with_classes, o.method);
  }
};

// A single frame ranking more than this many candidates finds its pairs in spatial order, where
// the bins, the tiles and their list cost less than testing every pair, which grows as N².
// Measured on an H100 (cudanms-tool bench, p50, both thresholds in turn twice): 4 000 candidates
// 76 us in rank order against 80 us in spatial order, 5 000 96 against 89 us, 6 000 113 against
// 96 us. (With CUB's sort in place of the bins the crossover was about 6 144.)
constexpr uint32_t kSpatialPairsMin = 4096;
// `frames` counts the frames of one method in a launch sequence: a batch's only greedy frame, or
// its only matrix frame, runs on its own, so a workspace ranking more than kSpatialPairsMin has
// the spatial buffers whatever the batch.
bool spatial_pairs(size_t frames, size_t most) { return frames == 1 && most > kSpatialPairsMin; }

// Frames in one launch sequence at most; larger batches go in turn.
constexpr size_t kMaxBatch = 1024;

class CudaContext final : public Context {
 public:
  CudaContext() = default;
  ~CudaContext() override {
    DeviceBinding::Scope scope(binding_.context());
    drop_graphs();
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
    // Past the default 48 KiB, shared memory must be asked for: the counting rank stages up to
    // 64 KiB of keys, the settle kernel up to a status byte for each of kMaxCudaCandidates.
    CUDANMS_TRY(cudaFuncSetAttribute(counting_rank_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kCountingRankMax * sizeof(float))));
    // Room for two counting blocks a multiprocessor, keys included: Nsight Compute found one
    // resident (57 registers a thread, 64 KB of shared memory configured); asking for two and
    // the largest shared memory took the kernel from 39 to 36 us at 10 000 candidates.
    CUDANMS_TRY(cudaFuncSetAttribute(counting_rank_kernel,
                                     cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
    const auto settle_bytes =
        static_cast<int>(std::max(settle_shared_bytes(kSharedCounts),
                                  settle_shared_bytes(static_cast<uint32_t>(kMaxCudaCandidates))));
    CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kGreedy>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, settle_bytes));
    CUDANMS_TRY(cudaFuncSetAttribute(settle_kernel<Method::kMatrix>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, settle_bytes));
    CUDANMS_TRY(prepare_small_frames());
    int device = 0;
    CUDANMS_TRY(cudaGetDevice(&device));
    CUDANMS_TRY(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    const auto reserved =
        static_cast<uint32_t>(std::min(options.reserve_candidates, kMaxCudaCandidates));
    return reserve(1, reserved, reserved,
                   args_bytes(1) + StagedLayout(staged_capacity(reserved), true).bytes);
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return binding_.name(); }
  void *cuda_context() const override { return binding_.context(); }

 private:
  // The workspace, freed inside the context's scope. Frame b of a batch of frames staged with
  // capacity C and ranking at most M candidates has slots [bC, bC + C) of the keys and the order,
  // [bM, bM + M) of the rank arrays and the counts, and M predecessor rows from row bM.
  struct Workspace {
    MappedArray<unsigned char> h_stage;  // descriptors, then the frames (StagedLayout)
    MappedArray<uint32_t> h_out;         // per frame: counters, then kept indices
    MappedArray<float4> h_kept_boxes;    // device candidates: the kept values
    MappedArray<float> h_kept_scores;
    MappedArray<int32_t> h_kept_classes;
    DeviceArray<unsigned char> d_stage;
    DeviceArray<float> d_keys;
    DeviceArray<uint32_t> d_order;
    DeviceArray<float> d_rank_scores;
    DeviceArray<float4> d_rank_boxes;
    DeviceArray<int32_t> d_rank_classes;
    DeviceArray<uint32_t> d_counts;
    DeviceArray<uint32_t> d_statuses;
    DeviceArray<uint32_t> d_kept_words;
    DeviceArray<uint32_t> d_predecessors;
    DeviceArray<uint32_t> d_kept_ranks;  // weighted: per rank
    DeviceArray<uint32_t> d_clusters;    // weighted: per rank
    DeviceArray<uint32_t> d_out;         // device candidates: the output, read by kept_values
    DeviceArray<float> d_sorted_keys;    // a frame past kCountingRankMax: CUB's sort
    DeviceArray<uint32_t> d_iota;
    DeviceArray<unsigned char> d_sort_temp;
    // A single frame's pairs in spatial order (spatial_pairs.h).
    DeviceArray<uint32_t> d_spatial_bins;  // per rank: its bin, then its place there
    DeviceArray<uint32_t> d_bin_counts;    // counts, then starts
    DeviceArray<uint32_t> d_spatial_ranks;
    DeviceArray<float4> d_spatial_boxes;
    DeviceArray<int32_t> d_spatial_classes;
    DeviceArray<float4> d_tile_bounds;
    DeviceArray<float2> d_tile_areas;
    DeviceArray<uint32_t> d_meetings;
  };

  // Soft and weighted frames: one at a time (never batched), their kept values written by their
  // kernels.
  static bool changes_values(Method method) {
    return method == Method::kSoft || method == Method::kWeighted;
  }

  // Words of 32 ranks.
  static size_t words_of(size_t ranks) { return (ranks + kWarp - 1) / kWarp; }

  static uint32_t kept_limit(const Params &params, uint32_t most) {
    return params.max_detections == 0 || params.max_detections > most
               ? most
               : static_cast<uint32_t>(params.max_detections);
  }
  static uint32_t most_ranked(uint32_t capacity, const Params &params) {
    return static_cast<uint32_t>(std::min<size_t>(capacity, params.max_candidates));
  }

  // Frame b's descriptor, but for its candidates, count, counters and output: its parameters
  // and its slices of the workspace, in a batch staged with capacity C ranking at most M.
  FrameArgs workspace_args(size_t b, uint32_t C, uint32_t M, const Params &params,
                           uint32_t capacity) const {
    const Workspace &w = *ws_;
    FrameArgs f{};
    f.keys = w.d_keys.get() + b * C;
    f.order = w.d_order.get() + b * C;
    f.rank_boxes = w.d_rank_boxes.get() + b * M;
    f.rank_scores = w.d_rank_scores.get() + b * M;
    f.rank_classes = w.d_rank_classes.get() + b * M;
    f.counts = w.d_counts.get() + b * M;
    f.statuses = w.d_statuses.get() + b * M;
    f.kept_words = w.d_kept_words.get() + b * words_of(M);
    f.predecessors = w.d_predecessors.get() + b * M * kMaxPredecessors;
    f.capacity = capacity;
    f.dmax = static_cast<uint32_t>(std::min<size_t>(params.max_candidates, UINT32_MAX));
    f.limit = kept_limit(params, most_ranked(capacity, params));
    f.score_threshold = params.score_threshold;
    f.threshold = params.threshold;
    f.overlap = params.overlap;
    f.soft_decay = params.soft_decay;
    f.sigma = params.sigma;
    f.class_agnostic = params.class_agnostic;
    if (params.method == Method::kWeighted) {
      f.kept_ranks = w.d_kept_ranks.get() + b * M;
      f.clusters = w.d_clusters.get() + b * M;
    }
    if (changes_values(params.method)) {
      f.kept_boxes = w.h_kept_boxes.device();
      f.kept_scores = w.h_kept_scores.device();
      f.kept_classes = w.h_kept_classes.device();
    }
    return f;
  }

  // Copies host candidates into the staged frame at `h` (the device's copy at `d`) and points
  // the descriptor at them.
  static void stage(const CandidatesView &c, bool with_classes, const StagedLayout &layout,
                    unsigned char *h, unsigned char *d, FrameArgs *f) {
    const auto n = static_cast<uint32_t>(c.count);
    std::memset(h, 0, layout.boxes);
    reinterpret_cast<uint32_t *>(h)[kIn] = n;
    std::memcpy(h + layout.boxes, c.boxes, n * sizeof(float4));
    std::memcpy(h + layout.scores, c.scores, n * sizeof(float));
    if (with_classes) std::memcpy(h + layout.classes, c.class_ids, n * sizeof(int32_t));
    f->boxes = reinterpret_cast<const float4 *>(d + layout.boxes);
    f->scores = reinterpret_cast<const float *>(d + layout.scores);
    f->classes = with_classes ? reinterpret_cast<const int32_t *>(d + layout.classes) : nullptr;
    f->header = reinterpret_cast<uint32_t *>(d);
    f->count = f->header + kIn;
  }

  Status run_checked(const CandidatesView &c, const Params &params, Result *result) override {
    const auto n = static_cast<uint32_t>(c.count);
    result->counts.in = n;
    result->computed_on = Backend::kCuda;
    if (n == 0) return Status::Ok();
    const uint32_t capacity = staged_capacity(n);
    // Launches are sized for the most candidates NMS may process; the device knows how many.
    const uint32_t most = most_ranked(capacity, params);
    // The settle kernel's statuses would not fit in shared memory: the CPU computes the same.
    if (most > kMaxCudaCandidates) return cpu_->run(c, params, result);
    CUDANMS_ENTER(binding_);
    const bool classes = with_classes(c, params);
    const StagedLayout layout(capacity, classes);
    const size_t staged = args_bytes(1) + layout.bytes;
    Status status = reserve(1, capacity, most, staged);
    if (!status.ok()) return status;

    unsigned char *h = ws_->h_stage.get();
    unsigned char *d = ws_->d_stage.get();
    FrameArgs f = workspace_args(0, capacity, most, params, capacity);
    stage(c, classes, layout, h + args_bytes(1), d + args_bytes(1), &f);
    f.out = ws_->h_out.device();
    std::memcpy(h, &f, sizeof f);
    const auto *frames = reinterpret_cast<const FrameArgs *>(d);
    const uint32_t greedy = params.method == Method::kGreedy ? 1 : 0;
    const bool sort = capacity > kCountingRankMax;
    auto submit = [&]() -> Status {
      CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
      return changes_values(params.method)
                 ? launch_valued(frames, params.method, capacity, most, sort)
                 : launch(frames, 1, greedy, capacity, most, sort);
    };
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    status = capacity <= kGraphMax
                 ? replay(GraphKey{capacity, most, classes, params.method}, submit)
                 : submit();
    if (status.ok()) status = finish(result);
    if (!status.ok()) return status;
    read_result(params, ws_->h_out.get(), result);
    if (changes_values(params.method)) read_kept_values(result);
    if (params.method == Method::kWeighted && c.points_per_candidate > 0) {
      return merge_weighted_points(c, f, result);
    }
    return Status::Ok();
  }

  // kWeighted's points, merged on the host like the CPU backend's: the rank order and the
  // claims kernel's clusters come back for it, only for frames with points.
  Status merge_weighted_points(const CandidatesView &c, const FrameArgs &f, Result *result) {
    const size_t ranked = std::min(ws_->h_out.get()[kEligible], f.dmax);
    rank_order_.resize(ranked);
    claims_.resize(ranked);
    if (ranked > 0) {
      CUDANMS_TRY(cudaMemcpyAsync(rank_order_.data(), f.order, ranked * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, stream_));
      CUDANMS_TRY(cudaMemcpyAsync(claims_.data(), f.clusters, ranked * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, stream_));
      CUDANMS_TRY(cudaStreamSynchronize(stream_));
    }
    merged_points(c, result->kept, rank_order_.data(), claims_.data(), ranked,
                  &result->kept_points);
    return Status::Ok();
  }

  // The kept values the kernels wrote into mapped memory, for result->counts.kept candidates.
  void read_kept_values(Result *result) const {
    const Workspace &w = *ws_;
    const size_t kept = result->counts.kept;
    const float *boxes = reinterpret_cast<const float *>(w.h_kept_boxes.get());
    result->kept_boxes.assign(boxes, boxes + 4 * kept);
    result->kept_scores.assign(w.h_kept_scores.get(), w.h_kept_scores.get() + kept);
    result->kept_class_ids.assign(w.h_kept_classes.get(), w.h_kept_classes.get() + kept);
  }

  // Frames of up to kGraphMax candidates share launch sequences, kMaxBatch at a time, greedy
  // frames first; a larger frame, and a soft or weighted one, runs on its own.
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    std::vector<size_t> batch;
    for (size_t k = 0; k < frames.size(); ++k) {
      if (frames[k].candidates.count == 0 || frames[k].candidates.count > kGraphMax ||
          changes_values(frames[k].params.method)) {
        const Status status = run_checked(frames[k].candidates, frames[k].params, &(*results)[k]);
        if (!status.ok()) return status;
      } else {
        batch.push_back(k);
      }
    }
    std::stable_partition(batch.begin(), batch.end(), [&frames](size_t k) {
      return frames[k].params.method == Method::kGreedy;
    });
    for (size_t first = 0; first < batch.size(); first += kMaxBatch) {
      const Status status = run_batch_part(frames, batch.data() + first,
                                           std::min(kMaxBatch, batch.size() - first), results);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }

  // The `count` frames whose indices start at `part` (greedy ones first) in one launch sequence
  // and one synchronisation.
  Status run_batch_part(const std::vector<Frame> &frames, const size_t *part, size_t count,
                        std::vector<Result> *results) {
    CUDANMS_ENTER(binding_);
    uint32_t C = 0, M = 0, greedy = 0;
    size_t staged = args_bytes(count);
    for (size_t b = 0; b < count; ++b) {
      const Frame &frame = frames[part[b]];
      const auto n = static_cast<uint32_t>(frame.candidates.count);
      C = std::max(C, n);
      M = std::max(M, most_ranked(n, frame.params));
      greedy += frame.params.method == Method::kGreedy;
      staged += StagedLayout(n, with_classes(frame)).bytes;
    }
    Status status = reserve(count, C, M, staged);
    if (!status.ok()) return status;

    unsigned char *h = ws_->h_stage.get();
    unsigned char *d = ws_->d_stage.get();
    size_t offset = args_bytes(count);
    for (size_t b = 0; b < count; ++b) {
      const Frame &frame = frames[part[b]];
      const auto n = static_cast<uint32_t>(frame.candidates.count);
      const StagedLayout layout(n, with_classes(frame));
      FrameArgs f = workspace_args(b, C, M, frame.params, n);
      stage(frame.candidates, with_classes(frame), layout, h + offset, d + offset, &f);
      f.out = ws_->h_out.device() + b * (kHeaderWords + M);
      std::memcpy(h + b * sizeof(FrameArgs), &f, sizeof f);
      offset += layout.bytes;
      Result &result = (*results)[part[b]];
      result.counts.in = n;
      result.computed_on = Backend::kCuda;
    }
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
    status = launch(reinterpret_cast<const FrameArgs *>(d), static_cast<uint32_t>(count), greedy, C,
                    M, false);
    if (status.ok()) status = finish(&(*results)[part[0]]);
    if (!status.ok()) return status;
    for (size_t b = 0; b < count; ++b) {
      read_result(frames[part[b]].params, ws_->h_out.get() + b * (kHeaderWords + M),
                  &(*results)[part[b]]);
    }
    return Status::Ok();
  }

  // Whether the frame's class ids are staged: per-class NMS on candidates that have them.
  static bool with_classes(const CandidatesView &c, const Params &params) {
    return !params.class_agnostic && c.class_ids != nullptr;
  }
  static bool with_classes(const Frame &frame) {
    return with_classes(frame.candidates, frame.params);
  }

  Status run_device_checked(const DeviceCandidatesView &c, const Params &params,
                            Result *result) override {
    if (c.context != binding_.context()) {
      return Status::Error("the device candidates live in another CUDA context than " +
                           binding_.name() + "'s NMS; download them first");
    }
    result->computed_on = Backend::kCuda;
    if (c.capacity == 0) return Status::Ok();
    const auto n = static_cast<uint32_t>(c.capacity);
    const uint32_t most = most_ranked(n, params);
    if (most > kMaxCudaCandidates) return run_downloaded(c, params, result);
    CUDANMS_ENTER(binding_);
    // Class groups: their table goes up with the descriptor, after the header.
    const ClassGroupTable groups = groups_classes(params) && c.class_ids != nullptr
                                       ? class_group_table(params.class_groups)
                                       : ClassGroupTable();
    const size_t table_offset = args_bytes(1) + kHeaderWords * sizeof(uint32_t);
    const size_t staged = table_offset + groups.size() * sizeof(int2);
    Status status = reserve(1, n, most, staged);
    if (!status.ok()) return status;

    Workspace &w = *ws_;
    unsigned char *h = w.h_stage.get();
    unsigned char *d = w.d_stage.get();
    FrameArgs f = workspace_args(0, n, most, params, n);
    f.boxes = reinterpret_cast<const float4 *>(c.boxes);
    f.scores = c.scores;
    f.classes = c.class_ids;
    f.count = c.count;
    f.header = reinterpret_cast<uint32_t *>(d + args_bytes(1));
    f.out = w.d_out.get();
    if (!groups.empty()) {
      auto *table = reinterpret_cast<int2 *>(h + table_offset);
      for (size_t k = 0; k < groups.size(); ++k) table[k] = {groups[k].first, groups[k].second};
      f.class_groups = reinterpret_cast<const int2 *>(d + table_offset);
      f.class_group_count = static_cast<uint32_t>(groups.size());
    }
    std::memcpy(h, &f, sizeof f);
    std::memset(h + args_bytes(1), 0, kHeaderWords * sizeof(uint32_t));
    if (c.ready) CUDANMS_TRY(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(c.ready), 0));
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
    const auto *frame = reinterpret_cast<const FrameArgs *>(d);
    status = changes_values(params.method)
                 ? launch_valued(frame, params.method, n, most, false)
                 : launch(frame, 1, params.method == Method::kGreedy ? 1 : 0, n, most, false);
    if (!status.ok()) return status;
    if (!changes_values(params.method)) {
      kept_values_kernel<<<(f.limit + 255) / 256, 256, 0, stream_>>>(
          w.d_out.get(), f.boxes, c.scores, c.class_ids, w.h_kept_boxes.device(),
          w.h_kept_scores.device(), w.h_kept_classes.device());
      CUDANMS_TRY(cudaGetLastError());
    }
    CUDANMS_TRY(cudaMemcpyAsync(w.h_out.get(), w.d_out.get(),
                                (kHeaderWords + size_t{f.limit}) * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, stream_));
    status = finish(result);
    if (!status.ok()) return status;
    const uint32_t *out = w.h_out.get();
    if (out[kCountOverflow] != 0) {
      return Status::Error("the producer counted " + std::to_string(out[kIn]) +
                           " candidates in a buffer of " + std::to_string(n));
    }
    result->counts.in = out[kIn];
    read_result(params, out, result);
    read_kept_values(result);
    return Status::Ok();
  }

  // Device candidates ranking more than the settle kernel holds: the CPU computes the same
  // result on a download.
  Status run_downloaded(const DeviceCandidatesView &c, const Params &params, Result *result) {
    HostCandidates host;
    Status status = download(c, &host);
    if (!status.ok()) return status;
    status = cpu_->run(host.view(), params, result);
    if (!status.ok() || changes_values(params.method)) return status;  // values given
    for (const uint32_t p : result->kept) {
      result->kept_boxes.insert(result->kept_boxes.end(), &host.boxes[4 * size_t{p}],
                                &host.boxes[4 * size_t{p} + 4]);
      result->kept_scores.push_back(host.scores[p]);
      result->kept_class_ids.push_back(host.class_ids[p]);
    }
    return Status::Ok();
  }

  // Launches the graph of `key`, capturing what `submit` puts on the stream the first time.
  // Where the stream cannot be captured (a caller's legacy stream), submits directly.
  template <typename Submit>
  Status replay(const GraphKey &key, Submit submit) {
    auto found = std::find_if(graphs_.begin(), graphs_.end(),
                              [&key](const auto &graph) { return graph.first == key; });
    if (found == graphs_.end()) {
      if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return submit();
      }
      const Status submitted = submit();
      cudaGraph_t graph = nullptr;
      const cudaError_t captured = cudaStreamEndCapture(stream_, &graph);
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made =
          captured == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : captured;
      if (graph) cudaGraphDestroy(graph);
      if (!submitted.ok()) return submitted;
      CUDANMS_TRY(made);
      if (graphs_.size() == kMaxGraphs) {
        cudaGraphExecDestroy(graphs_.front().second);
        graphs_.erase(graphs_.begin());
      }
      graphs_.emplace_back(key, exec);
      found = graphs_.end() - 1;
    }
    CUDANMS_TRY(cudaGraphLaunch(found->second, stream_));
    return Status::Ok();
  }

  // Graphs hold the workspace's addresses: dropped whenever it is reallocated.
  void drop_graphs() {
    for (const auto &graph : graphs_) cudaGraphExecDestroy(graph.second);
    graphs_.clear();
  }

  // The one synchronisation of a frame or a batch.
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

  static void read_result(const Params &params, const uint32_t *out, Result *result) {
    Counts &counts = result->counts;
    counts.invalid = out[kInvalid];
    counts.below_score = out[kBelowScore];
    counts.over_capacity = out[kEligible] - std::min<size_t>(out[kEligible], params.max_candidates);
    counts.kept = out[kKeptCount];
    result->kept.assign(out + kHeaderWords, out + kHeaderWords + counts.kept);
  }

  // The kernels for `count` frames (descriptors in device memory, the first `greedy` of them
  // greedy), launches sized for `capacity` candidates and `most` ranked: one launch per method
  // up to kSmallFrameMax (small_frames.cu), else the stages below. `sort`: one frame past
  // kCountingRankMax, ranked by CUB's radix sort.
  Status launch(const FrameArgs *frames, uint32_t count, uint32_t greedy, uint32_t capacity,
                uint32_t most, bool sort) {
    if (capacity <= kSmallFrameMax) {
      const uint32_t blocks = small_frame_blocks(capacity, most, count, sms_);
      if (greedy > 0) {
        CUDANMS_TRY(
            launch_small_frames(frames, greedy, Method::kGreedy, capacity, blocks, stream_));
      }
      if (count > greedy) {
        CUDANMS_TRY(launch_small_frames(frames + greedy, count - greedy, Method::kMatrix, capacity,
                                        blocks, stream_));
      }
      return Status::Ok();
    }
    Status status = launch_rank(frames, count, capacity, most, sort);
    if (!status.ok()) return status;
    if (greedy > 0) {
      status = launch_pairs(frames, greedy, Method::kGreedy, most);
      if (status.ok()) status = launch_settle(frames, greedy, Method::kGreedy, most);
      if (!status.ok()) return status;
    }
    if (count > greedy) {
      status = launch_pairs(frames + greedy, count - greedy, Method::kMatrix, most);
      if (status.ok())
        status = launch_settle(frames + greedy, count - greedy, Method::kMatrix, most);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }

  // The settle stage and the output of `count` frames of one method ranking at most `most`
  // candidates each: a single greedy frame over the whole GPU, else a block per frame.
  Status launch_settle(const FrameArgs *frames, uint32_t count, Method method, uint32_t most) {
    if (count == 1 && method == Method::kGreedy) {
      const uint32_t blocks = (most + kDataflowWarps * kWarp - 1) / (kDataflowWarps * kWarp);
      dataflow_settle_kernel<<<blocks, kDataflowWarps * kWarp, 0, stream_>>>(frames);
      CUDANMS_TRY(cudaGetLastError());
      output_kernel<<<(most + kSettleThreads - 1) / kSettleThreads, kSettleThreads, 0, stream_>>>(
          frames);
    } else if (method == Method::kGreedy) {
      settle_kernel<Method::kGreedy>
          <<<count, kSettleThreads, settle_shared_bytes(most), stream_>>>(frames);
    } else {
      settle_kernel<Method::kMatrix>
          <<<count, kSettleThreads, settle_shared_bytes(most), stream_>>>(frames);
    }
    CUDANMS_TRY(cudaGetLastError());
    return Status::Ok();
  }

  // The pair stage of `count` frames of one method, ranking at most `most` candidates each: a
  // single frame of more than kSpatialPairsMin in spatial order (its buffers reserved with the
  // workspace), else in rank order, a block per frame and tile of pairs.
  Status launch_pairs(const FrameArgs *frames, uint32_t count, Method method, uint32_t most) {
    if (spatial_pairs(count, most)) {
      CUDANMS_TRY(launch_spatial_pairs(frames, method, most, sms_, spatial_buffers(), stream_));
      return Status::Ok();
    }
    const dim3 grid((most + kPairRows - 1) / kPairRows, (most + kPairColumns - 1) / kPairColumns,
                    count);
    if (method == Method::kGreedy) {
      pairs_kernel<Method::kGreedy><<<grid, kPairWarps * kWarp, 0, stream_>>>(frames);
    } else {
      pairs_kernel<Method::kMatrix><<<grid, kPairWarps * kWarp, 0, stream_>>>(frames);
    }
    CUDANMS_TRY(cudaGetLastError());
    return Status::Ok();
  }

  SpatialPairsBuffers spatial_buffers() const {
    const Workspace &w = *ws_;
    SpatialPairsBuffers b{};
    b.bins = w.d_spatial_bins.get();
    b.places = b.bins + spatial_capacity_;
    b.bin_counts = w.d_bin_counts.get();
    b.bin_starts = b.bin_counts + kMaxSpatialBins;
    b.ranks_out = w.d_spatial_ranks.get();
    b.boxes = w.d_spatial_boxes.get();
    b.classes = w.d_spatial_classes.get();
    b.tile_bounds = w.d_tile_bounds.get();
    b.tile_areas = w.d_tile_areas.get();
    b.meetings = w.d_meetings.get();
    return b;
  }

  // One soft or weighted frame: up to kSmallFrameMax candidates in one kernel (small_frames.cu),
  // else the rank stage, then Soft-NMS's selections, or greedy's pairs and settle followed by the
  // merge (valued_methods.h).
  Status launch_valued(const FrameArgs *frame, Method method, uint32_t capacity, uint32_t most,
                       bool sort) {
    if (capacity <= kSmallFrameMax) {
      CUDANMS_TRY(launch_small_frames(frame, 1, method, capacity,
                                      small_frame_blocks(capacity, most, 1, sms_), stream_));
      return Status::Ok();
    }
    Status status = launch_rank(frame, 1, capacity, most, sort);
    if (!status.ok()) return status;
    if (method == Method::kSoft) {
      CUDANMS_TRY(launch_soft(frame, stream_));
      return Status::Ok();
    }
    status = launch_pairs(frame, 1, Method::kGreedy, most);
    if (status.ok()) status = launch_settle(frame, 1, Method::kGreedy, most);
    if (!status.ok()) return status;
    CUDANMS_TRY(launch_weighted_merge(frame, most, stream_));
    return Status::Ok();
  }

  // Rules 1-3 for `count` frames: classify, then rank by counting or, for one frame past
  // kCountingRankMax (`sort`), by CUB's radix sort and a gather.
  Status launch_rank(const FrameArgs *frames, uint32_t count, uint32_t capacity, uint32_t most,
                     bool sort) {
    Workspace &w = *ws_;
    classify_kernel<<<dim3((capacity + kClassifyThreads - 1) / kClassifyThreads, 1, count),
                      kClassifyThreads, 0, stream_>>>(frames);
    CUDANMS_TRY(cudaGetLastError());
    if (!sort) {
      const size_t tile_bytes = round16(std::min(capacity, kCountingRankMax) * sizeof(float));
      counting_rank_kernel<<<dim3((capacity + kWarp - 1) / kWarp, 1, count), kCountingWarps * kWarp,
                             tile_bytes, stream_>>>(frames);
      CUDANMS_TRY(cudaGetLastError());
    } else {
      Status status = reserve_sort(capacity);
      if (!status.ok()) return status;
      size_t sort_bytes = sort_temp_bytes_;
      CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
          w.d_sort_temp.get(), sort_bytes, w.d_keys.get(), w.d_sorted_keys.get(), w.d_iota.get(),
          w.d_order.get(), static_cast<int>(capacity), 0, 32, stream_));
      gather_kernel<<<(most + 255) / 256, 256, 0, stream_>>>(frames, w.d_sorted_keys.get());
      CUDANMS_TRY(cudaGetLastError());
    }
    return Status::Ok();
  }

  // Sizes the workspace for `frames` frames staged with capacity C, ranking at most M, and
  // `staged` bytes of staged input; a no-op when it is large enough already.
  Status reserve(size_t frames, size_t C, size_t M, size_t staged) {
    Workspace &w = *ws_;
    Status status = Status::Ok();
    auto step = [&status](Status s) {
      if (status.ok()) status = std::move(s);
    };
    if (staged > staged_capacity_) {
      staged_capacity_ = 0;
      drop_graphs();
      step(w.h_stage.reserve(staged));
      step(w.d_stage.reserve(staged));
      if (!status.ok()) return status;
      staged_capacity_ = staged;
    }
    if (frames * C > input_capacity_) {
      input_capacity_ = 0;
      drop_graphs();
      step(w.d_keys.reserve(frames * C));
      step(w.d_order.reserve(frames * C));
      if (!status.ok()) return status;
      input_capacity_ = frames * C;
    }
    if (M > kept_capacity_) {
      kept_capacity_ = 0;
      drop_graphs();
      step(w.h_kept_boxes.reserve(M));
      step(w.h_kept_scores.reserve(M));
      step(w.h_kept_classes.reserve(M));
      if (!status.ok()) return status;
      kept_capacity_ = M;
    }
    const size_t ranked = frames * M;
    const size_t outputs = frames * (kHeaderWords + M);
    if (ranked > ranked_capacity_ || outputs > output_capacity_) {
      ranked_capacity_ = output_capacity_ = 0;
      drop_graphs();
      step(w.h_out.reserve(outputs));
      step(w.d_out.reserve(outputs));
      step(w.d_rank_scores.reserve(ranked));
      step(w.d_rank_boxes.reserve(ranked));
      step(w.d_rank_classes.reserve(ranked));
      step(w.d_counts.reserve(ranked));
      step(w.d_statuses.reserve(ranked));
      step(w.d_kept_words.reserve(ranked));  // at least words_of(M) per frame
      step(w.d_predecessors.reserve(ranked * kMaxPredecessors));
      step(w.d_kept_ranks.reserve(ranked));
      step(w.d_clusters.reserve(ranked));
      if (!status.ok()) return status;
      // Zeroed once, so that no byte is ever read uninitialised (compute-sanitizer initcheck):
      // the settle kernel reads predecessor rows eight slots at a time, past a row's count too,
      // and the copy back takes `limit` kept slots of which the frame may fill fewer.
      CUDANMS_TRY(cudaMemsetAsync(w.d_predecessors.get(), 0,
                                  ranked * kMaxPredecessors * sizeof(uint32_t), stream_));
      CUDANMS_TRY(cudaMemsetAsync(w.d_out.get(), 0, outputs * sizeof(uint32_t), stream_));
      CUDANMS_TRY(cudaStreamSynchronize(stream_));
      ranked_capacity_ = ranked;
      output_capacity_ = outputs;
    }
    if (spatial_pairs(1, M) && M > spatial_capacity_) {
      spatial_capacity_ = 0;
      drop_graphs();
      step(w.d_spatial_bins.reserve(2 * M));
      step(w.d_bin_counts.reserve(2 * kMaxSpatialBins));
      step(w.d_spatial_ranks.reserve(M));
      step(w.d_spatial_boxes.reserve(M));
      step(w.d_spatial_classes.reserve(M));
      step(w.d_tile_bounds.reserve(spatial_tiles(static_cast<uint32_t>(M))));
      step(w.d_tile_areas.reserve(spatial_tiles(static_cast<uint32_t>(M))));
      step(w.d_meetings.reserve(spatial_meetings(static_cast<uint32_t>(M))));
      if (!status.ok()) return status;
      spatial_capacity_ = M;
    }
    return Status::Ok();
  }

  // CUB's sort of one frame of n candidates: its buffers, sized on first use.
  Status reserve_sort(size_t n) {
    if (n <= sort_capacity_) return Status::Ok();
    Workspace &w = *ws_;
    sort_capacity_ = 0;
    drop_graphs();
    Status status = w.d_sorted_keys.reserve(n);
    if (status.ok()) status = w.d_iota.reserve(n);
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
    sort_capacity_ = n;
    return Status::Ok();
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr;  // both set only with ContextOptions::time_device
  cudaEvent_t stop_ = nullptr;
  size_t staged_capacity_ = 0;  // bytes of staged input
  size_t input_capacity_ = 0;   // key and order slots, over all frames of a batch
  size_t ranked_capacity_ = 0;  // rank slots, over all frames of a batch
  size_t output_capacity_ = 0;  // output words, over all frames of a batch
  size_t kept_capacity_ = 0;    // device candidates: kept values
  size_t sort_capacity_ = 0;
  size_t sort_temp_bytes_ = 0;
  size_t spatial_capacity_ = 0;  // ranks of a single frame's spatial pair stage
  int sms_ = 1;                  // the device's multiprocessors
  std::unique_ptr<Context> cpu_ = create_cpu_context({});  // frames past kMaxCudaCandidates
  std::vector<uint32_t> rank_order_, claims_;              // weighted frames with points
  std::unique_ptr<Workspace> ws_;
  std::vector<std::pair<GraphKey, cudaGraphExec_t>> graphs_;  // oldest first
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
