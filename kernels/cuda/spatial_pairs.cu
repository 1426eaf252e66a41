// The pair stage of a large frame in spatial order. Testing every pair of ranks costs N²/2
// (5·10⁹ at 100 000), while a box meets only its neighbours. So:
//   bins    each ranked box goes into a bin: its size class (its area's power of two) and, below
//           it, the Morton code of its centre's cell in a grid of about most / 24 cells over the
//           eligible boxes' centres (their extent, from the classify kernel); one atomic per warp
//           and bin counts the bin and gives each box its place in it
//   starts  an exclusive scan of the bins' counts, by one block
//   order   each ranked box to its bin's start plus its place: boxes of a size, and neighbours,
//           become close in the order, so that a tile's bounds are little more than its boxes'
//   tiles   the ranked boxes and classes gathered in that order, and the bounding box and the
//           range of areas of each tile of 32 of them
//   list    a warp per tile a and 32 tiles b >= a lists, with a ballot, the tile pairs that can
//           meet (their bounds meet, and for IoU and DIoU their areas are close enough)
//   pairs   a warp per listed tile pair, spread over the GPU, tests the boxes of each tile that
//           meet the other tile: the earlier rank of a pair suppressing the later one is
//           appended to the later one's predecessor list (greedy) or counted (matrix), as
//           pairs.cu does in rank order.
// The order within a bin is nearly rank order, and may change from run to run; the result does
// not, as any order of the boxes gives the same pairs. A counting sort into bins replaced CUB's
// radix sort of 32-bit Morton keys: six launches, 60 us at 10 000 on an H100 (Nsight Compute), and
// a one-block radix sort of the same keys took 80 us, bound by one multiprocessor's shared memory.
// Skipping tiles that do not meet is exact because rule 4 (cudanms/nms.h) needs a positive
// intersection: greedy suppresses only above a threshold >= 0, which boxes apart never pass
// (IoU, IoMin and IoS are 0, DIoU below 0), and matrix at a threshold > 0. The intersection's
// sides are differences of min and max coordinates, monotone in them, so a pair inside two
// tiles whose bounds do not meet does not meet either, in float arithmetic too. With another
// threshold every tile meets every other: all pairs are tested, as before.
// IoU (and DIoU, which is at most IoU) is also at most the ratio of the smaller area to the
// larger, so tiles whose areas differ by more than the threshold allows are skipped too (with a
// margin far above the rounding of the overlap's few float operations).
#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>

#include "spatial_pairs.h"

