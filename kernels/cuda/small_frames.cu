// Small frames: all of NMS in one launch (the common video case, a few hundred candidates, where
// the multi-kernel path of cuda_nms.cu spends more time between its kernels than in them).
// A frame gets a few blocks of a thread per candidate (256, 512 or 1 024); each one
//   classifies and ranks all the frame's candidates itself (rules 1-3 of cudanms/nms.h: a
//             bitonic sort of (score, index) keys; cheaper than a second launch)
//   tests its share of the pairs (rule 4), in units spread over the frame's warps: per quarter
//             of a word of 32 ranks, which of its ranks suppress each rank of the word (a lane
//             per rank); per pair of rows j and m - 1 - j, kUnitWords of their later words, a
//             ballot per 32 ranks i > j; into a bit matrix in global memory (L2)
// and the block that finishes last (one atomic per block on the frame's kArrived counter, after
// a fence: the classic last-block pattern, no co-scheduling needed) copies the matrix into
// shared memory and settles the frame:
//   greedy    one warp walks the ranks 32 at a time, as the CPU walks them one at a time: the
//             word's ranks that no earlier kept rank suppresses, the greedy rule within the word
//             (iterated to its fixpoint, unique because suppression only goes down the ranks), and
//             the kept ones' rows ORed into the later words' suppressed bits
//   matrix    a rank is suppressed iff any rank suppresses it
//   weighted  greedy's, then each rank's claim (the first written kept rank suppressing it, from
//             the matrix) and each kept rank's mean over its claims, a warp per kept rank
// then writes the counters and the kept indices in rank order, like the settle kernel.
// Soft-NMS has no pairs to share out: one block ranks the frame and makes its selections
// (small_soft_kernel).
// Measured on an H100 (clock64 in the last block, README "Performance"): at 1 000 candidates the
// settling warp's chain of decisions (~400 cycles a word) and the sort are most of the time.
#include <algorithm>

#include "common/decay.h"
#include "small_frame_rank.h"
#include "small_frames.h"

