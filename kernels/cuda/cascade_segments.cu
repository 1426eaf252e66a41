// The cascade's segments of stages (cascade_stages.h): segment 1 over every window, then the
// windows alive after each segment run through the next, a group of lanes a window. The
// arithmetic is common/cascade_eval.h's, the CPU twin's.
#include <type_traits>

#include "cuda/cascade_stages.h"

namespace cudanms::cascade::detail {
namespace {

// tree_leaf of a stump.
__device__ float stump_leaf(const HaarStump &stump, const int32_t *sum, const int32_t *tilted,
                            float norm) {
  const float value = haar_feature(stump.feature, sum, tilted, norm);
  return static_cast<double>(value) < static_cast<double>(stump.threshold) ? stump.left
                                                                           : stump.right;
}

// run_stages over a StumpStage, the same arithmetic in the same order: unrolled, so that every
// field is read at an offset known to the compiler, as an operand.
__device__ bool stump_stage_passes(const StumpStage &stage, const int32_t *sum,
                                   const int32_t *tilted, float norm) {
  double weight = 0;
#pragma unroll
  for (int t = 0; t < kMaxParamStumps; ++t) {
    if (t == stage.count) break;
    weight += static_cast<double>(stump_leaf(stage.stumps[t], sum, tilted, norm));
  }
  return !(weight < static_cast<double>(stage.threshold));
}

// Segment 1 over every window of every level, a block a tile of kTileRows x kTileCols windows of
// one level: a block finds its level once, a thread its window with no search or division, and
// a warp's windows are neighbours of one row (a window a thread over all levels spent a binary
// search, a division and the level's 64 bytes on each). Status 0: evaluated and failed the first
// stage (OpenCV then skips the next window of the row); 1: flat or failed a later stage; 2:
// alive, with its normalisation factor in norms.
__global__ void __launch_bounds__(kThreads)
    first_segment(CascadeView c, const __grid_constant__ StumpStage stumps,
                  const DeviceLevel *levels, int level_count, int stride, const int32_t *sum,
                  const int32_t *sqsum, const int32_t *tilted, int end, uint8_t *status,
                  float *norms) {
  const DeviceLevel level =
      levels[find_level(levels, level_count, &DeviceLevel::first_tile, blockIdx.x)];
  const int tile = static_cast<int>(blockIdx.x) - level.first_tile;
  const int across = tiles_across(level.cols);
  const int col = tile % across * kTileCols + static_cast<int>(threadIdx.x) % kTileCols;
  const int row = tile / across * kTileRows + static_cast<int>(threadIdx.x) / kTileCols;
  if (col >= level.cols || row >= level.rows) return;
  const int64_t i = level.first_window + static_cast<int64_t>(row) * level.cols + col;
  const int64_t at =
      level.origin + static_cast<int64_t>(row * level.step) * stride + col * level.step;
  const int32_t *window_sum = window_in(sum, at);
  float norm = 1.f;
  uint8_t s = 1;
  if (c.is_lbp || haar_window_norm(c, window_sum, sqsum + at, &norm)) {
    if (stumps.count > 0) {
      s = stump_stage_passes(stumps, window_sum, window_in(tilted, at), norm) ? 2 : 0;
    } else {
      double weight;
      const int failed = run_stages(c, window_sum, window_in(tilted, at), norm, 0, end, &weight);
      s = failed == 0 ? 0 : failed < end ? 1 : 2;
    }
  }
  status[i] = s;
  if (s == 2) norms[i] = norm;  // the walk reads it for the windows that go on only
}

__device__ void append_final(const Finals &f, const DeviceLevel &level, int x, int y,
                             double score) {
  float4 box;
  if (!window_box(level, x, y, f.image_width, f.image_height, &box) ||
      score < f.frames[level.frame].min_score)
    return;
  const int64_t i =
      level.first_window + static_cast<int64_t>(y / level.step) * level.cols + x / level.step;
  f.list[level.frame * f.per_frame + atomicAdd(f.counts + level.frame, 1u)] =
      Final{static_cast<uint32_t>(i), static_cast<float>(score)};
}

// A stage for a window on the G lanes of its group: the lanes walk the stage's trees in
// parallel. Where the stage sums are exact in any order (stage_sums_exact), each lane adds its
// own leaves and the lanes' sums meet in a butterfly, every lane with the total; else the leaves
// go to the group's `mine` in shared memory and its first lane adds them in tree order. Either
// way OpenCV's double sum, bit for bit, on every lane of the group.
template <int G>
__device__ double stage_sum(const CascadeView &c, const HaarStump *stumps, const StageView &stage,
                            const int32_t *sum, const int32_t *tilted, float norm, int sub,
                            unsigned mask, float *mine) {
  auto leaf = [&](int t) {
    const int tree = stage.first_tree + t;
    return stumps ? stump_leaf(load_record(stumps + tree), sum, tilted, norm)
                  : tree_leaf(c, load_record(c.trees + tree), sum, tilted, norm);
  };
  if (c.exact_stage_sums) {
    double part = 0;
    for (int t = sub; t < stage.trees; t += G) part += static_cast<double>(leaf(t));
#pragma unroll
    for (int lanes = G / 2; lanes > 0; lanes /= 2) part += __shfl_xor_sync(mask, part, lanes, G);
    return part;
  }
  for (int t = sub; t < stage.trees; t += G) mine[t] = leaf(t);
  __syncwarp(mask);
  double weight = 0;
  if (sub == 0) {
    for (int t = 0; t < stage.trees; ++t) weight += static_cast<double>(mine[t]);
  }
  weight = __shfl_sync(mask, weight, 0, G);
  __syncwarp(mask);
  return weight;
}

// The lanes of this thread's group (threads threadIdx.x / G * G on) as a warp mask.
template <int G>
__device__ unsigned group_mask() {
  return G == 32 ? kFullMask : ((1u << G) - 1) << (threadIdx.x % 32 / G * G);
}

// A segment before the last, stages [first, end): a block takes kThreads / G windows of the queue
// and runs them stage by stage, the survivors of each stage packed to the front in shared
// memory (in order) before the next, so its warps stay full as windows fail; the survivors of
// the segment join the next queue with one atomic a block. (Each group running its window's
// stages alone kept a warp until its deepest window was done: a 2-lane warp's 16 windows fail at
// different stages, and its lanes were 48 % busy over stages 4-7. A launch a stage keeps them
// busy too but each waits for the one before.)
template <int G>
__global__ void __launch_bounds__(kThreads)
    middle_segment(CascadeView c, const HaarStump *stumps, const DeviceLevel *levels, int stride,
                   const int32_t *sum, const int32_t *tilted, int first, int end,
                   const QueueEntry *in, const uint32_t *in_count, QueueEntry *out,
                   uint32_t *out_count, int max_trees) {
  constexpr int kGroups = kThreads / G;
  __shared__ QueueEntry live[kGroups];
  __shared__ uint32_t kept_by_warp[kWarpsPerBlock];
  __shared__ uint32_t block_base;
  extern __shared__ float leaves[];
  const int group = static_cast<int>(threadIdx.x) / G, sub = static_cast<int>(threadIdx.x) % G;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const unsigned mask = group_mask<G>();
  float *mine = leaves + group * max_trees;
  const uint32_t n = *in_count;
  for (uint32_t start = blockIdx.x * kGroups; start < n; start += gridDim.x * kGroups) {
    uint32_t live_n = min(n - start, static_cast<uint32_t>(kGroups));
    if (threadIdx.x < live_n) live[threadIdx.x] = in[start + threadIdx.x];
    __syncthreads();
    for (int si = first; si < end && live_n > 0; ++si) {
      QueueEntry e{};
      bool keep = false;
      if (group < static_cast<int>(live_n)) {
        e = live[group];
        const int64_t at = levels[e.level].origin + static_cast<int64_t>(e.y) * stride + e.x;
        const StageView stage = load_record(c.stages + si);
        const double weight = stage_sum<G>(c, stumps, stage, window_in(sum, at),
                                           window_in(tilted, at), e.norm, sub, mask, mine);
        keep = sub == 0 && !(weight < static_cast<double>(stage.threshold));
      }
      const uint32_t kept = __ballot_sync(kFullMask, keep);
      if (lane == 0) kept_by_warp[warp] = __popc(kept);
      __syncthreads();  // every group has read its window before the survivors move
      uint32_t place = __popc(kept & ((1u << lane) - 1)), total = 0;
      for (int w = 0; w < kWarpsPerBlock; ++w) {
        if (w < warp) place += kept_by_warp[w];
        total += kept_by_warp[w];
      }
      if (keep) live[place] = e;
      live_n = total;
      __syncthreads();
    }
    if (live_n > 0) {
      if (threadIdx.x == 0) block_base = atomicAdd(out_count, live_n);
      __syncthreads();
      if (threadIdx.x < live_n) out[block_base + threadIdx.x] = live[threadIdx.x];
    }
    __syncthreads();  // the next windows overwrite live
  }
}

// The last segment, stages [first, end), a group of G lanes per window (a warp: its few deep
// windows are each a chain of stages); the windows that pass go to the output.
template <int G>
__global__ void last_segment(CascadeView c, const HaarStump *stumps, const DeviceLevel *levels,
                             int stride, const int32_t *sum, const int32_t *tilted, int first,
                             int end, const QueueEntry *in, const uint32_t *in_count,
                             OutWindow *windows, uint32_t *window_count, Finals finals,
                             int max_trees) {
  extern __shared__ float leaves[];
  const int sub = threadIdx.x % G;
  const unsigned mask = group_mask<G>();
  float *mine = leaves + (threadIdx.x / G) * max_trees;
  const uint32_t n = *in_count;
  const uint32_t groups = gridDim.x * (blockDim.x / G);
  for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) / G; i < n; i += groups) {
    const QueueEntry e = in[i];
    const int64_t at = levels[e.level].origin + static_cast<int64_t>(e.y) * stride + e.x;
    const int32_t *window_sum = window_in(sum, at), *window_tilted = window_in(tilted, at);
    bool alive = true;
    double weight = 0;
    for (int si = first; si < end && alive; ++si) {
      const StageView stage = load_record(c.stages + si);
      weight = stage_sum<G>(c, stumps, stage, window_sum, window_tilted, e.norm, sub, mask, mine);
      alive = !(weight < static_cast<double>(stage.threshold));
    }
    if (!alive || sub != 0) continue;
    if (finals.list) {
      append_final(finals, levels[e.level], e.x, e.y, weight);
    } else {
      windows[atomicAdd(window_count, 1u)] = OutWindow{e.level, e.x, e.y, 0, weight};
    }
  }
}

