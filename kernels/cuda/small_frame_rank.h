// A small frame's rules 1-3 by one block (small_frames.cu's kernels, each of which ranks the
// whole frame itself): every thread classifies its candidate, a bitonic sort ranks the eligible
// ones, and one warp writes the frame's counters.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// The score of a rank_key (frame_args.h). Keys are distinct (indices are), so any correct sort
// gives the same order.
__device__ inline float key_of(uint64_t rank_key) {
  const uint32_t ascending = ~static_cast<uint32_t>(rank_key >> 32);
  return __uint_as_float(ascending & 0x80000000u ? ascending & 0x7fffffffu : ~ascending);
}

// Bitonic sort of one key per thread, ascending by thread: compare-exchanges within a warp by
// shuffles, across warps through shared memory. For 1 024 keys, 40 shuffle steps and 15 shared
// ones: about a quarter of the instructions of CUB's block radix sort, whose 8 passes each scan
// every thread's digit counters.
template <int kThreads>
__device__ uint64_t block_sort(uint64_t v, uint64_t *exchange) {
  const uint32_t tid = threadIdx.x;
#pragma unroll
  for (uint32_t k = 2; k <= kThreads; k <<= 1) {
#pragma unroll
    for (uint32_t j = k >> 1; j > 0; j >>= 1) {
      uint64_t other;
      if (j >= kWarp) {
        exchange[tid] = v;
        __syncthreads();
        other = exchange[tid ^ j];
        __syncthreads();
      } else {
        other = __shfl_xor_sync(kFullMask, v, j);
      }
      const bool keep_min = ((tid & j) == 0) == ((tid & k) == 0);
      v = keep_min ? min(v, other) : max(v, other);
    }
  }
  return v;
}

// A frame's rules 1-3 (cudanms/nms.h), as classify_kernel and the rank stage compute them, by a
// block of a thread per candidate: its counters, and in thread r the key of rank r (valid for
// r < ranked).
struct SmallRanking {
  uint32_t raw_count, invalid, below, eligible, ranked;
  uint64_t key;
};

template <int kThreads>
__device__ SmallRanking rank_small_frame(const FrameArgs &f, uint64_t *exchange) {
  const uint32_t tid = threadIdx.x;
  SmallRanking r{};
  r.raw_count = *f.count;
  const uint32_t count = min(r.raw_count, f.capacity);
  bool valid = false, low = false;
  float score = 0.0f;
  if (tid < count) {
    score = f.scores[tid];
    valid = is_valid(to_box(f.boxes[tid]), score);
    low = valid && score < f.score_threshold;
  }
  const float key = valid && !low ? score + 0.0f : -INFINITY;  // -0.0 ranks as +0.0
  r.invalid = __syncthreads_count(tid < count && !valid);
  r.below = __syncthreads_count(low);
  r.eligible = __syncthreads_count(valid && !low);
  // Rule 3: descending scores, equal ones by index, the best Dmax: thread r holds rank r.
  r.key = block_sort<kThreads>(rank_key(key, tid), exchange);
  r.ranked = min(r.eligible, f.dmax);
  return r;
}

// The frame's counters, by the lanes of one warp.
__device__ inline void write_counters(const FrameArgs &f, const SmallRanking &r, uint32_t kept) {
  const uint32_t lane = threadIdx.x % kWarp;
  if (lane == kInvalid) f.out[kInvalid] = r.invalid;
  if (lane == kBelowScore) f.out[kBelowScore] = r.below;
  if (lane == kEligible) f.out[kEligible] = r.eligible;
  if (lane == kKeptCount) f.out[kKeptCount] = kept;
  if (lane == kIn) f.out[kIn] = r.raw_count;
  if (lane == kCountOverflow) f.out[kCountOverflow] = r.raw_count > f.capacity;
}

}  // namespace cudanms::detail
