// Soft-NMS and weighted NMS on the rank arrays (valued_methods.h). Both give the CPU backend's
// bits: the same operations in the same order (common/decay.h), in rank order where they add up.
#include "common/decay.h"
#include "output.h"
#include "valued_methods.h"

namespace cudanms::detail {
namespace {

constexpr int kSoftThreads = 1024;
constexpr int kSoftWarps = kSoftThreads / kWarp;
constexpr int kMergeWarps = 8;  // per block, a kept candidate each

// The best of two (key, rank) pairs: the lower key, rank_key's order (frame_args.h).
struct Pick {
  uint64_t key;
  uint32_t rank;
};
__device__ Pick better(Pick a, Pick b) { return b.key < a.key ? b : a; }
constexpr uint64_t kNone = ~uint64_t{0};

__device__ Pick warp_best(Pick p) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const Pick other{__shfl_xor_sync(kFullMask, p.key, offset),
                     __shfl_xor_sync(kFullMask, p.rank, offset)};
    p = better(p, other);
  }
  return p;
}

// Thread t owns the ranks t, t + 1024, ...: their current scores (in `keys`, free after the rank
// stage) and selected flags (in `counts`) are read and written by it alone. Each round the block
// agrees on the best pick (one barrier: the per-warp picks are double-buffered), its owner writes
// it out, and every thread decays its ranks against it while finding its next best and counting
// the pick's neighbours (rule 5), which travel with the next round's picks.
__global__ void __launch_bounds__(kSoftThreads) soft_kernel(const FrameArgs *frame) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  __shared__ Pick s_best[2][kSoftWarps];
  __shared__ uint32_t s_neighbours[2][kSoftWarps];
  const bool counting = f.neighbours != nullptr;
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t tid = threadIdx.x;
  const uint32_t lane = tid % kWarp, warp = tid / kWarp;
  float *current = f.keys;
  uint32_t *selected = f.counts;
  copy_counters(f);

  // Each rank's score as the candidate has it (-0.0 included, as the CPU backend reports it).
  Pick mine{kNone, 0};
  for (uint32_t i = tid; i < m; i += kSoftThreads) {
    const float s = f.scores[f.order[i]];
    current[i] = s;
    mine = better(mine, {rank_key(s + 0.0f, f.order[i]), i});
  }
  uint32_t kept = 0;
  uint32_t neighbours = 0;  // of the last pick, among this thread's ranks
  for (uint32_t round = 0;; ++round) {
    const Pick w = warp_best(mine);
    const uint32_t warp_neighbours = counting ? warp_sum(neighbours) : 0;
    if (lane == 0) {
      s_best[round % 2][warp] = w;
      s_neighbours[round % 2][warp] = warp_neighbours;
    }
    __syncthreads();
    if (counting && tid == 0 && kept > 0) {
      uint32_t total = 0;
      for (int k = 0; k < kSoftWarps; ++k) total += s_neighbours[round % 2][k];
      f.neighbours[kept - 1] = total;
    }
    if (kept >= f.limit) break;
    Pick best{kNone, 0};
    for (int k = 0; k < kSoftWarps; ++k) best = better(best, s_best[round % 2][k]);
    if (best.key == kNone) break;
    const uint32_t r = best.rank;
    if (r % kSoftThreads == tid) {
      selected[r] = 1;
      const uint32_t p = f.order[r];
      f.out[kHeaderWords + kept] = p;
      f.kept_boxes[kept] = f.rank_boxes[r];
      f.kept_scores[kept] = current[r];
      f.kept_classes[kept] = own_class(f, p);
    }
    ++kept;
    const Box a = to_box(f.rank_boxes[r]);
    const int32_t class_a = f.rank_classes[r];
    mine = {kNone, 0};
    neighbours = 0;
    for (uint32_t i = tid; i < m; i += kSoftThreads) {
      if (selected[i] || current[i] < f.score_threshold) continue;
      if (f.rank_classes[i] == class_a) {
        const float o = overlap(f.overlap, a, to_box(f.rank_boxes[i]));
        neighbours += o > f.threshold;
        current[i] = current[i] * soft_decay(f.soft_decay, o, f.threshold, f.sigma);
      }
      if (current[i] >= f.score_threshold) {
        mine = better(mine, {rank_key(current[i] + 0.0f, f.order[i]), i});
      }
    }
  }
  if (tid == 0) f.out[kKeptCount] = f.header[kKeptCount] = kept;
}