// Calls launch(std::integral_constant<int, G>) for a window's group of G lanes: 2, 4, 8, 16 or
// 32 (any other group: 32), the segment kernels' instances.
template <typename Launch>
void with_lanes(int group, Launch launch) {
  switch (group) {
    case 2:
      return launch(std::integral_constant<int, 2>{});
    case 4:
      return launch(std::integral_constant<int, 4>{});
    case 8:
      return launch(std::integral_constant<int, 8>{});
    case 16:
      return launch(std::integral_constant<int, 16>{});
    default:
      return launch(std::integral_constant<int, 32>{});
  }
}

}  // namespace

std::vector<HaarStump> haar_stumps(const Model &model, const std::vector<HaarOffsets> &haar) {
  if (model.feature_type != FeatureType::kHaar) return {};
  std::vector<HaarStump> stumps;
  stumps.reserve(model.trees.size());
  for (const Model::Tree &tree : model.trees) {
    const Model::Node &node = model.nodes[tree.first_node];
    if (node.left > 0 || node.right > 0) return {};  // a deeper tree
    stumps.push_back(HaarStump{haar[node.feature], node.threshold,
                               model.leaves[tree.first_leaf - node.left],
                               model.leaves[tree.first_leaf - node.right], 0});
  }
  return stumps;
}