namespace cudanms::detail {
namespace {

constexpr uint32_t kRowWords = kSmallFrameMax / kWarp;  // a matrix row in global memory
// The words of a pair of rows that one warp tests: more, shorter units keep more warps busy.
constexpr uint32_t kUnitWords = 8;

// A block has a thread per candidate of its capacity (kThreads of 256, 512 or 1024). Its shared
// memory: the ranked candidates, then the bit matrix, rows padded by a word so that a warp
// reading a column hits 32 banks, then each rank's suppressors among the ranks of its word.
template <int kThreads>
struct SmallLayout {
  static constexpr uint32_t kStride = kThreads / kWarp + 1;
  static constexpr size_t kBytes =
      kThreads * (sizeof(float4) + sizeof(float) + sizeof(int32_t) + sizeof(uint32_t)) +
      size_t{kThreads} * kStride * sizeof(uint32_t) + kThreads * sizeof(uint32_t);
};

// The block size for frames staged with `capacity` candidates: a thread per candidate.
__host__ __device__ constexpr uint32_t threads_for(uint32_t capacity) {
  return capacity <= 256 ? 256 : capacity <= 512 ? 512 : 1024;
}

// The units of pair tests of a frame ranking m candidates (see the kernel): per word of 32
// ranks, kWithinParts within-word units; per pair of rows, a unit per kUnitWords later words.
constexpr uint32_t kWithinParts = 4;
__host__ __device__ constexpr uint32_t within_units(uint32_t m) {
  return words_of(m) * kWithinParts;
}
__host__ __device__ constexpr uint32_t slices_of(uint32_t m) {
  return (words_of(m) + kUnitWords - 1) / kUnitWords;
}
__host__ __device__ constexpr uint32_t pair_units(uint32_t m) {
  return within_units(m) + (m + 1) / 2 * slices_of(m);
}

// The ranks of word w that exist, as bits.
__device__ uint32_t present_bits(uint32_t w, uint32_t m) {
  const uint32_t here = min(m - w * kWarp, kWarp);
  return here == kWarp ? kFullMask : (1u << here) - 1;
}

// A frame's bit matrix in global memory, row j at j * kGlobalStride (16-byte aligned): word w > j /
// 32 holds the ranks 32w + b that rank j suppresses; the kWithinParts words from kRowWords, the
// ranks of j's own word that suppress j, each from kWarp / kWithinParts of them (OR them).
constexpr uint32_t kGlobalStride = kRowWords + kWithinParts;

// Greedy, by one warp: the kept ranks of each word into kept_words[w].
template <uint32_t kStride>
__device__ void settle_greedy(const uint32_t *mask, const uint32_t *within, uint32_t m,
                              uint32_t *kept_words) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t words = words_of(m);
  uint32_t suppressed = 0;  // lane l: word l's ranks suppressed by kept ranks of earlier words
  for (uint32_t w = 0; w < words; ++w) {
    // Word w's rows, loaded before its ranks are decided: the loads do not wait on the decision,
    // which waits on the previous word's (measured: 650 cycles a word when they did).
    uint32_t rows[kWarp];
    const bool later = lane > w && lane < words;
#pragma unroll
    for (uint32_t b = 0; b < kWarp; ++b)
      rows[b] = later ? mask[(w * kWarp + b) * kStride + lane] : 0;
    const uint32_t rank = w * kWarp + lane;
    const uint32_t open = present_bits(w, m) & ~__shfl_sync(kFullMask, suppressed, w);
    const bool is_open = (open >> lane) & 1u;
    const uint32_t suppressed_by = rank < m ? within[rank] : 0;
    uint32_t kept = open;
    if (__any_sync(kFullMask, is_open && (suppressed_by & open) != 0)) {
      for (;;) {
        const uint32_t next = __ballot_sync(kFullMask, is_open && (suppressed_by & kept) == 0);
        if (next == kept) break;
        kept = next;
      }
    }
#pragma unroll
    for (uint32_t b = 0; b < kWarp; ++b) suppressed |= rows[b] & (0u - ((kept >> b) & 1u));
    if (lane == 0) kept_words[w] = kept;
  }
}

// Weighted NMS: the slot of the kept rank that claims each rank of word w (the first kept rank,
// among the `limit` written, that suppresses it; UINT32_MAX for kept and unclaimed ranks), as
// weighted_claims_kernel finds it, by one warp: the earlier words' kept ranks in rank order, a
// row word each, until every lane has its claim, then the rank's own word.
template <uint32_t kStride>
__device__ void claim_word(const uint32_t *mask, const uint32_t *within, const uint32_t *kept_words,
                           const uint32_t *kept_before, uint32_t m, uint32_t limit, uint32_t w,
                           uint32_t *claims) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t i = w * kWarp + lane;
  const uint32_t kept_here = kept_words[w];
  bool open = i < m && ((kept_here >> lane) & 1u) == 0;
  uint32_t claim = UINT32_MAX;
  for (uint32_t v = 0; v < w && kept_before[v] < limit && __any_sync(kFullMask, open); ++v) {
    uint32_t slot = kept_before[v];
    for (uint32_t bits = kept_words[v]; bits != 0 && slot < limit; bits &= bits - 1, ++slot) {
      const uint32_t j = v * kWarp + __ffs(bits) - 1;
      if (open && (mask[j * kStride + w] >> lane) & 1u) {
        claim = slot;
        open = false;
      }
    }
  }
  const uint32_t by = open ? within[i] & kept_here : 0;  // kept ranks of its word before it
  if (by != 0) {
    const uint32_t b = __ffs(by) - 1;
    const uint32_t slot = kept_before[w] + __popc(kept_here & ((1u << b) - 1));
    if (slot < limit) claim = slot;
  }
  if (i < m) claims[i] = claim;
}

