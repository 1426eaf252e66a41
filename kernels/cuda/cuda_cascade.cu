// The cascade detector on CUDA (Micikevicius, "Maximizing Face Detection Performance", GTC 2015):
// every scale resized and integrated on the GPU, one thread per window, the stages run in
// segments, each launch over a queue of the windows alive after the one before. The per-window
// arithmetic is common/cascade_eval.h, the same code the CPU twin runs.
//
// Per frame (detect() into host windows): one upload of the grey image, the launches, one copy
// back of the windows into mapped host memory and one synchronisation (a second copy only when a
// frame returns more windows than any before it and past the mapped buffer). Into device
// candidates, a batch of frames of one size runs through the same launches as one frame: the
// level tables hold every frame's scales one after another, each at its own place in the
// planes, and each frame lists its windows apart for emit_candidates.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "common/cascade_eval.h"
#include "common/cascade_geometry.h"
#include "cuda/cuda_device.h"
#include "cuda/host_wait.h"
#include "cuda_cascade.h"

#define CASCADE_TRY(call) CUDANMS_CUDA_TRY(call)

namespace cudanms::cascade::detail {
namespace {

using cudanms::detail::kBlockingEventFlags;

constexpr uint32_t kFullMask = 0xffffffffu;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr size_t kMappedWindows = 16 * 1024;  // windows copied back with the one synchronisation
constexpr size_t kSharedBytes = 48 * 1024;    // shared memory without opting in to more
constexpr size_t kStagingThreads = 8;         // copying a batch's host frames

using ::cudanms::detail::DeviceArray;
using ::cudanms::detail::DeviceBinding;
using ::cudanms::detail::MappedArray;

// A Level as the kernels need it.
struct DeviceLevel {
  int32_t width, height, step, cols, rows;
  // This level's first item in running totals over all levels: image rows (the row scans), grid
  // rows (the walk), tiles of windows (segment 1).
  int32_t first_row, first_grid_row, first_tile;
  int32_t x_taps, y_taps;
  int64_t origin;
  int64_t first_window;
  float factor;  // the window in image pixels: cascade_geometry's window_rect
  int32_t out_width, out_height;
  int32_t frame;  // of the batch: the levels of frame f follow those of frame f - 1
};

// A frame of the batch: where its pixels are, and (device candidates) where its windows go.
struct FrameSlot {
  const uint8_t *pixels;
  size_t stride;
  float4 *boxes;
  float *scores;
  int32_t *class_ids;
  uint32_t *count;
  uint32_t capacity;
  int32_t class_id;
  double min_score;
};

struct QueueEntry {
  int32_t level, x, y;
  float norm;
};

struct OutWindow {
  int32_t level, x, y, pad;
  double score;
};

// The level holding global item `i` of the running totals in `first` (ascending, level 0 at 0).
template <typename T>
__device__ int find_level(const DeviceLevel *levels, int count, T DeviceLevel::*first, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<int64_t>(levels[mid].*first) <= i) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Detection into device candidates: the last segment appends each window that passes to its
// frame's list, by its index in the grid of all levels, and emit_candidates puts them in
// detect()'s order (scale, row, column: the index's) by ranking them, so that NMS breaks ties as
// on the host path.
struct Final {
  uint32_t index;  // in the grid of all levels of the batch: fewer than 2^31 (detect_batch)
  float score;
};
struct Finals {
  Final *list = nullptr;  // null: not detecting into device candidates
  size_t per_frame = 0;   // frame f lists from list + f * per_frame, its count in counts[f]
  uint32_t *counts = nullptr;
  const FrameSlot *frames = nullptr;
  int image_width = 0, image_height = 0;
};

// window_rect of cascade_geometry.cpp: false when the clipped rectangle is empty.
__device__ bool window_box(const DeviceLevel &level, int x, int y, int image_width,
                           int image_height, float4 *box) {
  const int x0 = __float2int_rn(static_cast<float>(x) * level.factor);
  const int y0 = __float2int_rn(static_cast<float>(y) * level.factor);
  const int x1 = max(x0, 0), y1 = max(y0, 0);
  const int x2 = min(x0 + level.out_width, image_width);
  const int y2 = min(y0 + level.out_height, image_height);
  *box = make_float4(x1, y1, x2, y2);
  return x2 > x1 && y2 > y1;
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

// Each frame's listed windows as its candidates at their rank by grid index (their place in
// detect()'s order), those ranked below the capacity; the count, above it or not, reaches the
// consumer, which reports an excess. Blocks blockIdx.y take frame blockIdx.y. A window's rank is
// counted against every other of its frame, tile by tile in shared memory: a frame's few dozen
// windows take one block (a CUB select over the ~900 K statuses of a 1080p frame took ~10 us and
// a launch more); thousands cost O(n^2) but stay exact.
constexpr int kRankTile = 1024;

__global__ void emit_candidates(Finals f, const DeviceLevel *levels, int level_count) {
  __shared__ uint32_t tile[kRankTile];
  const int frame_index = blockIdx.y;
  const FrameSlot frame = f.frames[frame_index];
  const Final *list = f.list + frame_index * f.per_frame;
  const uint32_t n = f.counts[frame_index];
  if (blockIdx.x == 0 && threadIdx.x == 0) *frame.count = n;
  for (uint32_t base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
    const uint32_t k = base + threadIdx.x;
    const Final mine = k < n ? list[k] : Final{0, 0};
    uint32_t rank = 0;
    for (uint32_t t0 = 0; t0 < n; t0 += kRankTile) {
      const uint32_t m = min(static_cast<uint32_t>(kRankTile), n - t0);
      __syncthreads();  // the tile before is read
      for (uint32_t j = threadIdx.x; j < m; j += blockDim.x) tile[j] = list[t0 + j].index;
      __syncthreads();
      for (uint32_t j = 0; j < m; ++j) rank += tile[j] < mine.index;
    }
    if (k >= n || rank >= frame.capacity) continue;
    const DeviceLevel level =
        levels[find_level(levels, level_count, &DeviceLevel::first_window, mine.index)];
    const int g = static_cast<int>(mine.index - level.first_window);
    float4 box;
    window_box(level, (g % level.cols) * level.step, (g / level.cols) * level.step, f.image_width,
               f.image_height, &box);
    frame.boxes[rank] = box;
    frame.scores[rank] = mine.score;
    frame.class_ids[rank] = frame.class_id;
  }
}

__global__ void resize_levels(const FrameSlot *frames, const DeviceLevel *levels,
                              const AxisTap *x_taps, const AxisTap *y_taps, int stride,
                              uint8_t *resized) {
  const DeviceLevel level = levels[blockIdx.z];
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= level.width || y >= level.height) return;
  const FrameSlot &frame = frames[level.frame];
  resized[level.origin + static_cast<int64_t>(y) * stride + x] =
      resize_pixel(frame.pixels, frame.stride, x_taps[level.x_taps + x], y_taps[level.y_taps + y]);
}

// One step of a warp-wide running sum over 32 consecutive elements: the lane's inclusive sum plus
// what came before (*carry), which then moves on past the 32.
__device__ uint32_t running_sum(uint32_t v, int lane, uint32_t *carry) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t n = __shfl_up_sync(kFullMask, v, d);
    if (lane >= d) v += n;
  }
  v += *carry;
  *carry = __shfl_sync(kFullMask, v, 31);
  return v;
}

