// The cascade's row walk (cascade_stages.h): OpenCV steps along a row of windows and skips the
// one after a window that fails the first stage; here that walk is a warp scan over segment 1's
// statuses, and the windows it reaches alive are queued for the next segment.
#include "cuda/cascade_stages.h"

namespace cudanms::cascade::detail {
namespace {

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

}  // namespace

cudaError_t walk_rows_async(int total_grid_rows, const DeviceLevel *levels, int level_count,
                            const uint8_t *status, const float *norms, QueueEntry *queue,
                            uint32_t *queue_count, unsigned long long *reached_count,
                            cudaStream_t stream) {
  walk_rows<<<static_cast<unsigned>(total_grid_rows), kWalkWarps * 32, 0, stream>>>(
      levels, level_count, status, norms, queue, queue_count, reached_count);
  return cudaGetLastError();
}

}  // namespace cudanms::cascade::detail
