// Rule 5 on the device (neighbours.h).
#include "neighbours.h"
#include "output.h"

namespace cudanms::detail {
namespace {

constexpr int kCountThreads = 256;

// A block per kept slot in turn: the ranks after its kept rank, a thread each in turn, that it
// suppresses by the method's rule.
__global__ void __launch_bounds__(kCountThreads)
    count_neighbours_kernel(const FrameArgs *frame, Method method) {
  const FrameArgs f = *frame;
  __shared__ uint32_t s_counts[kCountThreads / kWarp];
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t found = f.header[kKeptCount];
  for (uint32_t slot = blockIdx.x; slot < found; slot += gridDim.x) {
    const uint32_t r = f.kept_ranks[slot];
    const Box a = to_box(f.rank_boxes[r]);
    const float score_a = f.rank_scores[r];
    const int32_t class_a = f.rank_classes[r];
    uint32_t count = 0;
    for (uint32_t i = r + 1 + threadIdx.x; i < m; i += kCountThreads) {
      if (f.rank_classes[i] != class_a) continue;
      const Box b = to_box(f.rank_boxes[i]);
      count += method == Method::kGreedy
                   ? greedy_suppresses(f.overlap, f.threshold, a, b)
                   : matrix_suppresses(f.overlap, f.threshold, a, score_a, b, f.rank_scores[i]);
    }
    count = warp_sum(count);
    if (threadIdx.x % kWarp == 0) s_counts[threadIdx.x / kWarp] = count;
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t total = 0;
      for (uint32_t w = 0; w < kCountThreads / kWarp; ++w) total += s_counts[w];
      f.neighbours[slot] = total;
    }
    __syncthreads();  // s_counts is reused
  }
}

// One block: the kept slots 1024 at a time, each read before any of them is written (a slot
// moves only to a lower one).
__global__ void __launch_bounds__(kOutputThreads) keep_neighboured_kernel(const FrameArgs *frame) {
  const FrameArgs f = *frame;  // a copy: the stores below cannot alias it
  __shared__ OutputScan::TempStorage scan;
  const uint32_t found = f.header[kKeptCount];
  const bool values = f.kept_boxes != nullptr;
  uint32_t base = 0;
  for (uint32_t first = 0; first < found; first += kOutputThreads) {
    const uint32_t i = first + threadIdx.x;
    const bool enough = i < found && f.neighbours[i] >= f.min_neighbors;
    uint32_t index = 0, neighbours = 0;
    float4 box{};
    float score = 0;
    int32_t class_id = 0;
    if (enough) {
      index = f.out[kHeaderWords + i];
      neighbours = f.neighbours[i];
      if (values) {
        box = f.kept_boxes[i];
        score = f.kept_scores[i];
        class_id = f.kept_classes[i];
      }
    }
    uint32_t slot = 0, total = 0;
    OutputScan(scan).ExclusiveSum(enough ? 1u : 0u, slot, total);
    __syncthreads();
    slot += base;
    const bool stays = enough && slot < f.detections;
    if (f.slot_moves && i < found) f.slot_moves[i] = stays ? slot : UINT32_MAX;
    if (stays) {
      f.out[kHeaderWords + slot] = index;
      f.kept_neighbours[slot] = neighbours;
      if (values) {
        f.kept_boxes[slot] = box;
        f.kept_scores[slot] = score;
        f.kept_classes[slot] = class_id;
      }
    }
    base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) f.out[kKeptCount] = f.header[kKeptCount] = min(base, f.detections);
}

}  // namespace

cudaError_t launch_count_neighbours(const FrameArgs *frame, Method method, int sms,
                                    cudaStream_t stream) {
  count_neighbours_kernel<<<4 * sms, kCountThreads, 0, stream>>>(frame, method);
  return cudaGetLastError();
}

cudaError_t launch_keep_neighboured(const FrameArgs *frame, cudaStream_t stream) {
  keep_neighboured_kernel<<<1, kOutputThreads, 0, stream>>>(frame);
  return cudaGetLastError();
}

}  // namespace cudanms::detail