// One warp per image row of every level: the row's running sums (and of squares) into row y + 1,
// columns 1..width, of the integral planes. The column pass finishes them.
__global__ void integral_rows(const DeviceLevel *levels, int level_count, int total_rows,
                              const uint8_t *resized, int stride, int32_t *sum, int32_t *sqsum) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const DeviceLevel level = levels[find_level(levels, level_count, &DeviceLevel::first_row, row)];
  const int y = row - level.first_row;
  const uint8_t *src = resized + level.origin + static_cast<int64_t>(y) * stride;
  const int64_t out = level.origin + static_cast<int64_t>(y + 1) * stride + 1;
  uint32_t carry = 0, carry_sq = 0;
  for (int x0 = 0; x0 < level.width; x0 += 32) {
    const int x = x0 + lane;
    const uint32_t v = x < level.width ? src[x] : 0;
    const uint32_t s = running_sum(v, lane, &carry);
    if (x < level.width) sum[out + x] = static_cast<int32_t>(s);
    if (sqsum) {
      const uint32_t q = running_sum(v * v, lane, &carry_sq);
      if (x < level.width) sqsum[out + x] = static_cast<int32_t>(q);
    }
  }
}

// The column pass: a block per 32 adjacent integral columns of one level (blockIdx.z), its warps
// one above the other down bands of kBandRows rows. Each lane sums kRowsPerLane rows of its
// column in registers, the warps' totals are added up in shared memory: every load and store is
// a warp's 32 adjacent columns (coalesced), each value read and written once. (A warp per column
// read 32 rows of one column per load: 32 sectors for 128 useful bytes.)
constexpr int kColumnTile = 32;
constexpr int kColumnWarps = 16;
constexpr int kRowsPerLane = 8;
constexpr int kBandRows = kColumnWarps * kRowsPerLane;

__global__ void __launch_bounds__(kColumnTile *kColumnWarps)
    integral_columns(const DeviceLevel *levels, int stride, int32_t *sum, int32_t *sqsum) {
  __shared__ uint32_t totals[2][kColumnWarps][kColumnTile + 1];  // +1: no bank conflicts
  const DeviceLevel level = levels[blockIdx.z];
  if (static_cast<int>(blockIdx.x) * kColumnTile >= level.width) return;  // the whole block
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int x = blockIdx.x * kColumnTile + lane;
  const bool column_inside = x < level.width;
  const int64_t top = level.origin + stride + 1 + x;  // integral row 1 of column x + 1
  uint32_t carry = 0, carry_sq = 0;                   // the bands above
  for (int band = 0; band < level.height; band += kBandRows) {
    const int y0 = band + warp * kRowsPerLane;
    uint32_t s[kRowsPerLane], q[kRowsPerLane];
    uint32_t run = 0, run_sq = 0;
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const bool inside = column_inside && y0 + k < level.height;
      const int64_t p = top + static_cast<int64_t>(y0 + k) * stride;
      run += inside ? static_cast<uint32_t>(sum[p]) : 0u;
      s[k] = run;
      if (sqsum) {
        run_sq += inside ? static_cast<uint32_t>(sqsum[p]) : 0u;
        q[k] = run_sq;
      }
    }
    totals[0][warp][lane] = run;
    totals[1][warp][lane] = run_sq;
    __syncthreads();
    uint32_t above = carry, above_sq = carry_sq;
    for (int w = 0; w < kColumnWarps; ++w) {
      if (w == warp) above = carry, above_sq = carry_sq;  // what the warps above this one add
      carry += totals[0][w][lane];
      carry_sq += totals[1][w][lane];
    }
    __syncthreads();  // the totals are read before the next band writes them
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      if (!column_inside || y0 + k >= level.height) continue;
      const int64_t p = top + static_cast<int64_t>(y0 + k) * stride;
      sum[p] = static_cast<int32_t>(s[k] + above);
      if (sqsum) sqsum[p] = static_cast<int32_t>(q[k] + above_sq);
    }
  }
}

// The tilted integral of one level on the grid rotated by 45 degrees (see tilted_integral in
// common/cascade_geometry.h): scatter, sums along v downwards, along u, gather.
__global__ void tilted_scatter(const uint8_t *resized, int64_t origin, int stride, int width,
                               int height, int n, uint32_t *grid) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y;
  if (x >= width) return;
  grid[static_cast<int64_t>(x + y) * n + (x - y + height - 1)] =
      resized[origin + static_cast<int64_t>(y) * stride + x];
}

__global__ void tilted_suffix_rows(int n, uint32_t *grid) {
  const int u = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (u >= n) return;
  uint32_t *row = grid + static_cast<int64_t>(u) * n;
  uint32_t carry = 0;
  for (int v0 = n - 1; v0 >= 0; v0 -= 32) {
    const int v = v0 - lane;  // lane 0 takes the rightmost element of the chunk
    const uint32_t s = running_sum(v >= 0 ? row[v] : 0, lane, &carry);
    if (v >= 0) row[v] = s;
  }
}

__global__ void tilted_prefix_columns(int n, uint32_t *grid) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= n) return;
  uint32_t acc = grid[v];
  for (int u = 1; u < n; ++u) {
    const int64_t p = static_cast<int64_t>(u) * n + v;
    acc += grid[p];
    grid[p] = acc;
  }
}

