// The output stage's kernels of their own (output.h): a single frame's output after the dataflow
// settle, and device candidates' kept values.
#include "output.h"

namespace cudanms::detail {
namespace {

// The output of a single frame after dataflow_settle_kernel, from its words of kept ranks. Block
// b writes the kept ranks among [1024b, 1024b + 1024), a thread each, after summing the words
// before them itself: no pass between blocks, and no thread walks the ranks in turn (one block
// doing so took 49 us at 100 000 candidates, a global read's latency per 1 024 ranks).
__global__ void __launch_bounds__(kOutputThreads) output_kernel(const FrameArgs *frame) {
  constexpr uint32_t kWords = kOutputThreads / kWarp;  // the block's words of ranks
  __shared__ uint32_t s_sums[kWords][2];               // per warp: kept before the block, in all
  __shared__ uint32_t s_first_slot[kWords];            // per word of the block
  const FrameArgs f = *frame;                          // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t words = words_of(m);
  const uint32_t first_word = blockIdx.x * kWords;
  if (first_word >= words && blockIdx.x > 0) return;  // launched for the most ranks there can be
  const uint32_t warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  uint32_t before = 0, total = 0;
  for (uint32_t w = threadIdx.x; w < words; w += kOutputThreads) {
    const uint32_t kept = __popc(f.kept_words[w]);
    total += kept;
    if (w < first_word) before += kept;
  }
  before = warp_sum(before);
  total = warp_sum(total);
  if (lane == 0) {
    s_sums[warp][0] = before;
    s_sums[warp][1] = total;
  }
  __syncthreads();
  if (warp == 0) {  // the slot of each of the block's words: the sums, then a scan of its words
    before = warp_sum(s_sums[lane][0]);
    total = warp_sum(s_sums[lane][1]);
    const uint32_t w = first_word + lane;
    const uint32_t here = w < words ? __popc(f.kept_words[w]) : 0;
    s_first_slot[lane] = before + warp_inclusive_sum(here, lane) - here;
    if (blockIdx.x == 0) write_kept_count(f, total);
  }
  if (blockIdx.x == 0) copy_counters(f);
  __syncthreads();
  const uint32_t i = first_word * kWarp + threadIdx.x;
  if (i < m) {
    const uint32_t bits = f.kept_words[i / kWarp], bit = i % kWarp;
    if ((bits >> bit) & 1u) write_kept(f, s_first_slot[warp] + __popc(bits & ((1u << bit) - 1)), i);
  }
}

// Device candidates: the kept ones' values, straight into mapped host memory.
__global__ void kept_values_kernel(const uint32_t *out, const float4 *boxes, const float *scores,
                                   const int32_t *classes, float4 *kept_boxes, float *kept_scores,
                                   int32_t *kept_classes) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= out[kKeptCount]) return;
  const uint32_t p = out[kHeaderWords + k];
  kept_boxes[k] = boxes[p];
  kept_scores[k] = scores[p];
  kept_classes[k] = classes ? classes[p] : 0;
}

}  // namespace

cudaError_t launch_output_from_words(const FrameArgs *frame, uint32_t most, cudaStream_t stream) {
  output_kernel<<<(most + kOutputThreads - 1) / kOutputThreads, kOutputThreads, 0, stream>>>(frame);
  return cudaGetLastError();
}

cudaError_t launch_kept_values(const uint32_t *out, uint32_t limit, const float4 *boxes,
                               const float *scores, const int32_t *classes, float4 *kept_boxes,
                               float *kept_scores, int32_t *kept_classes, cudaStream_t stream) {
  kept_values_kernel<<<(limit + 255) / 256, 256, 0, stream>>>(
      out, boxes, scores, classes, kept_boxes, kept_scores, kept_classes);
  return cudaGetLastError();
}

}  // namespace cudanms::detail
