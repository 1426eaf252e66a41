// The CUDA cascade detector's kernels (Micikevicius, "Maximizing Face Detection Performance",
// GTC 2015), a file per stage as the NMS kernels keep them: frame preparation and integrals
// (cascade_prepare.cu), the row walk (cascade_walk.cu), the segments of stages
// (cascade_segments.cu) and the output (cascade_output.cu). cuda_cascade.cu is the detector that
// launches them. This header holds what the stages share: the level tables, the queues, and
// one launcher per operation, each returning the launch's error (cudaGetLastError) on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/cascade_eval.h"

namespace cudanms::cascade::detail {

constexpr uint32_t kFullMask = 0xffffffffu;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

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
__device__ inline bool window_box(const DeviceLevel &level, int x, int y, int image_width,
                                  int image_height, float4 *box) {
  const int x0 = __float2int_rn(static_cast<float>(x) * level.factor);
  const int y0 = __float2int_rn(static_cast<float>(y) * level.factor);
  const int x1 = max(x0, 0), y1 = max(y0, 0);
  const int x2 = min(x0 + level.out_width, image_width);
  const int y2 = min(y0 + level.out_height, image_height);
  *box = make_float4(x1, y1, x2, y2);
  return x2 > x1 && y2 > y1;
}

// Segment 1's tiles of windows (cascade_segments.cu).
constexpr int kTileCols = 32;
constexpr int kTileRows = kThreads / kTileCols;

__host__ __device__ inline int tiles_across(int cols) { return (cols + kTileCols - 1) / kTileCols; }

inline unsigned blocks_for(size_t items, int threads) {
  return static_cast<unsigned>(std::max<size_t>((items + threads - 1) / threads, 1));
}

// A Haar cascade whose trees are all stumps (one node, two leaves: frontalface_default's and
// _alt's) as one record a tree, for the current stride: a segment reads a tree with one load of
// 80 bytes where the model's tables cost four dependent ones (tree, node, feature, leaf) and
// their address arithmetic.
struct HaarStump {
  HaarOffsets feature;
  float threshold;    // the node's
  float left, right;  // the leaves
  int32_t pad;
};
// The cascade's trees as stumps, or none where one is deeper or the features are LBP.
std::vector<HaarStump> haar_stumps(const Model &model, const std::vector<HaarOffsets> &haar);

// Segment 1 when it is the first stage alone, of stumps: the stage passed as the kernel's
// parameters, which the GPU reads as operands of the arithmetic (a constant bank), no loads at
// all. count 0: not such a stage.
constexpr int kMaxParamStumps = 16;
struct StumpStage {
  int32_t count = 0;
  float threshold = 0;  // the stage's
  HaarStump stumps[kMaxParamStumps];
};
StumpStage stump_stage(const Model &model, const std::vector<HaarStump> &stumps, int end);

// Frame preparation and integrals (cascade_prepare.cu). Every level of the batch (the widest
// first) resized from its frame, with OpenCV's bit-exact bilinear taps.
cudaError_t resize_levels_async(const FrameSlot *frames, const DeviceLevel *levels, int level_count,
                                int widest_width, int widest_height, const AxisTap *x_taps,
                                const AxisTap *y_taps, int stride, uint8_t *resized,
                                cudaStream_t stream);
// Their integrals, and integrals of squares where sqsum is not null.
cudaError_t integrals_async(const DeviceLevel *levels, int level_count, int total_rows,
                            int widest_width, const uint8_t *resized, int stride, int32_t *sum,
                            int32_t *sqsum, cudaStream_t stream);
// The tilted integral of one level at `origin` of the planes; grid: (width + height - 1)^2 words
// of scratch.
cudaError_t tilted_integral_async(const uint8_t *resized, int64_t origin, int stride, int width,
                                  int height, uint32_t *grid, int32_t *tilted, cudaStream_t stream);

// The segments (cascade_segments.cu). Segment 1, stages [0, end), over every window: status and
// normalisation of each (the walk's input).
cudaError_t first_segment_async(int tiles, const CascadeView &c, const StumpStage &stumps,
                                const DeviceLevel *levels, int level_count, int stride,
                                const int32_t *sum, const int32_t *sqsum, const int32_t *tilted,
                                int end, uint8_t *status, float *norms, cudaStream_t stream);
// A segment before the last, stages [first, end) of the queue `in` into the queue `out`, `group`
// lanes a window (2, 4, 8, 16 or 32) and `shared` bytes of leaves a block; stumps: the trees as
// haar_stumps, or null to read the model's tables.
cudaError_t middle_segment_async(int group, unsigned blocks, size_t shared, const CascadeView &c,
                                 const HaarStump *stumps, const DeviceLevel *levels, int stride,
                                 const int32_t *sum, const int32_t *tilted, int first, int end,
                                 const QueueEntry *in, const uint32_t *in_count, QueueEntry *out,
                                 uint32_t *out_count, int max_trees, cudaStream_t stream);
// The last segment: the windows that pass into `windows`, or, where finals.list is set, into
// each frame's list for device candidates.
cudaError_t last_segment_async(int group, unsigned blocks, size_t shared, const CascadeView &c,
                               const HaarStump *stumps, const DeviceLevel *levels, int stride,
                               const int32_t *sum, const int32_t *tilted, int first, int end,
                               const QueueEntry *in, const uint32_t *in_count, OutWindow *windows,
                               uint32_t *window_count, const Finals &finals, int max_trees,
                               cudaStream_t stream);

// The row walk (cascade_walk.cu): OpenCV's walk along each grid row over segment 1's statuses,
// the windows it reaches alive queued for the next segment, those it reaches counted.
cudaError_t walk_rows_async(int total_grid_rows, const DeviceLevel *levels, int level_count,
                            const uint8_t *status, const float *norms, QueueEntry *queue,
                            uint32_t *queue_count, unsigned long long *reached_count,
                            cudaStream_t stream);

// The output (cascade_output.cu). Each frame's listed windows as its device candidates, in
// detect()'s order; blocks_per_frame blocks a frame.
cudaError_t emit_candidates_async(unsigned blocks_per_frame, int frames, const Finals &finals,
                                  const DeviceLevel *levels, int level_count, cudaStream_t stream);
// The counts and the first `capacity` windows into mapped host memory.
cudaError_t publish_async(const uint32_t *counts, int count_n, const unsigned long long *reached,
                          const OutWindow *windows, uint32_t capacity, uint32_t *h_counts,
                          unsigned long long *h_reached, OutWindow *h_windows, cudaStream_t stream);

}  // namespace cudanms::cascade::detail
