// Method::kGroup on the device (group.h).
#include <cub/device/device_radix_sort.cuh>

#include "common/group.h"
#include "group.h"
#include "output.h"

namespace cudanms::detail {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kTile = 64;  // the all-pairs kernel's tiles: kTile ranks by kTile ranks

__device__ inline GroupRect to_rect(int4 v) { return {v.x, v.y, v.z, v.w}; }

// The root of v's tree, halving the path on the way: a parent only ever moves to an ancestor
// (unite hooks roots alone), so racing halvings and hooks leave a valid forest.
__device__ uint32_t find_root(volatile uint32_t *parents, uint32_t v) {
  uint32_t next;
  while ((next = parents[v]) != v) {
    const uint32_t grand = parents[next];
    if (grand != next) parents[v] = grand;
    v = next;
  }
  return v;
}

// Joins the trees of a and b, the larger root hooked under the smaller: every root is its
// tree's best-ranked member, whatever order the pairs come in.
__device__ void unite(uint32_t *parents, uint32_t a, uint32_t b) {
  while (true) {
    a = find_root(parents, a);
    b = find_root(parents, b);
    if (a == b) return;
    if (a > b) {
      const uint32_t t = a;
      a = b;
      b = t;
    }
    if (atomicCAS(&parents[b], b, a) == b) return;
  }
}

__global__ void prepare_kernel(const FrameArgs *frame, GroupBuffers g, uint32_t most) {
  const FrameArgs f = *frame;
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r == 0) g.survivors[most] = 0;
  if (r >= most) return;
  if (r < ranked_count(f.header, f.dmax)) {
    const GroupRect rect = group_rect(to_box(f.rank_boxes[r]));
    g.rects[r] = make_int4(rect.x, rect.y, rect.w, rect.h);
    g.keys[r] = static_cast<uint32_t>(rect.x) ^ 0x80000000u;  // x in unsigned order
  } else {
    g.keys[r] = UINT32_MAX;  // after every rank: x is at most 2^24
  }
  g.ranks[r] = r;
  g.parents[r] = r;
  g.members[r] = 0;
  g.kept[r] = 0;
  for (int k = 0; k < 4; ++k) g.sums[4 * size_t{r} + k] = 0;
}

__device__ inline bool joins(const FrameArgs &f, const GroupBuffers &g, uint32_t a, uint32_t b,
                             const GroupRect &rect_a) {
  return f.rank_classes[a] == f.rank_classes[b] &&
         group_similar(rect_a, to_rect(g.rects[b]), f.group_eps);
}

// Every pair of a tile of rows and a tile of columns above the diagonal.
__global__ void __launch_bounds__(kThreads)
    all_pairs_kernel(const FrameArgs *frame, GroupBuffers g) {
  const FrameArgs f = *frame;
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  if (blockIdx.x < blockIdx.y || col0 >= m) return;
  __shared__ int4 s_rows[kTile], s_cols[kTile];
  __shared__ int32_t s_row_classes[kTile], s_col_classes[kTile];
  for (uint32_t k = threadIdx.x; k < kTile; k += blockDim.x) {
    if (row0 + k < m) {
      s_rows[k] = g.rects[row0 + k];
      s_row_classes[k] = f.rank_classes[row0 + k];
    }
    if (col0 + k < m) {
      s_cols[k] = g.rects[col0 + k];
      s_col_classes[k] = f.rank_classes[col0 + k];
    }
  }
  __syncthreads();
  for (uint32_t k = threadIdx.x; k < kTile * kTile; k += blockDim.x) {
    const uint32_t a = k / kTile, b = k % kTile;
    const uint32_t i = row0 + a, j = col0 + b;
    if (j <= i || j >= m) continue;
    if (s_row_classes[a] == s_col_classes[b] &&
        group_similar(to_rect(s_rows[a]), to_rect(s_cols[b]), f.group_eps)) {
      unite(g.parents, i, j);
    }
  }
}

// A thread per rank in x order: the ranks after it whose x is within its reach.
__global__ void __launch_bounds__(kThreads)
    sweep_pairs_kernel(const FrameArgs *frame, GroupBuffers g) {
  const FrameArgs f = *frame;
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= m) return;
  const uint32_t rank_a = g.sorted_ranks[a];
  const GroupRect rect_a = to_rect(g.rects[rank_a]);
  const double reach = group_reach(rect_a, f.group_eps);
  for (uint32_t b = a + 1; b < m; ++b) {
    const auto x = static_cast<int32_t>(g.sorted_keys[b] ^ 0x80000000u);
    if (x - rect_a.x > reach) break;
    const uint32_t rank_b = g.sorted_ranks[b];
    if (joins(f, g, rank_a, rank_b, rect_a)) unite(g.parents, rank_a, rank_b);
  }
}

__global__ void sums_kernel(const FrameArgs *frame, GroupBuffers g) {
  const FrameArgs f = *frame;
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= ranked_count(f.header, f.dmax)) return;
  const uint32_t root = find_root(g.parents, r);
  const int4 rect = g.rects[r];
  atomicAdd(&g.members[root], 1u);
  unsigned long long *sums = g.sums + 4 * size_t{root};
  atomicAdd(&sums[0], static_cast<unsigned long long>(static_cast<long long>(rect.x)));
  atomicAdd(&sums[1], static_cast<unsigned long long>(static_cast<long long>(rect.y)));
  atomicAdd(&sums[2], static_cast<unsigned long long>(static_cast<long long>(rect.z)));
  atomicAdd(&sums[3], static_cast<unsigned long long>(static_cast<long long>(rect.w)));
}