// Weighted NMS: the score-weighted mean of the kept rank k (output slot `slot`) and the ranks it
// claims, by one warp: lane l finds them in word l (among the ranks k suppresses), then every
// lane adds them up in rank order, after k itself, as the CPU backend does.
template <uint32_t kStride>
__device__ void merge_slot(const FrameArgs &f, const uint32_t *mask, const uint32_t *within,
                           const uint32_t *claims, const float4 *boxes, const float *scores,
                           const uint32_t *order, uint32_t m, uint32_t k, uint32_t slot) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t words = words_of(m);
  const uint32_t kw = k / kWarp;
  const uint32_t own = __ballot_sync(
      kFullMask, kw * kWarp + lane < m && (within[kw * kWarp + lane] >> (k % kWarp)) & 1u);
  uint32_t members = lane == kw ? own : lane > kw && lane < words ? mask[k * kStride + lane] : 0;
  for (uint32_t bits = members; bits != 0; bits &= bits - 1) {
    const uint32_t b = __ffs(bits) - 1;
    if (claims[lane * kWarp + b] != slot) members &= ~(1u << b);
  }
  const Box kept_box = to_box(boxes[k]);
  WeightedBox sum;
  sum.add(kept_box, scores[k]);
  for (uint32_t with = __ballot_sync(kFullMask, members != 0); with != 0; with &= with - 1) {
    const uint32_t word = __ffs(with) - 1;
    for (uint32_t bits = __shfl_sync(kFullMask, members, word); bits != 0; bits &= bits - 1) {
      const uint32_t i = word * kWarp + __ffs(bits) - 1;
      sum.add(to_box(boxes[i]), scores[i]);
    }
  }
  if (lane == 0) {
    const Box mean = sum.mean(kept_box);
    f.kept_boxes[slot] = make_float4(mean.x1, mean.y1, mean.x2, mean.y2);
    f.kept_scores[slot] = scores[k];
    f.kept_classes[slot] = own_class(f, order[k]);
  }
}

// The frame's ranked candidates and its suppression matrix, in the kernel's dynamic shared
// memory (SmallLayout): rank r's box, score, class and candidate index, then m rows of the matrix
// (rank j's word w: which later ranks of word w it suppresses) and each rank's own word (which
// ranks of its word suppress it).
template <int kThreads>
struct SmallShared {
  float4 *boxes;
  float *scores;
  int32_t *classes;
  uint32_t *order;
  uint32_t *mask;
  uint32_t *within;
  __device__ explicit SmallShared(float4 *dynamic)
      : boxes(dynamic),
        scores(reinterpret_cast<float *>(boxes + kThreads)),
        classes(reinterpret_cast<int32_t *>(scores + kThreads)),
        order(reinterpret_cast<uint32_t *>(classes + kThreads)),
        mask(order + kThreads),
        within(mask + kThreads * SmallLayout<kThreads>::kStride) {}
};

// Rule 4, in units of work spread over the frame's warps, each at most 8 overlap tests a lane
// (one takes ~400 cycles, latency-bound): first, per word of 32 ranks and quarter of it, which
// ranks of that quarter suppress each rank of the word (a lane per rank); then, per pair of rows
// j and m - 1 - j (about m / 32 words between them), kUnitWords of their later words, a ballot
// each. Into the frame's matrix in global memory, which every block of the frame shares.
template <Method kMethod, int kThreads>
__device__ __forceinline__ void mark_pairs(const FrameArgs &f, uint32_t m,
                                           const SmallShared<kThreads> &s) {
  constexpr uint32_t kWarps = kThreads / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t warp = threadIdx.x / kWarp;
  uint32_t *g_mask = f.predecessors;
  auto suppresses = [&](uint32_t j, uint32_t i) {
    if (s.classes[j] != s.classes[i]) return false;
    const Box a = to_box(s.boxes[j]), b = to_box(s.boxes[i]);
    return kMethod != Method::kMatrix
               ? greedy_suppresses(f.overlap, f.threshold, a, b)
               : matrix_suppresses(f.overlap, f.threshold, a, s.scores[j], b, s.scores[i]);
  };
  const uint32_t words = words_of(m);
  const uint32_t slices = slices_of(m);
  const uint32_t within = within_units(m);
  const uint32_t units = pair_units(m);
  for (uint32_t u = blockIdx.x * kWarps + warp; u < units; u += gridDim.x * kWarps) {
    if (u < within) {
      const uint32_t word = u / kWithinParts, part = u % kWithinParts;
      const uint32_t i = word * kWarp + lane;
      constexpr uint32_t kPart = kWarp / kWithinParts;
      uint32_t by = 0;
      for (uint32_t b = part * kPart; b < min(lane, (part + 1) * kPart) && i < m; ++b) {
        by |= uint32_t{suppresses(word * kWarp + b, i)} << b;
      }
      if (i < m) g_mask[i * kGlobalStride + kRowWords + part] = by;
      continue;
    }
    const uint32_t q = (u - within) / slices;
    const uint32_t first = (u - within) % slices * kUnitWords;
    const uint32_t rows[2] = {q, m - 1 - q};
    const uint32_t later[2] = {words - 1 - rows[0] / kWarp,
                               rows[1] != q ? words - 1 - rows[1] / kWarp : 0};
    for (uint32_t t = first; t < first + kUnitWords && t < later[0] + later[1]; ++t) {
      const uint32_t j = t < later[0] ? rows[0] : rows[1];
      const uint32_t w = j / kWarp + 1 + (t < later[0] ? t : t - later[0]);
      const uint32_t i = w * kWarp + lane;
      const uint32_t bits = __ballot_sync(kFullMask, i < m && suppresses(j, i));
      if (lane == 0) g_mask[j * kGlobalStride + w] = bits;
    }
  }
}