namespace cudanms::detail {
namespace {

constexpr int kKeyThreads = 256;
constexpr int kTileWarps = 8;  // per block of the tiles and pairs kernels, one tile each
constexpr uint32_t kNoRank = UINT32_MAX;

// The 16 bits of v spread to the even bits of a word.
__device__ uint32_t spread_bits(uint32_t v) {
  v = (v | v << 8) & 0x00ff00ffu;
  v = (v | v << 4) & 0x0f0f0f0fu;
  v = (v | v << 2) & 0x33333333u;
  v = (v | v << 1) & 0x55555555u;
  return v;
}

// The size class of a box of area `area`: its power of two from 2^5 (and below) to 2^19 (and
// above), 0 to 14.
__device__ uint32_t size_class(float area) {
  const int exponent = static_cast<int>((__float_as_uint(area) >> 23) & 0xffu) - 127;
  return static_cast<uint32_t>(min(max(exponent - 5, 0), 14));
}

// The cell, 0 to `cells` - 1, of a centre at v on an axis whose centres lie in [least, most]:
// any value, a NaN from an infinite extent included, lands in some cell.
__device__ uint32_t cell_of(float v, float least, float most, uint32_t cells) {
  const float t = (v - least) / (most - least) * static_cast<float>(cells);
  return static_cast<uint32_t>(fminf(fmaxf(t, 0.0f), static_cast<float>(cells - 1)));
}

// Rank r (< m) goes into its bin and takes the next place there; the ranks of a warp that share
// a bin take theirs with one atomic, in rank order. Blocks start roughly in rank order too, so a
// bin holds its ranks nearly in order: in a pile of duplicates the first ranks, which suppress
// the rest, come first in the tiles, and so in the predecessor lists (in an order the atomics
// made at random, 20 000 identical boxes took 880 us against 593 us).
__global__ void __launch_bounds__(kKeyThreads)
    spatial_bins_kernel(const FrameArgs *frame, SpatialPairsBuffers b, uint32_t grid_bits) {
  const FrameArgs &f = *frame;
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r - threadIdx.x % kWarp >= m) return;  // the whole warp
  uint32_t bin = UINT32_MAX;                 // past m: no bin
  if (r < m) {
    const float4 box = f.rank_boxes[r];
    const float least_x = from_ordered_bits(~f.header[kLeastX]);
    const float most_x = from_ordered_bits(f.header[kMostX]);
    const float least_y = from_ordered_bits(~f.header[kLeastY]);
    const float most_y = from_ordered_bits(f.header[kMostY]);
    // The grid's 2 * grid_bits bits shared by the axes so that its cells are near square: 100
    // piles in a row 60 wide and 2 high shared bins pairwise on a square grid (1.18 ms, 1.02 ms
    // sorted by Morton keys of 14 bits an axis).
    const float aspect = 0.5f * log2f((most_x - least_x) / (most_y - least_y));
    const int shift = __float2int_rn(fminf(fmaxf(aspect, -float(grid_bits)), float(grid_bits)));
    const uint32_t bits_x = grid_bits + shift, bits_y = grid_bits - shift;
    const uint32_t x = cell_of(0.5f * box.x + 0.5f * box.z, least_x, most_x, 1u << bits_x);
    const uint32_t y = cell_of(0.5f * box.y + 0.5f * box.w, least_y, most_y, 1u << bits_y);
    // Morton over the bits both axes have, the longer axis' other bits above.
    const uint32_t both = min(bits_x, bits_y);
    const uint32_t low = (1u << both) - 1;
    const uint32_t cell = ((x >> both) | (y >> both)) << (2 * both) | spread_bits(x & low) << 1 |
                          spread_bits(y & low);
    bin = size_class(area(to_box(box))) << (2 * grid_bits) | cell;
  }
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t peers = __match_any_sync(kFullMask, bin);
  const uint32_t leader = __ffs(peers) - 1;
  uint32_t first = 0;
  if (lane == leader && r < m) first = atomicAdd(&b.bin_counts[bin], __popc(peers));
  first = __shfl_sync(kFullMask, first, leader);
  if (r < m) {
    b.bins[r] = bin;
    b.places[r] = first + __popc(peers & ((1u << lane) - 1));
  }
}

// The bins' starts: an exclusive scan of their counts, 4 096 bins at a time, 4 a thread (one
// 16-byte load and store each, coalesced). A thread scanning a run of 64 bins took 159 us at
// 65 536 bins, its loads 256 bytes apart across the warp; a warp scanning 2 048 bins 32 at a
// time, 21 us at 4 096.
constexpr int kStartThreads = 1024;
constexpr uint32_t kStartTile = 4 * kStartThreads;
__global__ void __launch_bounds__(kStartThreads)
    spatial_starts_kernel(SpatialPairsBuffers b, uint32_t bins) {
  using Scan = cub::BlockScan<uint32_t, kStartThreads>;
  __shared__ typename Scan::TempStorage temp;
  uint32_t before = 0;  // the bins of the tiles before
  for (uint32_t tile = 0; tile < bins; tile += kStartTile) {
    const uint32_t bin = tile + 4 * threadIdx.x;  // bins is a multiple of 4
    const uint4 c =
        bin < bins ? *reinterpret_cast<const uint4 *>(b.bin_counts + bin) : make_uint4(0, 0, 0, 0);
    uint32_t start = 0, total = 0;
    Scan(temp).ExclusiveSum(c.x + c.y + c.z + c.w, start, total);
    start += before;
    if (bin < bins) {
      *reinterpret_cast<uint4 *>(b.bin_starts + bin) =
          make_uint4(start, start + c.x, start + c.x + c.y, start + c.x + c.y + c.z);
    }
    before += total;
    __syncthreads();  // before the next tile's scan reuses temp
  }
}

// Rank r to its slot in the spatial order.
__global__ void __launch_bounds__(kKeyThreads)
    spatial_order_kernel(const FrameArgs *frame, SpatialPairsBuffers b) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= ranked_count(frame->header, frame->dmax)) return;
  b.ranks_out[b.bin_starts[b.bins[r]] + b.places[r]] = r;
}

