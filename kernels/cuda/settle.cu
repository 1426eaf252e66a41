// The settle stage (settle.h): greedy is the unique fixpoint of "i is kept iff no predecessor is
// kept"; matrix keeps i iff nothing suppresses it.
//   a single greedy frame  over the whole GPU in one pass, a thread per rank waiting on its
//             earlier predecessors, warps taken in rank order (dataflow_settle_kernel), then the
//             output from the words of kept ranks (output.cu)
//   a batch   one block per frame, rounds of in-place sweeps (Cluster-NMS on edges,
//             REFERENCE.md), each round also walking the first 32 undecided ranks in rank order,
//             so that any input, even a chain of suppressions, settles in at most Dmax / 32
//             rounds; the block then writes the frame's output itself (output.h)
// A rank whose predecessor list overflowed tests the ranks before it again, in rank order.
#include <algorithm>
#include <cuda/atomic>

#include "common/overlap.h"
#include "output.h"
#include "settle.h"

namespace cudanms::detail {
namespace {

constexpr int kSettleThreads = kOutputThreads;  // the block writes the frame's output too
constexpr int kDataflowWarps = 8;               // per block of dataflow_settle_kernel
// Up to this many ranked candidates, the settle kernel keeps predecessor counts in shared memory.
constexpr uint32_t kSharedCounts = 16 * 1024;

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
  __shared__ OutputScan::TempStorage s_scan;
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

}  // namespace

cudaError_t prepare_settle() {
  // Past the default 48 KiB, shared memory must be asked for: up to a status byte for each of
  // kMaxCudaCandidates.
  const auto bytes =
      static_cast<int>(std::max(settle_shared_bytes(kSharedCounts),
                                settle_shared_bytes(static_cast<uint32_t>(kMaxCudaCandidates))));
  const cudaError_t error = cudaFuncSetAttribute(
      settle_kernel<Method::kGreedy>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (error != cudaSuccess) return error;
  return cudaFuncSetAttribute(settle_kernel<Method::kMatrix>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

cudaError_t launch_settle(const FrameArgs *frames, uint32_t count, Method method, uint32_t most,
                          cudaStream_t stream) {
  if (count == 1 && method == Method::kGreedy) {
    const uint32_t blocks = (most + kDataflowWarps * kWarp - 1) / (kDataflowWarps * kWarp);
    dataflow_settle_kernel<<<blocks, kDataflowWarps * kWarp, 0, stream>>>(frames);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    return launch_output_from_words(frames, most, stream);
  }
  if (method == Method::kGreedy) {
    settle_kernel<Method::kGreedy>
        <<<count, kSettleThreads, settle_shared_bytes(most), stream>>>(frames);
  } else {
    settle_kernel<Method::kMatrix>
        <<<count, kSettleThreads, settle_shared_bytes(most), stream>>>(frames);
  }
  return cudaGetLastError();
}

}  // namespace cudanms::detail