// The matrix into shared memory, past L1: rows j < m, 16 bytes at a time from the quad holding
// word j / 32 + 1 (earlier words are never read), all loads issued before any store. Each rank's
// own word too; this thread's is returned.
template <int kThreads>
__device__ __forceinline__ uint32_t load_matrix(const uint32_t *g_mask, uint32_t m,
                                                const SmallShared<kThreads> &s) {
  constexpr uint32_t kStride = SmallLayout<kThreads>::kStride;
  constexpr uint32_t kQuads = kThreads / kWarp / 4;
  const uint32_t tid = threadIdx.x;
  const uint32_t words = words_of(m);
  uint4 quads[kQuads];
#pragma unroll
  for (uint32_t k = 0; k < kQuads; ++k) {
    const uint32_t e = k * kThreads + tid, j = e / kQuads, word = e % kQuads * 4;
    if (j < m && word + 3 > j / kWarp && word < words) {
      quads[k] = __ldcg(reinterpret_cast<const uint4 *>(g_mask + j * kGlobalStride + word));
    }
  }
  uint4 parts = make_uint4(0, 0, 0, 0);
  if (tid < m)
    parts = __ldcg(reinterpret_cast<const uint4 *>(g_mask + tid * kGlobalStride + kRowWords));
  const uint32_t own_word = parts.x | parts.y | parts.z | parts.w;
#pragma unroll
  for (uint32_t k = 0; k < kQuads; ++k) {
    const uint32_t e = k * kThreads + tid, j = e / kQuads, word = e % kQuads * 4;
    if (j < m && word + 3 > j / kWarp && word < words) {
      uint32_t *row = s.mask + j * kStride + word;
      row[0] = quads[k].x;
      row[1] = quads[k].y;
      row[2] = quads[k].z;
      row[3] = quads[k].w;
    }
  }
  s.within[tid] = own_word;
  return own_word;
}

// Which ranks are kept, per word of 32 (kept_words, zeroed before): greedy's by warp 0 in rank
// order; matrix's, every rank that no rank suppresses (a column of the matrix, or a rank of its
// own word).
template <Method kMethod, int kThreads>
__device__ __forceinline__ void settle_kept(const SmallShared<kThreads> &s, uint32_t m,
                                            uint32_t own_word, uint32_t *kept_words) {
  constexpr uint32_t kStride = SmallLayout<kThreads>::kStride;
  constexpr uint32_t kWarps = kThreads / kWarp;
  const uint32_t tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const uint32_t words = words_of(m);
  if constexpr (kMethod != Method::kMatrix) {
    if (warp == 0) settle_greedy<kStride>(s.mask, s.within, m, kept_words);
  } else {
    uint32_t marked = 0;  // lane l: word l's ranks
    for (uint32_t j = warp; j < m; j += kWarps) {
      if (lane > j / kWarp && lane < words) marked |= s.mask[j * kStride + lane];
    }
    if (marked != 0) atomicOr_block(&kept_words[lane], marked);
    const uint32_t own = __ballot_sync(kFullMask, own_word != 0);
    if (lane == 0 && own != 0) atomicOr_block(&kept_words[warp], own);
    __syncthreads();
    if (tid < words) kept_words[tid] = present_bits(tid, m) & ~kept_words[tid];
  }
}