// Slot s of the spatial order gets its rank's box and class; lane 0 of each warp writes its
// tile's bounds and range of areas, inverted (meeting nothing) where the tile holds no ranked box.
__global__ void __launch_bounds__(kTileWarps *kWarp)
    spatial_tiles_kernel(const FrameArgs *frame, SpatialPairsBuffers b, uint32_t most) {
  const uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= (most + kWarp - 1) / kWarp * kWarp) return;  // whole warps
  const FrameArgs &f = *frame;
  float4 bounds = make_float4(INFINITY, INFINITY, -INFINITY, -INFINITY);
  float2 areas = make_float2(INFINITY, -INFINITY);
  if (s < ranked_count(f.header, f.dmax)) {
    const uint32_t r = b.ranks_out[s];
    bounds = b.boxes[s] = f.rank_boxes[r];
    b.classes[s] = f.rank_classes[r];
    areas.x = areas.y = area(to_box(bounds));
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    bounds.x = fminf(bounds.x, __shfl_xor_sync(kFullMask, bounds.x, offset));
    bounds.y = fminf(bounds.y, __shfl_xor_sync(kFullMask, bounds.y, offset));
    bounds.z = fmaxf(bounds.z, __shfl_xor_sync(kFullMask, bounds.z, offset));
    bounds.w = fmaxf(bounds.w, __shfl_xor_sync(kFullMask, bounds.w, offset));
    areas.x = fminf(areas.x, __shfl_xor_sync(kFullMask, areas.x, offset));
    areas.y = fmaxf(areas.y, __shfl_xor_sync(kFullMask, areas.y, offset));
  }
  if (s % kWarp == 0) {
    b.tile_bounds[s / kWarp] = bounds;
    b.tile_areas[s / kWarp] = areas;
  }
}

// Whether boxes inside bounds `a` and `b` can intersect under the overlap's rule: its
// intersection sides (with IoS's one pixel added) computed on the bounds, which are at least
// those of any pair inside them.
__device__ bool bounds_meet(const float4 &a, const float4 &b, float pad) {
  return min_f(a.z, b.z) - max_f(a.x, b.x) + pad > 0.0f &&
         min_f(a.w, b.w) - max_f(a.y, b.y) + pad > 0.0f;
}

// What rule 4 lets the stage skip (see the top of this file): whether tiles that do not meet can
// be skipped, the pixel IoS adds to the intersection's sides, and whether tiles of areas too far
// apart can be skipped.
struct Culling {
  bool cull;
  float pad;
  bool by_areas;
  float threshold;

  // Whether no box of areas `a` (least, largest) can suppress one of areas `b`, or the reverse:
  // the smaller area over the larger is below the threshold less a margin of 1e-5 (the float
  // overlap exceeds the exact ratio by a few units in 2^-24 at most).
  __device__ bool areas_apart(float2 a, float2 b) const {
    const double limit = double{threshold} * (1.0 - 1e-5);
    return by_areas && (double{a.y} < limit * double{b.x} || double{b.y} < limit * double{a.x});
  }
  __device__ bool tiles_meet(float4 bounds_a, float2 areas_a, float4 bounds_b,
                             float2 areas_b) const {
    return !cull || (bounds_meet(bounds_a, bounds_b, pad) && !areas_apart(areas_a, areas_b));
  }
};
template <Method kMethod>
__device__ Culling culling_of(const FrameArgs &f) {
  const bool cull = kMethod == Method::kGreedy ? !(f.threshold < 0.0f) : !(f.threshold <= 0.0f);
  return {cull, f.overlap == Overlap::kIoS ? 1.0f : 0.0f,
          f.overlap == Overlap::kIoU || f.overlap == Overlap::kDIoU, f.threshold};
}

// Warp (a, g) lists the tiles b >= a of [32g, 32g + 32) that meet tile a, as a << 16 | b, in
// the frame's list of meeting tile pairs (its length in the header's kMeetings word).
template <Method kMethod>
__global__ void __launch_bounds__(kTileWarps *kWarp)
    spatial_meetings_kernel(const FrameArgs *frame, SpatialPairsBuffers b) {
  const FrameArgs &f = *frame;
  const uint32_t tiles = words_of(ranked_count(f.header, f.dmax));
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t a = blockIdx.x * kTileWarps + threadIdx.x / kWarp;
  const uint32_t t = blockIdx.y * kWarp + lane;
  if (a >= tiles || blockIdx.y * kWarp + kWarp <= a) return;  // the whole warp
  const Culling rule = culling_of<kMethod>(f);
  const bool meets =
      t >= a && t < tiles &&
      rule.tiles_meet(b.tile_bounds[a], b.tile_areas[a], b.tile_bounds[t], b.tile_areas[t]);
  const uint32_t votes = __ballot_sync(kFullMask, meets);
  if (votes == 0) return;
  uint32_t slot = 0;
  if (lane == 0) slot = atomicAdd(&f.header[kMeetings], __popc(votes));
  slot = __shfl_sync(kFullMask, slot, 0) + __popc(votes & ((1u << lane) - 1));
  if (meets) b.meetings[slot] = a << 16 | t;
}

