// The pair stage in rank order (pairs.h): every pair j < i of ranks tested, a block per
// (8 ranks i, 256 ranks j staged in shared memory), a warp per i, a ballot per 32 j < i. Greedy's
// predecessor lists cost memory O(Dmax * kMaxPredecessors), not Dmax²; a single frame past
// kSpatialPairsMin goes to spatial_pairs.cu instead.
#include <cuda/atomic>

#include "pairs.h"

namespace cudanms::detail {
namespace {

constexpr int kPairWarps = 8;               // per pair block
constexpr uint32_t kPairRows = kPairWarps;  // ranks i per pair block, one per warp
constexpr uint32_t kPairChunks = 8;         // 32-rank chunks of j per pair block
constexpr uint32_t kPairColumns = kPairChunks * kWarp;

// Block (x, y) tests the kPairRows ranks i from kPairRows * x against the ranks j < i of
// [256y, 256y + 256), which it stages in shared memory once for all its rows: warp w takes
// one row (four made small frames slower, their latencies adding up), lane l the ranks
// j = 256y + 32c + l, and a ballot gathers each 32-rank chunk's verdicts. Blocks
// run roughly in order of x first, so a rank's first columns are tested before its later ones:
// where those already settle it (a matrix suppressor, an overflowing greedy list), the rest skip
// it, and piles of duplicates cost O(N), not O(N^2).
template <Method kMethod>
__global__ void __launch_bounds__(kPairWarps *kWarp) pairs_kernel(const FrameArgs *frames) {
  __shared__ float4 s_boxes[kPairColumns];
  __shared__ float s_scores[kPairColumns];
  __shared__ int32_t s_classes[kPairColumns];
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const uint32_t m = ranked_count(f.header, f.dmax);
  const uint32_t first_row = blockIdx.x * kPairRows;
  const uint32_t first_j = blockIdx.y * kPairColumns;
  if (first_row >= m || first_j + 1 >= min(first_row + kPairRows, m)) return;  // no j < i here
  for (uint32_t t = threadIdx.x; t < kPairColumns; t += blockDim.x) {
    const uint32_t j = first_j + t;
    if (j >= m) break;
    s_boxes[t] = f.rank_boxes[j];
    s_classes[t] = f.rank_classes[j];
    if (kMethod == Method::kMatrix) s_scores[t] = f.rank_scores[j];
  }
  __syncthreads();

  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t below_lane = (1u << lane) - 1;
  // A count past this settles the rank: other blocks add to it meanwhile, and an early or late
  // read only costs work.
  const uint32_t settled_by = kMethod == Method::kGreedy ? kMaxPredecessors : 0;
  const uint32_t i = first_row + threadIdx.x / kWarp;  // the whole warp's
  if (i >= m || first_j >= i) return;
  if (cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(f.counts[i])
          .load(cuda::memory_order_relaxed) > settled_by) {
    return;
  }
  const Box b = to_box(f.rank_boxes[i]);
  const float score_b = f.rank_scores[i];
  const int32_t class_b = f.rank_classes[i];
  const uint32_t chunks = min(kPairChunks, words_of(i - first_j));
  uint32_t bits[kPairChunks];
  uint32_t total = 0;
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    const uint32_t t = c * kWarp + lane;
    bool suppresses = false;
    if (c < chunks && first_j + t < i && s_classes[t] == class_b) {
      const Box a = to_box(s_boxes[t]);
      suppresses = kMethod == Method::kGreedy
                       ? greedy_suppresses(f.overlap, f.threshold, a, b)
                       : matrix_suppresses(f.overlap, f.threshold, a, s_scores[t], b, score_b);
    }
    bits[c] = __ballot_sync(kFullMask, suppresses);
    total += __popc(bits[c]);
  }
  if (total == 0) return;
  if (kMethod == Method::kMatrix) {
    if (lane == 0) atomicAdd(&f.counts[i], 1u);  // one suppressor settles it
    return;
  }
  // One atomic per row reserves the slots of all its chunks.
  uint32_t slot = 0;
  if (lane == 0) slot = atomicAdd(&f.counts[i], total);
  slot = __shfl_sync(kFullMask, slot, 0);
  uint32_t *row = f.predecessors + size_t{i} * kMaxPredecessors;
#pragma unroll
  for (uint32_t c = 0; c < kPairChunks; ++c) {
    const uint32_t mine = slot + __popc(bits[c] & below_lane);
    if ((bits[c] >> lane) & 1u && mine < kMaxPredecessors) row[mine] = first_j + c * kWarp + lane;
    slot += __popc(bits[c]);
  }
}

}  // namespace

cudaError_t launch_pairs(const FrameArgs *frames, uint32_t count, Method method, uint32_t most,
                         int sms, const SpatialPairsBuffers &spatial, cudaStream_t stream) {
  if (in_spatial_order(count, most)) {
    return launch_spatial_pairs(frames, method, most, sms, spatial, stream);
  }
  const dim3 grid((most + kPairRows - 1) / kPairRows, (most + kPairColumns - 1) / kPairColumns,
                  count);
  if (method == Method::kGreedy) {
    pairs_kernel<Method::kGreedy><<<grid, kPairWarps * kWarp, 0, stream>>>(frames);
  } else {
    pairs_kernel<Method::kMatrix><<<grid, kPairWarps * kWarp, 0, stream>>>(frames);
  }
  return cudaGetLastError();
}

}  // namespace cudanms::detail