// The kept ranks' indices in rank order, at most `limit`, after the counters (kept_count: how
// many); weighted: each kept box merged with those it suppressed. `exchange` is spent: weighted
// keeps each slot's rank and each rank's claim there.
template <Method kMethod, int kThreads>
__device__ __forceinline__ void write_kept(const FrameArgs &f, const SmallShared<kThreads> &s,
                                           uint32_t m, const uint32_t *kept_words,
                                           const uint32_t *before, uint32_t kept_count,
                                           uint64_t *exchange) {
  constexpr uint32_t kStride = SmallLayout<kThreads>::kStride;
  constexpr uint32_t kWarps = kThreads / kWarp;
  const uint32_t tid = threadIdx.x, warp = tid / kWarp;
  const uint32_t words = words_of(m);
  uint32_t *s_slot_ranks = reinterpret_cast<uint32_t *>(exchange);
  uint32_t *s_claims = s_slot_ranks + kThreads;
  if (tid < m) {
    const uint32_t word = kept_words[tid / kWarp];
    const uint32_t bit = tid % kWarp;
    const uint32_t slot = before[tid / kWarp] + __popc(word & ((1u << bit) - 1));
    if ((word >> bit) & 1u && slot < f.limit) {
      f.out[kHeaderWords + slot] = s.order[tid];
      if constexpr (kMethod == Method::kWeighted) s_slot_ranks[slot] = tid;
    }
  }
  if constexpr (kMethod == Method::kWeighted) {
    for (uint32_t w = warp; w < words; w += kWarps) {
      claim_word<kStride>(s.mask, s.within, kept_words, before, m, f.limit, w, s_claims);
    }
    __syncthreads();
    if (tid < m) {  // what the host merges points with (merged_points)
      f.order[tid] = s.order[tid];
      f.clusters[tid] = s_claims[tid];
    }
    for (uint32_t slot = warp; slot < kept_count; slot += kWarps) {
      merge_slot<kStride>(f, s.mask, s.within, s_claims, s.boxes, s.scores, s.order, m,
                          s_slot_ranks[slot], slot);
    }
  }
}