// Rank `rank`'s suppressors among `ranks` (bit k of `from`: ranks[k] suppresses it), appended to
// its list (greedy; past kMaxPredecessors only counted) or counted (matrix: one settles it).
template <Method kMethod>
__device__ __forceinline__ void append_suppressors(const FrameArgs &f, uint32_t rank, uint32_t from,
                                                   const uint32_t *ranks) {
  if (from == 0) return;
  if (kMethod == Method::kMatrix) {
    atomicAdd(&f.counts[rank], 1u);
    return;
  }
  uint32_t slot = atomicAdd(&f.counts[rank], __popc(from));
  uint32_t *row = f.predecessors + size_t{rank} * kMaxPredecessors;
  for (; from != 0 && slot < kMaxPredecessors; from &= from - 1, ++slot) {
    row[slot] = ranks[__ffs(from) - 1];
  }
}

// Each warp takes meeting tile pairs (a, b) from the list in turn; lane l holds the slot
// 32a + l (p) and the slot 32b + l (q), and tests them if they meet the other tile. Before each
// tile pair the warp reads the counts of its 64 ranks once: a greedy rank with an overflowing list,
// or a matrix rank already suppressed, is settled, and its pairs are skipped (an early or late read
// only costs work), so that piles of identical boxes do not cost N² atomics.
template <Method kMethod>
__global__ void __launch_bounds__(kTileWarps *kWarp)
    spatial_pairs_kernel(const FrameArgs *frame, SpatialPairsBuffers b) {
  __shared__ float4 s_boxes[kTileWarps][kWarp];  // tile a's, read by every lane in turn
  __shared__ float s_scores[kTileWarps][kWarp];
  __shared__ int32_t s_classes[kTileWarps][kWarp];
  __shared__ uint32_t s_ranks[kTileWarps][kWarp];
  __shared__ uint32_t s_q_ranks[kTileWarps][kWarp];  // tile b's, for tile a's appends
  const FrameArgs f = *frame;                        // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t meetings = f.header[kMeetings];
  const uint32_t warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const Culling rule = culling_of<kMethod>(f);
  const uint32_t settled_by = kMethod == Method::kGreedy ? kMaxPredecessors : 0;
  auto settled = [&](uint32_t rank) {
    return rank == kNoRank || cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(f.counts[rank])
                                      .load(cuda::memory_order_relaxed) > settled_by;
  };
  for (uint32_t e = blockIdx.x * kTileWarps + warp; e < meetings; e += gridDim.x * kTileWarps) {
    const uint32_t pair = b.meetings[e];
    const uint32_t a = pair >> 16, tile = pair & 0xffffu;
    const uint32_t p = a * kWarp + lane, q = tile * kWarp + lane;
    const float4 p_box = p < m ? b.boxes[p] : make_float4(0, 0, 0, 0);
    const float4 q_box4 = q < m ? b.boxes[q] : make_float4(0, 0, 0, 0);
    // Only the boxes that meet the other tile take part, tested as tiles are: a box of tile a
    // that does not meet tile b's bounds and areas meets none of its boxes.
    const float p_area = area(to_box(p_box)), q_area = area(to_box(q_box4));
    const bool p_in = p < m && rule.tiles_meet(p_box, make_float2(p_area, p_area),
                                               b.tile_bounds[tile], b.tile_areas[tile]);
    const bool q_in = q < m && rule.tiles_meet(q_box4, make_float2(q_area, q_area),
                                               b.tile_bounds[a], b.tile_areas[a]);
    const uint32_t p_in_mask = __ballot_sync(kFullMask, p_in);
    if (p_in_mask == 0 || !__any_sync(kFullMask, q_in)) continue;
    const uint32_t p_rank = p_in ? b.ranks_out[p] : kNoRank;
    const uint32_t q_rank = q_in ? b.ranks_out[q] : kNoRank;
    const bool q_settled = settled(q_rank);
    const uint32_t p_settled = __ballot_sync(kFullMask, settled(p_rank));
    if (__all_sync(kFullMask, q_settled) && p_settled == kFullMask) continue;
    const Box q_box = to_box(q_box4);
    const int32_t q_class = q_in ? b.classes[q] : 0;
    const float q_score = kMethod == Method::kMatrix && q_in ? f.rank_scores[q_rank] : 0.0f;
    __syncwarp();  // the previous tile pair is done with the warp's shared slots
    s_boxes[warp][lane] = p_box;
    s_classes[warp][lane] = p_in ? b.classes[p] : 0;
    s_ranks[warp][lane] = p_rank;
    if (kMethod == Method::kMatrix) s_scores[warp][lane] = p_in ? f.rank_scores[p_rank] : 0.0f;
    s_q_ranks[warp][lane] = q_rank;
    __syncwarp();
    uint32_t q_from = 0;  // bit k: p_k suppresses q
    uint32_t p_from = 0;  // lane k: bit l, q_l suppresses p_k
    for (uint32_t left = p_in_mask; left != 0; left &= left - 1) {
      const uint32_t k = __ffs(left) - 1;
      const uint32_t k_rank = s_ranks[warp][k];
      const bool q_later = k_rank < q_rank;
      bool suppresses = false;
      if (k_rank != kNoRank && q_rank != kNoRank && (tile != a || k < lane) &&
          s_classes[warp][k] == q_class && !(q_later ? q_settled : (p_settled >> k & 1u))) {
        const Box k_box = to_box(s_boxes[warp][k]);
        const Box &earlier = q_later ? k_box : q_box;
        const Box &later = q_later ? q_box : k_box;
        if (kMethod == Method::kGreedy) {
          suppresses = greedy_suppresses(f.overlap, f.threshold, earlier, later);
        } else {
          const float k_score = s_scores[warp][k];
          suppresses =
              matrix_suppresses(f.overlap, f.threshold, earlier, q_later ? k_score : q_score, later,
                                q_later ? q_score : k_score);
        }
      }
      if (suppresses && q_later) q_from |= 1u << k;
      const uint32_t votes = __ballot_sync(kFullMask, suppresses && !q_later);
      if (lane == k) p_from = votes;
    }
    // Each lane appends to its two ranks: its q's suppressors from tile a, its p's from tile b.
    append_suppressors<kMethod>(f, q_rank, q_from, s_ranks[warp]);
    append_suppressors<kMethod>(f, p_rank, p_from, s_q_ranks[warp]);
  }
}