__global__ void tilted_gather(const uint32_t *grid, int n, int width, int height, int64_t origin,
                              int stride, int32_t *tilted) {
  const int X = blockIdx.x * blockDim.x + threadIdx.x;
  const int Y = blockIdx.y;
  if (X > width) return;
  const int u = X + Y - 2;
  const int v = X - Y + height - 1;
  uint32_t value = 0;
  if (u >= 0 && v < n) value = grid[static_cast<int64_t>(min(u, n - 1)) * n + max(v, 0)];
  tilted[origin + static_cast<int64_t>(Y) * stride + X] = static_cast<int32_t>(value);
}

// Segment 1 over every window of every level, a block a tile of kTileRows x kTileCols windows of
// one level: a block finds its level once, a thread its window with no search or division, and
// a warp's windows are neighbours of one row (a window a thread over all levels spent a binary
// search, a division and the level's 64 bytes on each). Status 0: evaluated and failed the first
// stage (OpenCV then skips the next window of the row); 1: flat or failed a later stage; 2:
// alive, with its normalisation factor in norms.
constexpr int kTileCols = 32;
constexpr int kTileRows = kThreads / kTileCols;

__host__ __device__ int tiles_across(int cols) { return (cols + kTileCols - 1) / kTileCols; }

__global__ void __launch_bounds__(kThreads)
    first_segment(CascadeView c, const DeviceLevel *levels, int level_count, int stride,
                  const int32_t *sum, const int32_t *sqsum, const int32_t *tilted, int end,
                  uint8_t *status, float *norms) {
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
    double weight;
    const int failed = run_stages(c, window_sum, window_in(tilted, at), norm, 0, end, &weight);
    s = failed == 0 ? 0 : failed < end ? 1 : 2;
  }
  status[i] = s;
  if (s == 2) norms[i] = norm;  // the walk reads it for the windows that go on only
}

// OpenCV's walk along a row, one window at a time, is a map of the state "the walk lands on this
// window" to the state at the next: not landed -> lands; landed -> lands unless the window failed
// the first stage. Such a map of {0, 1} is two bits (bit b: where state b goes), and the maps of
// consecutive windows compose (associatively) into the map over all of them: a warp scan.
__device__ uint32_t walk_step(uint32_t map, uint32_t state) { return (map >> state) & 1u; }
__device__ uint32_t walk_compose(uint32_t later, uint32_t earlier) {
  return walk_step(later, walk_step(earlier, 0)) | walk_step(later, walk_step(earlier, 1)) << 1;
}

// The map of OpenCV's walk over 32 windows from `col0`, a lane each: lane j's map takes the
// state at col0 to the state at col0 + j + 1. Windows past the row map to themselves.
__device__ uint32_t walk_scan(const uint8_t *row_status, int cols, int col0, int lane,
                              uint8_t *status) {
  const int col = col0 + lane;
  *status = col < cols ? row_status[col] : 0;
  uint32_t map = col >= cols ? 2u : 1u | (*status != 0 ? 2u : 0u);  // 2: the identity
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t earlier = __shfl_up_sync(kFullMask, map, d);
    if (lane >= d) map = walk_compose(map, earlier);
  }
  return map;
}

// A block per grid row, its warps over consecutive stretches of the row's windows, 32 at a time:
// each warp first composes its stretch into one map, the maps of the warps before it give the
// state it starts in, then it walks its stretch again, counting the alive windows the walk
// reaches (the statuses as ballots), and a third time to queue them. The block claims its place
// in the queue with one atomic: one per window chunk put thousands of same-address atomics on a
// 1080p frame. (A warp per row walked a 1080p row's ~30 chunks in a chain.)
constexpr int kWalkWarps = 8;

// OpenCV's walk through chunks [begin, end) of a row, landing on the first window or not:
// visit(column of the lane, bits of the windows reached, bits of those that join the queue).
template <typename Visit>
__device__ void walk_stretch(const uint8_t *row_status, int cols, int begin, int end,
                             uint32_t lands, int lane, Visit visit) {
  uint8_t s;
  for (int c = begin; c < end; ++c) {
    const int col = c * 32 + lane;
    const uint32_t map = walk_scan(row_status, cols, c * 32, lane, &s);
    const uint32_t lands_next = walk_step(map, lands);  // on window col + 1
    uint32_t lands_here = __shfl_up_sync(kFullMask, lands_next, 1);
    if (lane == 0) lands_here = lands;
    const uint32_t reached = __ballot_sync(kFullMask, col < cols && lands_here);
    const uint32_t alive = __ballot_sync(kFullMask, s == 2);
    lands = __shfl_sync(kFullMask, lands_next, 31);
    visit(col, reached, reached & alive);
  }
}

__global__ void __launch_bounds__(kWalkWarps * 32)
    walk_rows(const DeviceLevel *levels, int level_count, const uint8_t *status, const float *norms,
              QueueEntry *queue, uint32_t *queue_count, unsigned long long *reached_count) {
  __shared__ uint32_t stretch_maps[kWalkWarps], joining_counts[kWalkWarps],
      reached_counts[kWalkWarps];
  __shared__ uint32_t block_base;
  const int r = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int li = find_level(levels, level_count, &DeviceLevel::first_grid_row, r);
  const DeviceLevel level = levels[li];
  const int row = r - level.first_grid_row;
  const int64_t first = level.first_window + static_cast<int64_t>(row) * level.cols;
  const uint8_t *row_status = status + first;
  const int chunks = (level.cols + 31) / 32;
  const int per_warp = (chunks + kWalkWarps - 1) / kWalkWarps;
  const int chunk_begin = min(chunks, warp * per_warp);
  const int chunk_end = min(chunks, chunk_begin + per_warp);
  uint8_t s;
  uint32_t stretch = 2u;  // the identity
  for (int c = chunk_begin; c < chunk_end; ++c)
    stretch = walk_compose(
        __shfl_sync(kFullMask, walk_scan(row_status, level.cols, c * 32, lane, &s), 31), stretch);
  if (lane == 0) stretch_maps[warp] = stretch;
  __syncthreads();
  uint32_t lands = 1;  // whether the walk lands on the stretch's first window
  for (int w = 0; w < warp; ++w) lands = walk_step(stretch_maps[w], lands);

  uint32_t joining_total = 0, reached_total = 0;
  walk_stretch(row_status, level.cols, chunk_begin, chunk_end, lands, lane,
               [&](int, uint32_t reached, uint32_t joining) {
                 reached_total += __popc(reached);
                 joining_total += __popc(joining);
               });
  if (lane == 0) joining_counts[warp] = joining_total, reached_counts[warp] = reached_total;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t joining = 0, reached = 0;
    for (int w = 0; w < kWalkWarps; ++w) joining += joining_counts[w], reached += reached_counts[w];
    block_base = joining ? atomicAdd(queue_count, joining) : 0;
    if (reached) atomicAdd(reached_count, static_cast<unsigned long long>(reached));
  }
  __syncthreads();
  if (joining_total == 0) return;
  uint32_t base = block_base;
  for (int w = 0; w < warp; ++w) base += joining_counts[w];
  walk_stretch(row_status, level.cols, chunk_begin, chunk_end, lands, lane,
               [&](int col, uint32_t, uint32_t joining) {
                 if ((joining >> lane) & 1u) {
                   queue[base + __popc(joining & ((1u << lane) - 1))] =
                       QueueEntry{li, col * level.step, row * level.step, norms[first + col]};
                 }
                 base += __popc(joining);
               });
}