StumpStage stump_stage(const Model &model, const std::vector<HaarStump> &stumps, int end) {
  StumpStage st;
  if (end != 1 || stumps.empty() || model.stages[0].trees > kMaxParamStumps) return st;
  const Model::Stage &stage = model.stages[0];
  std::copy_n(stumps.begin() + stage.first_tree, stage.trees, st.stumps);
  st.count = stage.trees;
  st.threshold = stage.threshold;
  return st;
}

cudaError_t first_segment_async(int tiles, const CascadeView &c, const StumpStage &stumps,
                                const DeviceLevel *levels, int level_count, int stride,
                                const int32_t *sum, const int32_t *sqsum, const int32_t *tilted,
                                int end, uint8_t *status, float *norms, cudaStream_t stream) {
  first_segment<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
      c, stumps, levels, level_count, stride, sum, sqsum, tilted, end, status, norms);
  return cudaGetLastError();
}

cudaError_t middle_segment_async(int group, unsigned blocks, size_t shared, const CascadeView &c,
                                 const HaarStump *stumps, const DeviceLevel *levels, int stride,
                                 const int32_t *sum, const int32_t *tilted, int first, int end,
                                 const QueueEntry *in, const uint32_t *in_count, QueueEntry *out,
                                 uint32_t *out_count, int max_trees, cudaStream_t stream) {
  with_lanes(group, [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    middle_segment<kLanes><<<blocks, kThreads, shared, stream>>>(c, stumps, levels, stride, sum,
                                                                 tilted, first, end, in, in_count,
                                                                 out, out_count, max_trees);
  });
  return cudaGetLastError();
}

cudaError_t last_segment_async(int group, unsigned blocks, size_t shared, const CascadeView &c,
                               const HaarStump *stumps, const DeviceLevel *levels, int stride,
                               const int32_t *sum, const int32_t *tilted, int first, int end,
                               const QueueEntry *in, const uint32_t *in_count, OutWindow *windows,
                               uint32_t *window_count, const Finals &finals, int max_trees,
                               cudaStream_t stream) {
  with_lanes(group, [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    last_segment<kLanes><<<blocks, kThreads, shared, stream>>>(
        c, stumps, levels, stride, sum, tilted, first, end, in, in_count, windows, window_count,
        finals, max_trees);
  });
  return cudaGetLastError();
}

}  // namespace cudanms::cascade::detail