template <Method kMethod>
cudaError_t launch_tile_pairs(const FrameArgs *frame, const SpatialPairsBuffers &b, uint32_t tiles,
                              int sms, cudaStream_t stream) {
  const dim3 grid((tiles + kTileWarps - 1) / kTileWarps, (tiles + kWarp - 1) / kWarp);
  spatial_meetings_kernel<kMethod><<<grid, kTileWarps * kWarp, 0, stream>>>(frame, b);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  // Enough warps to fill the GPU; each takes tile pairs from the list until it is done.
  const uint32_t blocks = std::min<uint32_t>(
      static_cast<uint32_t>(sms) * 8, (tiles * (tiles + 1) / 2 + kTileWarps - 1) / kTileWarps);
  spatial_pairs_kernel<kMethod><<<blocks, kTileWarps * kWarp, 0, stream>>>(frame, b);
  return cudaGetLastError();
}

}  // namespace

uint32_t spatial_grid_bits(uint32_t most) {
  // About 24 boxes a cell: sliding windows of objects 24 to 200 px wide fall in some 7 size
  // classes, so a bin holds a few boxes and a tile of 32 some neighbouring bins. With 96 boxes a
  // cell, 100 piles of 500 identical boxes took 1.39 ms against 1.03 ms sorted by 32-bit keys:
  // piles sharing a bin mix in its tiles.
  uint32_t bits = 1;
  while (bits < kMaxSpatialGridBits && (1u << (2 * bits + 2)) * 24u <= most) ++bits;
  return bits;
}

cudaError_t launch_spatial_pairs(const FrameArgs *frame, Method method, uint32_t most, int sms,
                                 const SpatialPairsBuffers &b, cudaStream_t stream) {
  const uint32_t tiles = spatial_tiles(most);
  if (tiles > kMaxSpatialTiles) return cudaErrorInvalidValue;
  const uint32_t grid_bits = spatial_grid_bits(most);
  const uint32_t bins = 16u << (2 * grid_bits);
  cudaError_t status = cudaMemsetAsync(b.bin_counts, 0, bins * sizeof(uint32_t), stream);
  if (status != cudaSuccess) return status;
  const uint32_t blocks = (most + kKeyThreads - 1) / kKeyThreads;
  spatial_bins_kernel<<<blocks, kKeyThreads, 0, stream>>>(frame, b, grid_bits);
  spatial_starts_kernel<<<1, kStartThreads, 0, stream>>>(b, bins);
  spatial_order_kernel<<<blocks, kKeyThreads, 0, stream>>>(frame, b);
  spatial_tiles_kernel<<<(tiles + kTileWarps - 1) / kTileWarps, kTileWarps * kWarp, 0, stream>>>(
      frame, b, most);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  return method == Method::kGreedy
             ? launch_tile_pairs<Method::kGreedy>(frame, b, tiles, sms, stream)
             : launch_tile_pairs<Method::kMatrix>(frame, b, tiles, sms, stream);
}

}  // namespace cudanms::detail
