// The output stage (output.cu): a frame's staged counters, its kept count and the indices of its
// kept candidates in rank order, at most `limit` of them, written into its `out`: mapped host
// memory for host candidates, device memory for device ones (whose kept values a last kernel
// writes into mapped memory). Consecutive threads write consecutive slots: in mapped host memory
// a thread writing several slots in turn costs a transaction each (measured: 15 -> 34 us at 10k).
// Included by .cu files only: the settle kernel and Soft-NMS write their outputs themselves.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "frame_args.h"

namespace cudanms::detail {

constexpr int kOutputThreads = 1024;  // a block writing a frame's output
constexpr int kScanItems = 8;         // ranks per thread per compaction step
using OutputScan = cub::BlockScan<uint32_t, kOutputThreads>;

// The staged counters but the kept count, by the block's first threads.
__device__ inline void copy_counters(const FrameArgs &f) {
  if (threadIdx.x < kHeaderWords && threadIdx.x != kKeptCount) {
    f.out[threadIdx.x] = f.header[threadIdx.x];
  }
}
__device__ inline void write_kept(const FrameArgs &f, uint32_t slot, uint32_t rank) {
  if (slot >= f.limit) return;
  f.out[kHeaderWords + slot] = f.order[rank];
  if (f.kept_ranks) f.kept_ranks[slot] = rank;
}
__device__ inline void write_kept_count(const FrameArgs &f, uint32_t kept) {
  if (threadIdx.x == 0) f.out[kKeptCount] = f.header[kKeptCount] = min(kept, f.limit);
}

// The exclusive prefix sum of value(i) over i < m, by the whole block: into(i, sum) for each i,
// and the total returned to every thread.

template <typename Value, typename Into>
__device__ uint32_t block_prefix_sum(uint32_t m, OutputScan::TempStorage &storage, Value value,
                                     Into into) {
  uint32_t base = 0;
  for (uint32_t start = 0; start < m; start += kOutputThreads * kScanItems) {
    uint32_t items[kScanItems];
    const uint32_t first = start + threadIdx.x * kScanItems;
    for (int k = 0; k < kScanItems; ++k) items[k] = first + k < m ? value(first + k) : 0u;
    uint32_t total = 0;
    OutputScan(storage).ExclusiveSum(items, items, total);
    for (int k = 0; k < kScanItems; ++k) {
      if (first + k < m) into(first + k, base + items[k]);
    }
    base += total;
    __syncthreads();  // the storage is reused
  }
  return base;
}

// The output of a frame whose m ranks are decided, by a whole block of kOutputThreads.
template <typename IsKept>
__device__ void write_output(const FrameArgs &f, uint32_t m, OutputScan::TempStorage &scan,
                             IsKept is_kept) {
  copy_counters(f);
  const uint32_t kept = block_prefix_sum(
      m, scan, [&](uint32_t i) { return is_kept(i) ? 1u : 0u; },
      [&](uint32_t i, uint32_t slot) {
        if (is_kept(i)) write_kept(f, slot, i);
      });
  write_kept_count(f, kept);
}

// The output of a single frame (descriptor in device memory) ranking at most `most` candidates,
// from its words of kept ranks (`kept_words`, as the dataflow settle writes them).
cudaError_t launch_output_from_words(const FrameArgs *frame, uint32_t most, cudaStream_t stream);

// Device candidates: the kept ones' values (`out` in device memory, at most `limit` kept),
// straight into mapped host memory.
cudaError_t launch_kept_values(const uint32_t *out, uint32_t limit, const float4 *boxes,
                               const float *scores, const int32_t *classes, float4 *kept_boxes,
                               float *kept_scores, int32_t *kept_classes, cudaStream_t stream);

}  // namespace cudanms::detail
