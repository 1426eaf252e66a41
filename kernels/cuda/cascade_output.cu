// The cascade's output (cascade_stages.h): the windows that pass every stage, as each frame's
// device candidates in detect()'s order, or copied to mapped host memory for detect().
#include "cuda/cascade_stages.h"

namespace cudanms::cascade::detail {
namespace {

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

}  // namespace

cudaError_t emit_candidates_async(unsigned blocks_per_frame, int frames, const Finals &finals,
                                  const DeviceLevel *levels, int level_count, cudaStream_t stream) {
  emit_candidates<<<dim3(blocks_per_frame, static_cast<unsigned>(frames)), kThreads, 0, stream>>>(
      finals, levels, level_count);
  return cudaGetLastError();
}

cudaError_t publish_async(const uint32_t *counts, int count_n, const unsigned long long *reached,
                          const OutWindow *windows, uint32_t capacity, uint32_t *h_counts,
                          unsigned long long *h_reached, OutWindow *h_windows,
                          cudaStream_t stream) {
  publish<<<64, kThreads, 0, stream>>>(counts, count_n, reached, windows, capacity, h_counts,
                                       h_reached, h_windows);
  return cudaGetLastError();
}

}  // namespace cudanms::cascade::detail
