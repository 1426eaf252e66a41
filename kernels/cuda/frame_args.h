// What the CUDA backend's kernels share: one frame's descriptor and the layout of its counters.
// Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/overlap.h"
#include "cudanms/nms.h"

namespace cudanms::detail {

constexpr uint32_t kWarp = 32;
constexpr uint32_t kFullMask = 0xffffffffu;

// The words of 32 bits (one a rank) that hold `ranks` ranks' flags.
__host__ __device__ constexpr uint32_t words_of(uint32_t ranks) {
  return (ranks + kWarp - 1) / kWarp;
}

// Greedy's predecessor list slots per rank, outside small frames; a longer list overflows and
// the settle kernel tests that rank's overlaps again.
constexpr uint32_t kMaxPredecessors = 512;

// The frame's counters, at the head of both the staged input (zeroed by the copy to the device)
// and the output (copied back), followed by the kept indices in the output.
enum : uint32_t {
  kInvalid,
  kBelowScore,
  kEligible,
  kKeptCount,
  kIn,             // the frame's count: staged by the host, or the producer's
  kCountOverflow,  // device candidates: that count was above the capacity
  kArrived,        // small frames: the blocks done with their pairs (small_frames.cu)
  kMeetings,       // single large frames: the pairs of tiles that meet (spatial_pairs.cu)
  kSettleTickets,  // single large frames: the words of ranks taken by the settle's warps
  // The extent of the eligible boxes' centres, as ordered_bits (the least ones inverted, so that
  // all four grow from zero by atomicMax): where spatial_pairs.cu lays its grid.
  kLeastX,
  kLeastY,
  kMostX,
  kMostY,
  kHeaderWords = 16  // keeps what follows 16-byte aligned
};

// A ranked candidate's status in the settle stage: placed undecided by the rank stage, final
// once kept or suppressed.
enum : uint8_t { kUndecided = 0, kKept = 1, kSuppressed = 2 };

__device__ inline Box to_box(float4 v) { return {v.x, v.y, v.z, v.w}; }

// The sum of v over the warp, in every lane.
__device__ inline uint32_t warp_sum(uint32_t v) {
#pragma unroll
  for (uint32_t offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

// The sum of v over lanes 0 to `lane` of the warp.
__device__ inline uint32_t warp_inclusive_sum(uint32_t v, uint32_t lane) {
#pragma unroll
  for (uint32_t d = 1; d < kWarp; d *= 2) {
    const uint32_t below = __shfl_up_sync(kFullMask, v, d);
    if (lane >= d) v += below;
  }
  return v;
}

// What one frame's kernels read and write: its candidates, its parameters and its slices of the
// workspace. Every launch takes an array of them in device memory, one per frame, and a block's
// blockIdx.z (the settle kernel's blockIdx.x) picks its frame: a batch of frames is one launch
// sequence, and a single frame a batch of one.
struct FrameArgs {
  const float4 *boxes;
  const float *scores;
  const int32_t *classes;  // nullptr: one class
  const uint32_t *count;   // a device word, at most `capacity`
  uint32_t *header;        // the frame's counters
  uint32_t *out;           // header words, then the kept indices (device or mapped memory)
  float *keys;
  uint32_t *order;  // rank -> candidate index
  float4 *rank_boxes;
  float *rank_scores;
  int32_t *rank_classes;
  uint32_t *counts;        // predecessors (greedy) or suppressors (matrix)
  uint32_t *statuses;      // a single greedy frame's settle: per rank, undecided, kept or not
  uint32_t *kept_words;    // and per word of 32 ranks, the kept ones
  uint32_t *predecessors;  // kMaxPredecessors ranks per rank; small frames: their bit matrix
  uint32_t capacity;       // slots of boxes, scores and classes
  uint32_t dmax;
  uint32_t limit;  // kept indices written at most (with neighbours counted, the method's all)
  float score_threshold;
  float threshold;
  Overlap overlap;
  // Device candidates with class groups: (class, group id) pairs sorted by class
  // (common/class_groups.h). Host candidates come with their group ids already.
  const int2 *class_groups;
  uint32_t class_group_count;
  // kSoft and kWeighted: the kept candidates' values, in output order (mapped host memory).
  float4 *kept_boxes;
  float *kept_scores;
  int32_t *kept_classes;
  uint32_t *kept_ranks;  // kWeighted: the kept ranks in order, as the settle kernel writes them
  uint32_t *clusters;    // kWeighted: per rank, the slot of the kept rank that claims it
  SoftDecay soft_decay;
  float sigma;
  bool class_agnostic;  // classes, where given, are only reported
  // Rule 5. For every method but kGroup (whose stages apply it themselves) the method keeps all
  // it finds, counts each kept one's neighbours in `neighbours` (per kept slot, device memory),
  // and the neighbours stage (neighbours.h) keeps those with enough, at most `detections`.
  uint32_t min_neighbors;
  uint32_t detections;        // rule 6's cap
  uint32_t *neighbours;       // per kept slot, as the method found them
  uint32_t *kept_neighbours;  // in output order (mapped host memory)
  uint32_t *slot_moves;       // per kept slot, its output slot or UINT32_MAX: weighted points
  double group_eps;
};

// Soft-NMS, weighted NMS and grouping: the kernels write the kept candidates' values, and such a
// frame runs on its own, never batched.
__host__ __device__ constexpr bool changes_values(Method method) {
  return method == Method::kSoft || method == Method::kWeighted || method == Method::kGroup;
}

// Whether rule 5's neighbours stage follows the method (kGroup applies the rule itself).
__host__ __device__ constexpr bool counts_neighbours(Method method, uint32_t min_neighbors) {
  return min_neighbors > 0 && method != Method::kGroup;
}

// The class candidate p is compared by: its group's id where class groups apply.
__device__ inline int32_t class_of(const FrameArgs &f, uint32_t p) {
  if (f.classes == nullptr || f.class_agnostic) return 0;
  const int32_t c = f.classes[p];
  uint32_t lo = 0, hi = f.class_group_count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (f.class_groups[mid].x < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < f.class_group_count && f.class_groups[lo].x == c ? f.class_groups[lo].y : c;
}

// The candidate's own class, as the result reports it.
__device__ inline int32_t own_class(const FrameArgs &f, uint32_t p) {
  return f.classes ? f.classes[p] : 0;
}

// A float's bits as an unsigned integer of the same order.
__device__ inline uint32_t ordered_bits(float v) {
  const uint32_t bits = __float_as_uint(v);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

__device__ inline float from_ordered_bits(uint32_t bits) {
  return __uint_as_float(bits & 0x80000000u ? bits & 0x7fffffffu : ~bits);
}

// A (score, index) pair as one key whose ascending order is rank order: higher score first
// (pass -0.0 as +0.0), then lower index.
__device__ inline uint64_t rank_key(float score, uint32_t index) {
  return uint64_t{~ordered_bits(score)} << 32 | index;
}

// How many candidates NMS processes: the eligible ones, at most Dmax. Only the ranking kernels
// (rank.cu) count into the header; a frame ranked by the small-frame path (small_frame_rank.h)
// has its counters in `out` alone, so a kernel launched after either path reads out[kEligible].
__device__ inline uint32_t ranked_count(const uint32_t *header, uint32_t dmax) {
  return min(header[kEligible], dmax);
}

}  // namespace cudanms::detail