// A frame of at most kThreads candidates, its pair tests spread over gridDim.x blocks: each
// block ranks the frame (the same ranking in each), marks its share of the matrix, and the last
// to arrive settles the kept set from the whole matrix and writes it out.
template <Method kMethod, int kThreads>
__global__ void __launch_bounds__(kThreads) small_frame_kernel(const FrameArgs *frames) {
  __shared__ uint64_t s_exchange[kThreads];
  __shared__ uint32_t s_kept[kRowWords];    // per 32 ranks: the kept ones
  __shared__ uint32_t s_before[kRowWords];  // kept ranks before them
  __shared__ uint32_t s_kept_count;         // kept indices written, at most `limit`
  __shared__ bool s_last;
  extern __shared__ float4 s_dynamic[];
  const SmallShared<kThreads> s(s_dynamic);

  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const uint32_t tid = threadIdx.x;
  const uint32_t lane = tid % kWarp;
  const SmallRanking ranking = rank_small_frame<kThreads>(f, s_exchange);
  const uint32_t m = ranking.ranked;
  if (tid < m) {
    const auto p = static_cast<uint32_t>(ranking.key);
    s.order[tid] = p;
    s.boxes[tid] = f.boxes[p];
    // Matrix compares keys; weighted adds up the scores as the candidates have them.
    s.scores[tid] = kMethod == Method::kWeighted ? f.scores[p] : key_of(ranking.key);
    s.classes[tid] = class_of(f, p);
  }
  __syncthreads();
  mark_pairs<kMethod, kThreads>(f, m, s);

  __threadfence();  // this block's words, before its arrival
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(&f.header[kArrived], 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // every other block's words, after their arrivals

  const uint32_t own_word = load_matrix<kThreads>(f.predecessors, m, s);
  if (tid < kRowWords) s_kept[tid] = 0;
  __syncthreads();
  settle_kept<kMethod, kThreads>(s, m, own_word, s_kept);
  __syncthreads();

  // The counters, then the kept indices.
  if (tid / kWarp == 0) {
    const uint32_t words = words_of(m);
    const uint32_t here = lane < words ? __popc(s_kept[lane]) : 0;
    const uint32_t through = warp_inclusive_sum(here, lane);
    s_before[lane] = through - here;
    const uint32_t kept = min(__shfl_sync(kFullMask, through, kWarp - 1), f.limit);
    write_counters(f, ranking, kept);
    if (lane == 0) s_kept_count = kept;
  }
  __syncthreads();
  write_kept<kMethod, kThreads>(f, s, m, s_kept, s_before, s_kept_count, s_exchange);
}

// The lowest of the warp's values, in every lane.
__device__ uint32_t warp_min(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(kFullMask, v);
#else
#pragma unroll
  for (uint32_t offset = kWarp / 2; offset > 0; offset /= 2) {
    v = min(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
#endif
}

// The lowest of the warp's 64-bit keys: the high words first, then the low words of those equal.
__device__ uint64_t warp_min(uint64_t v) {
  const auto high = static_cast<uint32_t>(v >> 32);
  const uint32_t least = warp_min(high);
  return uint64_t{least} << 32 | warp_min(high == least ? static_cast<uint32_t>(v) : UINT32_MAX);
}

// Soft-NMS of a small frame, in one block of a thread per candidate: thread r keeps rank r's
// current score in a register. Each selection is the block's lowest (current score, index) key,
// agreed with one barrier (the warps' bests double-buffered); its owner writes it out and every
// other thread decays its own score against it, in the order soft_kernel and the CPU backend do.
// Bound by instructions: every warp takes part in every selection (H100, 1 000 candidates all
// selected: ~1 700 cycles a selection, 145 instructions a warp).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) small_soft_kernel(const FrameArgs *frames) {
  constexpr uint32_t kWarps = kThreads / kWarp;
  constexpr uint64_t kNone = ~uint64_t{0};
  __shared__ uint64_t s_exchange[kThreads];
  __shared__ float4 s_boxes[kThreads];
  __shared__ int32_t s_classes[kThreads];
  __shared__ uint16_t s_rank_of[kThreads];  // by candidate index
  __shared__ uint64_t s_best[2][kWarps];
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const uint32_t tid = threadIdx.x;
  const uint32_t lane = tid % kWarp;
  const uint32_t warp = tid / kWarp;
  const SmallRanking ranking = rank_small_frame<kThreads>(f, s_exchange);
  const auto p = static_cast<uint32_t>(ranking.key);
  bool live = tid < ranking.ranked;  // not selected, and at or above the score threshold
  float current = 0.0f;
  Box box{};
  int32_t cls = 0;
  if (live) {
    s_boxes[tid] = f.boxes[p];
    box = to_box(s_boxes[tid]);
    cls = class_of(f, p);
    s_classes[tid] = cls;
    s_rank_of[p] = static_cast<uint16_t>(tid);
    current = f.scores[p];  // as the candidate has it, -0.0 included
  }
  __syncthreads();
  uint32_t kept = 0;
  for (uint32_t round = 0; kept < f.limit; ++round) {
    const uint64_t best_here = warp_min(live ? rank_key(current + 0.0f, p) : kNone);
    if (lane == 0) s_best[round % 2][warp] = best_here;
    __syncthreads();
    const uint64_t best = warp_min(lane < kWarps ? s_best[round % 2][lane] : kNone);
    if (best == kNone) break;
    const uint32_t selected = s_rank_of[static_cast<uint32_t>(best)];
    if (tid == selected) {
      live = false;
      f.out[kHeaderWords + kept] = p;
      f.kept_boxes[kept] = s_boxes[tid];
      f.kept_scores[kept] = current;
      f.kept_classes[kept] = own_class(f, p);
    }
    ++kept;
    if (live && s_classes[selected] == cls) {
      // Most boxes are apart from the selected one: an overlap of 0 decays by exactly 1 (the
      // threshold is at least 0, and exp_nonpositive(-0) is 1), so its decay is skipped.
      const float o = overlap(f.overlap, to_box(s_boxes[selected]), box);
      if (o != 0.0f) {
        current = current * soft_decay(f.soft_decay, o, f.threshold, f.sigma);
        live = current >= f.score_threshold;
      }
    }
  }
  if (warp == 0) write_counters(f, ranking, kept);
}

template <Method kMethod, int kThreads>
void launch_one(const FrameArgs *frames, uint32_t count, uint32_t blocks, cudaStream_t stream) {
  if constexpr (kMethod == Method::kSoft) {
    small_soft_kernel<kThreads><<<dim3(1, 1, count), kThreads, 0, stream>>>(frames);
  } else {
    small_frame_kernel<kMethod, kThreads>
        <<<dim3(blocks, 1, count), kThreads, SmallLayout<kThreads>::kBytes, stream>>>(frames);
  }
}

template <Method kMethod>
void launch_method(const FrameArgs *frames, uint32_t count, uint32_t capacity, uint32_t blocks,
                   cudaStream_t stream) {
  switch (threads_for(capacity)) {
    case 256:
      launch_one<kMethod, 256>(frames, count, blocks, stream);
      break;
    case 512:
      launch_one<kMethod, 512>(frames, count, blocks, stream);
      break;
    default:
      launch_one<kMethod, 1024>(frames, count, blocks, stream);
  }
}

template <Method kMethod, int kThreads>
cudaError_t allow_shared() {
  return cudaFuncSetAttribute(small_frame_kernel<kMethod, kThreads>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(SmallLayout<kThreads>::kBytes));
}

}  // namespace

cudaError_t prepare_small_frames() {
  for (const cudaError_t e :
       {allow_shared<Method::kGreedy, 256>(), allow_shared<Method::kGreedy, 512>(),
        allow_shared<Method::kGreedy, 1024>(), allow_shared<Method::kMatrix, 256>(),
        allow_shared<Method::kMatrix, 512>(), allow_shared<Method::kMatrix, 1024>(),
        allow_shared<Method::kWeighted, 256>(), allow_shared<Method::kWeighted, 512>(),
        allow_shared<Method::kWeighted, 1024>()}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

uint32_t small_frame_blocks(uint32_t capacity, uint32_t most, uint32_t frames, int sms) {
  // Alone, a frame gets a warp per unit of pair tests: the blocks' sorts run side by side, so
  // more blocks shorten the pair tests and cost nothing else. In a batch, the frames share the
  // GPU: about two blocks per multiprocessor in all.
  const uint32_t warps = threads_for(capacity) / kWarp;
  const uint32_t alone = std::max(1u, (pair_units(most) + warps - 1) / warps);
  const uint32_t share = std::max(1u, (2 * static_cast<uint32_t>(sms) + frames - 1) / frames);
  return frames == 1 ? alone : std::min(alone, share);
}

cudaError_t launch_small_frames(const FrameArgs *frames, uint32_t count, Method method,
                                uint32_t capacity, uint32_t blocks, cudaStream_t stream) {
  switch (method) {
    case Method::kGreedy:
      launch_method<Method::kGreedy>(frames, count, capacity, blocks, stream);
      break;
    case Method::kMatrix:
      launch_method<Method::kMatrix>(frames, count, capacity, blocks, stream);
      break;
    case Method::kSoft:
      launch_method<Method::kSoft>(frames, count, capacity, blocks, stream);
      break;
    case Method::kWeighted:
      launch_method<Method::kWeighted>(frames, count, capacity, blocks, stream);
      break;
    case Method::kGroup:  // the grouping's own stages (group.h), never a small frame's kernel
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cudanms::detail
