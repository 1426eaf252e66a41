// The cascade's row walk (cascade_stages.h): OpenCV steps along a row of windows and skips the
// one after a window that fails the first stage; here that walk is worked out from ballots of
// segment 1's statuses, and the windows it reaches alive are queued for the next segment.
#include "cuda/cascade_stages.h"

namespace cudanms::cascade::detail {
namespace {

// OpenCV's walk along a row lands on the window after any window that did not fail the first
// stage, and skips the one after a window it lands on that did: through a run of failed windows
// it lands on every other one. So it lands on window j when j is an even distance past the last
// window before j that did not fail (k: j - k - 1 even), or, with none of those in the chunk,
// as it landed on the chunk's first window when j is even in the chunk and otherwise not. A
// warp takes 32 windows of a row a lane each; one ballot of "did not fail" gives every lane its
// k. (A warp scan composing each window's map of the walk's state took five shuffles a chunk
// and a tenth of a frame's instructions.)
struct WalkChunk {
  uint32_t reached;     // the windows of the chunk the walk lands on
  uint32_t alive;       // those of them that passed segment 1
  uint32_t lands_next;  // whether it lands on the next chunk's first window
};

__device__ uint32_t lands_after(uint32_t not_failed, uint32_t lands_first, int j) {
  const uint32_t before = j == 32 ? not_failed : not_failed & ((1u << j) - 1);
  if (before == 0) return lands_first ^ (j & 1u);
  return (j - (31 - __clz(before))) & 1u;
}

__device__ WalkChunk walk_chunk(const uint8_t *row_status, int cols, int col0, int lane,
                                uint32_t lands_first) {
  const int col = col0 + lane;
  const uint8_t status = col < cols ? row_status[col] : 0;
  const uint32_t not_failed = __ballot_sync(kFullMask, status != 0);
  WalkChunk w;
  w.reached = __ballot_sync(kFullMask, col < cols && lands_after(not_failed, lands_first, lane));
  w.alive = __ballot_sync(kFullMask, status == 2);
  w.lands_next = lands_after(not_failed, lands_first, 32);
  return w;
}

// A block per grid row, its warps over consecutive stretches of the row's windows, 32 at a time:
// each warp first finds where its stretch would leave the walk (a stretch with a window that did
// not fail decides it alone; one without leaves it as it came: its length is even), the warps
// before it give the state it starts in, then it walks its stretch again, counting the alive
// windows the walk reaches, and a third time to queue them. The block claims its place in the
// queue with one atomic: one per window chunk put thousands of same-address atomics on a 1080p
// frame. (A warp per row walked a 1080p row's ~30 chunks in a chain.)
constexpr int kWalkWarps = 8;

// How a stretch leaves the walk: kKeeps (as it came) or whether it lands after it.
constexpr uint32_t kKeeps = 2;

// OpenCV's walk through chunks [begin, end) of a row, landing on the first window or not:
// visit(column of the lane, bits of the windows reached, bits of those that join the queue).
template <typename Visit>
__device__ void walk_stretch(const uint8_t *row_status, int cols, int begin, int end,
                             uint32_t lands, int lane, Visit visit) {
  for (int c = begin; c < end; ++c) {
    const WalkChunk w = walk_chunk(row_status, cols, c * 32, lane, lands);
    lands = w.lands_next;
    visit(c * 32 + lane, w.reached, w.reached & w.alive);
  }
}

__global__ void __launch_bounds__(kWalkWarps * 32)
    walk_rows(const DeviceLevel *levels, int level_count, const uint8_t *status, const float *norms,
              QueueEntry *queue, uint32_t *queue_count, unsigned long long *reached_count) {
  __shared__ uint32_t stretch_leaves[kWalkWarps], joining_counts[kWalkWarps],
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
  uint32_t leaves = kKeeps;
  for (int c = chunk_begin; c < chunk_end; ++c) {
    const int col = c * 32 + lane;
    const uint32_t not_failed = __ballot_sync(kFullMask, col < level.cols && row_status[col] != 0);
    if (not_failed) leaves = lands_after(not_failed, 0, 32);
  }
  if (lane == 0) stretch_leaves[warp] = leaves;
  __syncthreads();
  uint32_t lands = 1;  // whether the walk lands on the stretch's first window
  for (int w = 0; w < warp; ++w)
    if (stretch_leaves[w] != kKeeps) lands = stretch_leaves[w];

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