// A stage for a window on the G lanes of its group: the lanes walk the stage's trees in
// parallel. Where the stage sums are exact in any order (stage_sums_exact), each lane adds its
// own leaves and the lanes' sums meet in a butterfly, every lane with the total; else the leaves
// go to the group's `mine` in shared memory and its first lane adds them in tree order. Either
// way OpenCV's double sum, bit for bit, on every lane of the group.
template <int G>
__device__ double stage_sum(const CascadeView &c, const StageView &stage, const int32_t *sum,
                            const int32_t *tilted, float norm, int sub, unsigned mask,
                            float *mine) {
  if (c.exact_stage_sums) {
    double part = 0;
    for (int t = sub; t < stage.trees; t += G)
      part += static_cast<double>(
          tree_leaf(c, load_record(c.trees + stage.first_tree + t), sum, tilted, norm));
#pragma unroll
    for (int lanes = G / 2; lanes > 0; lanes /= 2) part += __shfl_xor_sync(mask, part, lanes, G);
    return part;
  }
  for (int t = sub; t < stage.trees; t += G)
    mine[t] = tree_leaf(c, load_record(c.trees + stage.first_tree + t), sum, tilted, norm);
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
    middle_segment(CascadeView c, const DeviceLevel *levels, int stride, const int32_t *sum,
                   const int32_t *tilted, int first, int end, const QueueEntry *in,
                   const uint32_t *in_count, QueueEntry *out, uint32_t *out_count, int max_trees) {
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
        const double weight = stage_sum<G>(c, stage, window_in(sum, at), window_in(tilted, at),
                                           e.norm, sub, mask, mine);
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
__global__ void last_segment(CascadeView c, const DeviceLevel *levels, int stride,
                             const int32_t *sum, const int32_t *tilted, int first, int end,
                             const QueueEntry *in, const uint32_t *in_count, OutWindow *windows,
                             uint32_t *window_count, Finals finals, int max_trees) {
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
      weight = stage_sum<G>(c, stage, window_sum, window_tilted, e.norm, sub, mask, mine);
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

// The counts and the first windows into mapped host memory, so one synchronisation brings all.
__global__ void publish(const uint32_t *counts, int count_n, const unsigned long long *reached,
                        const OutWindow *windows, uint32_t capacity, uint32_t *h_counts,
                        unsigned long long *h_reached, OutWindow *h_windows) {
  const uint32_t n = min(counts[count_n - 1], capacity);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    h_windows[i] = windows[i];
  if (blockIdx.x == 0 && threadIdx.x < count_n) h_counts[threadIdx.x] = counts[threadIdx.x];
  if (blockIdx.x == 0 && threadIdx.x == 0) *h_reached = *reached;
}

unsigned blocks_for(size_t items, int threads) {
  return static_cast<unsigned>(std::max<size_t>((items + threads - 1) / threads, 1));
}

class CudaDetector final : public Detector {
 public:
  explicit CudaDetector(std::shared_ptr<const Model> model) : Detector(std::move(model)) {}
  ~CudaDetector() override {
    DeviceBinding::Scope scope(binding_.context());
    w_.reset();
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (uploaded_) cudaEventDestroy(uploaded_);
    if (staged_) cudaEventDestroy(staged_);
    if (slots_copied_) cudaEventDestroy(slots_copied_);
    if (image_read_) cudaEventDestroy(image_read_);
    if (done_) cudaEventDestroy(done_);
  }

  Status init(const DetectorOptions &options) {
    Status opened = binding_.open(options.device);
    if (!opened.ok()) return opened;
    CUDANMS_ENTER(binding_);
    sm_count_ = binding_.sm_count();
    w_ = std::make_unique<Workspace>();
    // The host waits on these (host_wait.h).
    CASCADE_TRY(cudaEventCreateWithFlags(&staged_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&slots_copied_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&image_read_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&done_, kBlockingEventFlags));
    if (options.stream) {
      stream_ = static_cast<cudaStream_t>(options.stream);
    } else {
      CASCADE_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    if (options.time_device) {
      CASCADE_TRY(cudaEventCreate(&start_));
      CASCADE_TRY(cudaEventCreate(&stop_));
      CASCADE_TRY(cudaEventCreate(&uploaded_));
    }
    const Model &m = *model_;
    const int stages = static_cast<int>(m.stages.size());
    for (const auto &stage : m.stages) max_trees_ = std::max(max_trees_, stage.trees);
    // One float per tree of a stage per warp of the segment kernels, in shared memory.
    constexpr int kMaxSharedTrees = kSharedBytes / (kWarpsPerBlock * sizeof(float));
    if (max_trees_ > kMaxSharedTrees) {
      return Status::Error("a stage of " + std::to_string(max_trees_) +
                           " trees is more than the CUDA backend takes (" +
                           std::to_string(kMaxSharedTrees) + "); use the cpu backend");
    }
    bounds_.push_back(0);
    for (const int s : options.segment_starts) {
      if (s > bounds_.back() && s < stages) bounds_.push_back(s);
    }
    bounds_.push_back(stages);

    Status status = w_->stages.upload(m.stages, stream_);
    if (status.ok()) status = w_->trees.upload(m.trees, stream_);
    if (status.ok()) status = w_->nodes.upload(m.nodes, stream_);
    if (status.ok()) status = w_->leaves.upload(m.leaves, stream_);
    if (status.ok()) status = w_->subsets.upload(m.subsets, stream_);
    if (status.ok()) status = w_->counts.reserve(bounds_.size() + 1);
    if (status.ok()) status = w_->reached.reserve(1);
    if (status.ok()) status = w_->h_counts.reserve(bounds_.size() + 1);
    if (status.ok()) status = w_->h_reached.reserve(1);
    if (status.ok()) status = w_->h_windows.reserve(kMappedWindows);
    if (!status.ok()) return status;
    CASCADE_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return binding_.name(); }
  void *cuda_context() const override { return binding_.context(); }

 private:
  // The frames where the kernels read them, as the batch's slots: device pixels in place (after
  // their events), host pixels through the pinned staging buffer, asynchronously. The slots, too,
  // go through pinned memory (a copy from pageable memory may wait for the stream). Staging
  // buffers are refilled only once the previous batch's copies out of them are done.
  Status upload(const std::vector<DeviceFrame> &frames) {
    if (start_) CASCADE_TRY(cudaEventRecord(start_, stream_));
    const size_t row = static_cast<size_t>(geometry_.image_width);
    const size_t pixels = row * geometry_.image_height;
    bool staged = false;
    std::vector<size_t> host_frames;
    CASCADE_TRY(waits_.event(slots_copied_));
    Status reserved = w_->h_slots.reserve(frames.size());
    if (reserved.ok()) reserved = w_->slots.reserve(frames.size());
    if (!reserved.ok()) return reserved;
    for (size_t f = 0; f < frames.size(); ++f) {
      const GrayView &image = frames[f].image;
      FrameSlot &slot = w_->h_slots.get()[f];
      slot = FrameSlot{};
      if (image.on_device) {
        if (image.ready)
          CASCADE_TRY(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(image.ready), 0));
        slot.pixels = image.pixels;
        slot.stride = image.stride;
      } else {
        if (!staged) {  // the last batch's copy is done: the staging buffers may grow
          CASCADE_TRY(waits_.event(staged_));
          Status status = w_->image.reserve(pixels * frames.size());
          if (status.ok()) status = w_->h_image.reserve(pixels * frames.size());
          if (!status.ok()) return status;
        }
        staged = true;
        host_frames.push_back(f);
        slot.pixels = w_->image.get() + f * pixels;
        slot.stride = row;
      }
      if (DeviceCandidates *out = frames[f].out) {
        slot.boxes = reinterpret_cast<float4 *>(out->boxes());
        slot.scores = out->scores();
        slot.class_ids = out->class_ids();
        slot.count = out->count();
        slot.capacity = static_cast<uint32_t>(std::min<size_t>(out->capacity(), UINT32_MAX));
        slot.class_id = frames[f].output.class_id;
        slot.min_score = frames[f].output.min_score;
      }
    }
    // The host frames into the staging buffer, several at once: one thread copies ~5 GB/s, and a
    // batch of 1080p frames is tens of MB.
    const auto stage = [&](size_t first) {
      for (size_t k = first; k < host_frames.size(); k += kStagingThreads) {
        const GrayView &image = frames[host_frames[k]].image;
        uint8_t *to = w_->h_image.get() + host_frames[k] * pixels;
        for (int y = 0; y < image.height; ++y)
          std::memcpy(to + y * row, image.pixels + y * image.stride, row);
      }
    };
    std::vector<std::thread> copiers;
    for (size_t t = 1; t < std::min(host_frames.size(), kStagingThreads); ++t) {
      try {
        copiers.emplace_back(stage, t);
      } catch (const std::system_error &) {  // no thread to be had: copied here
        stage(t);
      }
    }
    if (!host_frames.empty()) stage(0);
    for (std::thread &t : copiers) t.join();
    if (staged) {  // one copy for the host frames of the batch, gaps and all
      CASCADE_TRY(cudaMemcpyAsync(w_->image.get(), w_->h_image.get(), pixels * frames.size(),
                                  cudaMemcpyHostToDevice, stream_));
      CASCADE_TRY(cudaEventRecord(staged_, stream_));
    }
    CASCADE_TRY(cudaMemcpyAsync(w_->slots.get(), w_->h_slots.get(),
                                frames.size() * sizeof(FrameSlot), cudaMemcpyHostToDevice,
                                stream_));
    CASCADE_TRY(cudaEventRecord(slots_copied_, stream_));
    if (uploaded_) CASCADE_TRY(cudaEventRecord(uploaded_, stream_));
    return Status::Ok();
  }

  // Frames of one size, at most max_batch_frames() of them.
  Status detect_batch_checked(const std::vector<DeviceFrame> &frames, const DetectParams &params,
                              DetectStats *stats) override {
    CUDANMS_ENTER(binding_);
    for (const DeviceFrame &frame : frames) {
      Status status = check_context(*frame.out);
      if (!status.ok()) return status;
    }
    const GrayView &first = frames.front().image;
    Status status = prepare(first.width, first.height, params, frames.size());
    if (!status.ok()) return status;
    const Geometry &g = geometry_;
    stats->scales = g.levels.size();
    bool on_device = false;
    if (g.levels.empty()) {
      for (const DeviceFrame &frame : frames)
        CASCADE_TRY(cudaMemsetAsync(frame.out->count(), 0, sizeof(uint32_t), stream_));
    } else {
      status = upload(frames);
      if (status.ok()) status = launch(frames.size(), true);
      if (!status.ok()) return status;
      const unsigned frame_blocks = std::max<unsigned>(
          1, static_cast<unsigned>(sm_count_) / static_cast<unsigned>(frames.size()));
      emit_candidates<<<dim3(frame_blocks, static_cast<unsigned>(frames.size())), kThreads, 0,
                        stream_>>>(finals(), w_->levels.get(),
                                   static_cast<int>(g.levels.size() * frames.size()));
      CASCADE_TRY(cudaGetLastError());
      for (const DeviceFrame &frame : frames) on_device |= frame.image.on_device;
    }
    for (const DeviceFrame &frame : frames) {
      status = frame.out->seal(stream_);
      if (!status.ok()) return status;
    }
    // The caller may reuse device pixels once detect() returns: wait for their one reader.
    if (on_device) CASCADE_TRY(waits_.event(image_read_));
    return Status::Ok();
  }

  Status check_context(const DeviceCandidates &out) const {
    if (out.context() == binding_.context()) return Status::Ok();
    return Status::Error("the device candidates live in another CUDA context than the detector's");
  }

  // Grid indices, rows and level counts of a batch stay within the kernels' int32 and grid z.
  size_t max_batch_frames(int width, int height, const DetectParams &params) const override {
    const Geometry g = make_geometry(*model_, width, height, params, false);
    size_t rows = 0;
    for (const Level &l : g.levels) rows += static_cast<size_t>(l.height);
    const size_t per_frame = std::max<size_t>({g.windows, rows, 1});
    const size_t levels = std::max<size_t>(g.levels.size(), 1);
    return std::max<size_t>(std::min<size_t>(INT32_MAX / per_frame, 65535 / levels), 1);
  }

  Status detect_device_checked(const GrayView &image, const DetectParams &params,
                               const DeviceOutput &output, DeviceCandidates *out,
                               DetectStats *stats) override {
    if (image.width > 0 && image.height > 0)
      return detect_batch_checked({DeviceFrame{image, output, out}}, params, stats);
    CUDANMS_ENTER(binding_);
    Status status = check_context(*out);
    if (!status.ok()) return status;
    CASCADE_TRY(cudaMemsetAsync(out->count(), 0, sizeof(uint32_t), stream_));
    return out->seal(stream_);
  }

  Status detect_checked(const GrayView &image, const DetectParams &params,
                        std::vector<Window> *windows, DetectStats *stats) override {
    CUDANMS_ENTER(binding_);
    Status status = prepare(image.width, image.height, params, 1);
    if (!status.ok()) return status;
    const Geometry &g = geometry_;
    stats->scales = g.levels.size();
    if (g.levels.empty()) return Status::Ok();

    DeviceFrame frame;
    frame.image = image;
    status = upload({frame});
    if (status.ok()) status = launch(1, false);
    if (!status.ok()) return status;
    if (stop_) CASCADE_TRY(cudaEventRecord(stop_, stream_));
    CASCADE_TRY(waits_.stream(stream_, done_));

    const size_t segments = bounds_.size() - 1;
    const uint32_t found = w_->h_counts.get()[segments];
    if (found > w_->h_windows.size()) {  // more than ever before: grow, and copy the rest
      Status grown = w_->h_windows.reserve(found);
      if (!grown.ok()) return grown;
      CASCADE_TRY(cudaMemcpy(w_->h_windows.get(), w_->windows.get(), found * sizeof(OutWindow),
                             cudaMemcpyDeviceToHost));
    }
    if (stop_) {
      float ms = 0;
      CASCADE_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      stats->device_time_us = 1000.0f * ms;
      CASCADE_TRY(cudaEventElapsedTime(&ms, uploaded_, stop_));
      stats->after_upload_us = 1000.0f * ms;
    }
    stats->windows_evaluated = static_cast<size_t>(*w_->h_reached.get());
    for (size_t k = 0; k + 1 < segments; ++k)
      stats->alive_after_segment.push_back(w_->h_counts.get()[k]);
    stats->alive_after_segment.push_back(found);

    // In the mapped buffer itself: no copy per frame.
    OutWindow *const out = w_->h_windows.get();
    std::sort(out, out + found, [](const OutWindow &a, const OutWindow &b) {
      return a.level != b.level ? a.level < b.level : a.y != b.y ? a.y < b.y : a.x < b.x;
    });
    for (const OutWindow *o = out; o != out + found; ++o) {
      Window w{};
      if (!window_rect(g, g.levels[o->level], o->x, o->y, &w)) continue;
      w.score = o->score;
      w.scale = o->level;
      windows->push_back(w);
    }
    stats->windows_out = windows->size();
    return Status::Ok();
  }

  // Where the last segment lists the windows of a batch's frames (device candidates).
  Finals finals() const {
    Finals f;
    f.list = w_->finals.get();
    f.per_frame = geometry_.windows;
    f.counts = w_->counts.get() + bounds_.size();
    f.frames = w_->slots.get();
    f.image_width = geometry_.image_width, f.image_height = geometry_.image_height;
    return f;
  }

  // Geometry, tables and workspace for frames of this size and these parameters, batches of up
  // to `frames` of them: the level tables repeat a frame's levels once per frame of the batch,
  // each at its own place in the planes, so that every kernel runs the batch in one launch. They
  // grow with the largest batch and serve every smaller one (its frames' levels come first).
  Status prepare(int width, int height, const DetectParams &params, size_t frames) {
    if (geometry_.matches(width, height, params) && !geometry_.levels.empty() &&
        frames <= table_frames_)
      return Status::Ok();
    Geometry g = make_geometry(*model_, width, height, params);
    Status status = geometry_fits(g);
    if (!status.ok()) return status;
    geometry_ = std::move(g);
    table_frames_ = 0;
    const Geometry &geo = geometry_;
    if (geo.levels.empty()) return Status::Ok();

    std::vector<DeviceLevel> levels;
    int rows = 0, grid_rows = 0, tiles = 0;
    for (size_t f = 0; f < frames; ++f) {
      for (const Level &l : geo.levels) {
        DeviceLevel d{};
        d.width = l.width, d.height = l.height, d.step = l.step, d.cols = l.cols, d.rows = l.rows;
        d.first_row = rows, d.first_grid_row = grid_rows, d.first_tile = tiles;
        d.x_taps = static_cast<int32_t>(l.x_taps), d.y_taps = static_cast<int32_t>(l.y_taps);
        d.origin = static_cast<int64_t>(f * geo.plane_size + l.origin);
        d.first_window = static_cast<int64_t>(f * geo.windows + l.first_window);
        d.factor = l.factor, d.out_width = l.out_width, d.out_height = l.out_height;
        d.frame = static_cast<int32_t>(f);
        rows += l.height, grid_rows += l.rows;
        tiles += tiles_across(l.cols) * ((l.rows + kTileRows - 1) / kTileRows);
        levels.push_back(d);
      }
      if (f == 0)
        total_rows_ = rows, total_grid_rows_ = grid_rows, total_tiles_ = tiles;  // a frame's
    }
    const FeatureTables tables = make_feature_tables(*model_, geo.stride);
    const bool haar = model_->feature_type == FeatureType::kHaar;
    const size_t plane = geo.plane_size * frames;
    const size_t windows = geo.windows * frames;
    status = w_->levels.upload(levels, stream_);
    if (status.ok()) status = w_->x_taps.upload(geo.x_taps, stream_);
    if (status.ok()) status = w_->y_taps.upload(geo.y_taps, stream_);
    if (status.ok()) status = w_->haar.upload(tables.haar, stream_);
    if (status.ok()) status = w_->lbp.upload(tables.lbp, stream_);
    if (status.ok()) status = w_->counts.reserve(bounds_.size() + frames);
    if (status.ok()) status = w_->resized.reserve(plane);
    if (status.ok()) status = w_->sum.reserve(plane);
    if (status.ok() && haar) status = w_->sqsum.reserve(plane);
    if (status.ok() && model_->has_tilted_features) {
      status = w_->tilted.reserve(plane);
      const size_t n =
          static_cast<size_t>(geo.levels.front().width) + geo.levels.front().height - 1;
      if (status.ok()) status = w_->tilt_grid.reserve(n * n);
    }
    if (status.ok()) status = w_->status.reserve(windows);
    if (status.ok()) status = w_->norms.reserve(windows);
    if (status.ok()) status = w_->queue_a.reserve(windows);
    if (status.ok()) status = w_->queue_b.reserve(windows);
    if (status.ok()) status = w_->windows.reserve(geo.windows);  // detect(): one frame
    if (status.ok()) status = w_->finals.reserve(windows);
    if (!status.ok()) {
      geometry_ = Geometry{};
      return status;
    }
    // Row 0 and column 0 of every level stay zero: the kernels never write them.
    CASCADE_TRY(cudaMemsetAsync(w_->sum.get(), 0, plane * sizeof(int32_t), stream_));
    if (haar) CASCADE_TRY(cudaMemsetAsync(w_->sqsum.get(), 0, plane * sizeof(int32_t), stream_));
    if (model_->has_tilted_features)
      CASCADE_TRY(cudaMemsetAsync(w_->tilted.get(), 0, plane * sizeof(int32_t), stream_));

    view_ = host_view(*model_, tables);  // then its arrays pointed at the device copies
    view_.stages = w_->stages.get(), view_.trees = w_->trees.get(), view_.nodes = w_->nodes.get();
    view_.leaves = w_->leaves.get(), view_.subsets = w_->subsets.get();
    view_.haar = w_->haar.get(), view_.lbp = w_->lbp.get();
    table_frames_ = frames;
    return Status::Ok();
  }

  // The launches of a batch (the first `frames` of the level tables); into_finals: the last
  // segment lists each frame's windows for device candidates, else (one frame) they are
  // published to mapped memory for detect().
  Status launch(size_t frames, bool into_finals) {
    const Geometry &g = geometry_;
    const int levels = static_cast<int>(g.levels.size() * frames);
    const int total_rows = total_rows_ * static_cast<int>(frames);
    const int total_grid_rows = total_grid_rows_ * static_cast<int>(frames);
    const bool haar = model_->feature_type == FeatureType::kHaar;
    const Level &widest = g.levels.front();
    const dim3 block2d(32, 8);
    const dim3 grid2d((widest.width + 31) / 32, (widest.height + 7) / 8, levels);
    resize_levels<<<grid2d, block2d, 0, stream_>>>(w_->slots.get(), w_->levels.get(),
                                                   w_->x_taps.get(), w_->y_taps.get(), g.stride,
                                                   w_->resized.get());
    CASCADE_TRY(cudaGetLastError());
    CASCADE_TRY(cudaEventRecord(image_read_, stream_));  // the frames' only reader is done
    int32_t *sq = haar ? w_->sqsum.get() : nullptr;
    integral_rows<<<blocks_for(total_rows, kWarpsPerBlock), kThreads, 0, stream_>>>(
        w_->levels.get(), levels, total_rows, w_->resized.get(), g.stride, w_->sum.get(), sq);
    CASCADE_TRY(cudaGetLastError());
    integral_columns<<<dim3((widest.width + kColumnTile - 1) / kColumnTile, 1, levels),
                       dim3(kColumnTile, kColumnWarps), 0, stream_>>>(w_->levels.get(), g.stride,
                                                                      w_->sum.get(), sq);
    CASCADE_TRY(cudaGetLastError());
    if (model_->has_tilted_features) {
      Status status = tilted_integrals(frames);
      if (!status.ok()) return status;
    }
    const int32_t *tilted = model_->has_tilted_features ? w_->tilted.get() : w_->sum.get();

    const size_t segments = bounds_.size() - 1;
    CASCADE_TRY(cudaMemsetAsync(w_->counts.get(), 0, (bounds_.size() + frames) * sizeof(uint32_t),
                                stream_));
    CASCADE_TRY(cudaMemsetAsync(w_->reached.get(), 0, sizeof(unsigned long long), stream_));
    first_segment<<<static_cast<unsigned>(total_tiles_ * frames), kThreads, 0, stream_>>>(
        view_, w_->levels.get(), levels, g.stride, w_->sum.get(), sq, tilted, bounds_[1],
        w_->status.get(), w_->norms.get());
    CASCADE_TRY(cudaGetLastError());
    walk_rows<<<static_cast<unsigned>(total_grid_rows), kWalkWarps * 32, 0, stream_>>>(
        w_->levels.get(), levels, w_->status.get(), w_->norms.get(), w_->queue_a.get(),
        w_->counts.get(), w_->reached.get());
    CASCADE_TRY(cudaGetLastError());
    // With one segment, the queue holds windows that passed every stage: running the last stage
    // again gives their score.
    QueueEntry *in = w_->queue_a.get(), *out = w_->queue_b.get();
    const unsigned queue_blocks = static_cast<unsigned>(sm_count_) * 16;
    const size_t runs = std::max<size_t>(segments, 2);
    for (size_t k = 1; k < runs; ++k) {
      const bool last = k + 1 == runs;
      const int first = segments == 1 ? bounds_[1] - 1 : bounds_[k];
      const int end = segments == 1 ? bounds_[1] : bounds_[k + 1];
      const int group = group_size(last);
      const size_t shared =
          view_.exact_stage_sums ? 0 : (kThreads / group) * max_trees_ * sizeof(float);
      const uint32_t *in_count = w_->counts.get() + k - 1;
      if (last) {
        auto kernel = group == 2    ? last_segment<2>
                      : group == 4  ? last_segment<4>
                      : group == 8  ? last_segment<8>
                      : group == 16 ? last_segment<16>
                                    : last_segment<32>;
        kernel<<<queue_blocks, kThreads, shared, stream_>>>(
            view_, w_->levels.get(), g.stride, w_->sum.get(), tilted, first, end, in, in_count,
            into_finals ? nullptr : w_->windows.get(), w_->counts.get() + segments,
            into_finals ? finals() : Finals{}, max_trees_);
      } else {
        auto kernel = group == 2    ? middle_segment<2>
                      : group == 4  ? middle_segment<4>
                      : group == 8  ? middle_segment<8>
                      : group == 16 ? middle_segment<16>
                                    : middle_segment<32>;
        kernel<<<queue_blocks, kThreads, shared, stream_>>>(
            view_, w_->levels.get(), g.stride, w_->sum.get(), tilted, first, end, in, in_count, out,
            w_->counts.get() + k, max_trees_);
      }
      CASCADE_TRY(cudaGetLastError());
      std::swap(in, out);
    }
    if (into_finals) return Status::Ok();  // detect_batch_checked orders them
    publish<<<64, kThreads, 0, stream_>>>(
        w_->counts.get(), static_cast<int>(segments + 1), w_->reached.get(), w_->windows.get(),
        static_cast<uint32_t>(w_->h_windows.size()), w_->h_counts.device(), w_->h_reached.device(),
        w_->h_windows.device());
    CASCADE_TRY(cudaGetLastError());
    return Status::Ok();
  }

  // Lanes per window. The segments before the last hold tens of thousands of windows in the
  // walk's order (a row's windows together, by column) and are bound by L1 and by issued
  // instructions: two lanes a window put 16 neighbouring windows in a warp, whose reads of one
  // feature share cache lines. The last segment holds the few windows that go deep, each a chain
  // of stages: a warp a window. More lanes where the leaves must wait in shared memory. Measured
  // on an H100 (docs/performance.md, issue 30's passes): with the talk's split, lanes a third of
  // a stage's trees 0.404 / 0.573 / 0.374 ms of GPU time (alt2 / default / LBP at 1080p), these
  // 0.370 / 0.495 / 0.346; the first stage alone and 2 lanes for stages 2-7 then cut a default
  // frame's instructions from 117 M to 87 M.
  int group_size(bool last_segment) const {
    int group = last_segment ? 32 : 2;
    while (group < 32 && !view_.exact_stage_sums &&
           (kThreads / group) * max_trees_ * sizeof(float) > kSharedBytes)
      group *= 2;
    return group;
  }

  // Level by level, every frame of the batch.
  Status tilted_integrals(size_t frames) {
    const Geometry &g = geometry_;
    for (size_t f = 0; f < frames; ++f) {
      for (const Level &l : g.levels) {
        const int n = l.width + l.height - 1;
        const int64_t origin = static_cast<int64_t>(f * g.plane_size + l.origin);
        CASCADE_TRY(cudaMemsetAsync(w_->tilt_grid.get(), 0,
                                    static_cast<size_t>(n) * n * sizeof(uint32_t), stream_));
        tilted_scatter<<<dim3((l.width + 127) / 128, l.height), 128, 0, stream_>>>(
            w_->resized.get(), origin, g.stride, l.width, l.height, n, w_->tilt_grid.get());
        CASCADE_TRY(cudaGetLastError());
        tilted_suffix_rows<<<blocks_for(n, kWarpsPerBlock), kThreads, 0, stream_>>>(
            n, w_->tilt_grid.get());
        CASCADE_TRY(cudaGetLastError());
        tilted_prefix_columns<<<blocks_for(n, 128), 128, 0, stream_>>>(n, w_->tilt_grid.get());
        CASCADE_TRY(cudaGetLastError());
        tilted_gather<<<dim3((l.width + 1 + 127) / 128, l.height + 1), 128, 0, stream_>>>(
            w_->tilt_grid.get(), n, l.width, l.height, origin, g.stride, w_->tilted.get());
        CASCADE_TRY(cudaGetLastError());
      }
    }
    return Status::Ok();
  }

  DeviceBinding binding_;
  int sm_count_ = 1;
  int max_trees_ = 1;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr, stop_ = nullptr, uploaded_ = nullptr;
  cudaEvent_t staged_ = nullptr;        // the last copy out of the pinned staging buffer
  cudaEvent_t slots_copied_ = nullptr;  // the last copy out of the pinned slots
  cudaEvent_t image_read_ = nullptr;    // the resize of the last frame, which reads its pixels
  cudaEvent_t done_ = nullptr;          // the host's wait for a frame's windows
  cudanms::detail::HostWait waits_;
  std::vector<int> bounds_;             // segment k runs stages [bounds_[k], bounds_[k + 1])

  Geometry geometry_;
  int total_rows_ = 0, total_grid_rows_ = 0, total_tiles_ = 0;  // of one frame
  size_t table_frames_ = 0;                                     // the frames the level tables hold
  CascadeView view_{};

  // The device memory, freed inside the detector's context.
  struct Workspace {
    DeviceArray<StageView> stages;
    DeviceArray<TreeView> trees;
    DeviceArray<NodeView> nodes;
    DeviceArray<float> leaves;
    DeviceArray<int32_t> subsets;
    DeviceArray<HaarOffsets> haar;
    DeviceArray<LbpOffsets> lbp;
    DeviceArray<DeviceLevel> levels;
    DeviceArray<AxisTap> x_taps, y_taps;
    DeviceArray<uint8_t> image, resized, status;
    DeviceArray<int32_t> sum, sqsum, tilted;
    DeviceArray<uint32_t> tilt_grid, counts;
    DeviceArray<unsigned long long> reached;
    DeviceArray<float> norms;
    DeviceArray<QueueEntry> queue_a, queue_b;
    DeviceArray<OutWindow> windows;
    DeviceArray<Final> finals;  // device candidates: each frame's windows that pass, unordered
    DeviceArray<FrameSlot> slots;
    MappedArray<FrameSlot> h_slots;  // written here, then copied to slots
    MappedArray<uint8_t> h_image;
    MappedArray<uint32_t> h_counts;
    MappedArray<unsigned long long> h_reached;
    MappedArray<OutWindow> h_windows;
  };
  std::unique_ptr<Workspace> w_;
};

}  // namespace

std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> model,
                                               const DetectorOptions &options, Status *status) {
  auto detector = std::make_unique<CudaDetector>(std::move(model));
  *status = detector->init(options);
  if (!status->ok()) return nullptr;
  return detector;
}

}  // namespace cudanms::cascade::detail