// The classes above the threshold: their means, listed as survivors (in any order: which one
// holds which does not depend on it).
__global__ void classes_kernel(const FrameArgs *frame, GroupBuffers g, uint32_t most) {
  const FrameArgs f = *frame;
  const uint32_t min_neighbors = f.min_neighbors;
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= ranked_count(f.header, f.dmax) || g.parents[r] != r || g.members[r] <= min_neighbors)
    return;
  const unsigned long long *s = g.sums + 4 * size_t{r};
  const GroupRect mean =
      group_mean(static_cast<long long>(s[0]), static_cast<long long>(s[1]),
                 static_cast<long long>(s[2]), static_cast<long long>(s[3]), g.members[r]);
  g.means[r] = make_int4(mean.x, mean.y, mean.w, mean.h);
  g.survivors[atomicAdd(&g.survivors[most], 1u)] = r;
}

// A thread per survivor: kept unless another survivor of its class holds it.
__global__ void holds_kernel(const FrameArgs *frame, GroupBuffers g, uint32_t most) {
  const FrameArgs f = *frame;
  const uint32_t count = g.survivors[most];
  const uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= count) return;
  const uint32_t r1 = g.survivors[s];
  const GroupRect rect1 = to_rect(g.means[r1]);
  const uint32_t n1 = g.members[r1];
  const int32_t class1 = f.rank_classes[r1];
  bool held = false;
  for (uint32_t t = 0; t < count && !held; ++t) {
    const uint32_t r2 = g.survivors[t];
    held = t != s && f.rank_classes[r2] == class1 &&
           group_holds(to_rect(g.means[r2]), g.members[r2], rect1, n1, f.group_eps);
  }
  g.kept[r1] = held ? 0 : 1;
}

// The kept classes in rank order with their values; with min_neighbors 0, every rank.
__global__ void __launch_bounds__(kOutputThreads)
    group_output_kernel(const FrameArgs *frame, GroupBuffers g) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  const uint32_t min_neighbors = f.min_neighbors;
  __shared__ OutputScan::TempStorage scan;
  const uint32_t m = ranked_count(f.header, f.dmax);
  auto is_kept = [&](uint32_t r) { return min_neighbors == 0 || g.kept[r] != 0; };
  copy_counters(f);
  const uint32_t kept = block_prefix_sum(
      m, scan, [&](uint32_t r) { return is_kept(r) ? 1u : 0u; },
      [&](uint32_t r, uint32_t slot) {
        if (!is_kept(r) || slot >= f.limit) return;
        write_kept(f, slot, r);
        const GroupRect rect =
            min_neighbors == 0 ? group_rect(to_box(f.rank_boxes[r])) : to_rect(g.means[r]);
        const Box box = group_box(rect);
        const uint32_t p = f.order[r];
        f.kept_boxes[slot] = make_float4(box.x1, box.y1, box.x2, box.y2);
        f.kept_scores[slot] = f.scores[p];
        f.kept_classes[slot] = own_class(f, p);
        f.kept_neighbours[slot] = min_neighbors == 0 ? 0 : g.members[r] - 1;
      });
  write_kept_count(f, kept);
}

uint32_t blocks_for(uint32_t n) { return (n + kThreads - 1) / kThreads; }

}  // namespace

cudaError_t group_sort_temp_bytes(uint32_t most, size_t *bytes, cudaStream_t stream) {
  *bytes = 0;
  return cub::DeviceRadixSort::SortPairs(
      nullptr, *bytes, static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
      static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
      static_cast<int>(most), 0, 32, stream);
}

cudaError_t launch_group(const FrameArgs *frame, uint32_t most, bool grouping,
                         const GroupBuffers &g, cudaStream_t stream) {
  if (grouping) {
    prepare_kernel<<<blocks_for(most), kThreads, 0, stream>>>(frame, g, most);
    cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    if (most <= kGroupAllPairsMax) {
      const uint32_t tiles = (most + kTile - 1) / kTile;
      all_pairs_kernel<<<dim3(tiles, tiles), kThreads, 0, stream>>>(frame, g);
    } else {
      size_t temp_bytes = g.temp_bytes;
      error =
          cub::DeviceRadixSort::SortPairs(g.temp, temp_bytes, g.keys, g.sorted_keys, g.ranks,
                                          g.sorted_ranks, static_cast<int>(most), 0, 32, stream);
      if (error != cudaSuccess) return error;
      sweep_pairs_kernel<<<blocks_for(most), kThreads, 0, stream>>>(frame, g);
    }
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    sums_kernel<<<blocks_for(most), kThreads, 0, stream>>>(frame, g);
    classes_kernel<<<blocks_for(most), kThreads, 0, stream>>>(frame, g, most);
    holds_kernel<<<blocks_for(most), kThreads, 0, stream>>>(frame, g, most);
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  group_output_kernel<<<1, kOutputThreads, 0, stream>>>(frame, g);
  return cudaGetLastError();
}

}  // namespace cudanms::detail