// Rank i is claimed by the first kept rank before it (in the settle kernel's list of at most
// `limit`) that suppresses it; kept ranks and unclaimed ones get UINT32_MAX.
__global__ void weighted_claims_kernel(const FrameArgs *frame) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= ranked_count(f.header, f.dmax)) return;
  const uint32_t kept = f.header[kKeptCount];
  const Box b = to_box(f.rank_boxes[i]);
  const int32_t class_b = f.rank_classes[i];
  uint32_t claim = UINT32_MAX;
  for (uint32_t s = 0; s < kept; ++s) {
    const uint32_t k = f.kept_ranks[s];
    if (k >= i) break;
    if (f.rank_classes[k] == class_b &&
        greedy_suppresses(f.overlap, f.threshold, to_box(f.rank_boxes[k]), b)) {
      claim = s;
      break;
    }
  }
  f.clusters[i] = claim;
}

// A warp per kept slot: the ranks after its kept rank, 32 at a time, and those it claims added
// one after the other in rank order, each lane adding the same values in the same order.
__global__ void __launch_bounds__(kMergeWarps *kWarp)
    weighted_merge_kernel(const FrameArgs *frame) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  const uint32_t slot = blockIdx.x * kMergeWarps + threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  if (slot >= f.header[kKeptCount]) return;
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t k = f.kept_ranks[slot];
  const Box kept_box = to_box(f.rank_boxes[k]);
  const float kept_score = f.scores[f.order[k]];
  WeightedBox sum;
  sum.add(kept_box, kept_score);
  uint32_t neighbours = 0;
  for (uint32_t first = k + 1; first < m; first += kWarp) {
    const uint32_t i = first + lane;
    const bool member = i < m && f.clusters[i] == slot;
    uint32_t members = __ballot_sync(kFullMask, member);
    neighbours += __popc(members);
    float4 mine_box = make_float4(0, 0, 0, 0);
    float mine_score = 0.0f;
    if (member) {
      mine_box = f.rank_boxes[i];
      mine_score = f.scores[f.order[i]];
    }
    for (; members != 0; members &= members - 1) {
      const int from = __ffs(members) - 1;
      const Box b{
          __shfl_sync(kFullMask, mine_box.x, from), __shfl_sync(kFullMask, mine_box.y, from),
          __shfl_sync(kFullMask, mine_box.z, from), __shfl_sync(kFullMask, mine_box.w, from)};
      sum.add(b, __shfl_sync(kFullMask, mine_score, from));
    }
  }
  if (lane == 0) {
    const Box mean = sum.mean(kept_box);
    f.kept_boxes[slot] = make_float4(mean.x1, mean.y1, mean.x2, mean.y2);
    f.kept_scores[slot] = kept_score;
    f.kept_classes[slot] = own_class(f, f.order[k]);
    if (f.neighbours) f.neighbours[slot] = neighbours;
  }
}

}  // namespace

cudaError_t launch_soft(const FrameArgs *frame, cudaStream_t stream) {
  soft_kernel<<<1, kSoftThreads, 0, stream>>>(frame);
  return cudaGetLastError();
}

cudaError_t launch_weighted_merge(const FrameArgs *frame, uint32_t most, cudaStream_t stream) {
  weighted_claims_kernel<<<(most + 255) / 256, 256, 0, stream>>>(frame);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  weighted_merge_kernel<<<(most + kMergeWarps - 1) / kMergeWarps, kMergeWarps * kWarp, 0, stream>>>(
      frame);
  return cudaGetLastError();
}

}  // namespace cudanms::detail
