// The rank stage (rank.h):
//   classify  rules 1-2 on the device: each candidate's sort key is its score (-0.0 made +0.0),
//             or -inf when it is invalid or below the score threshold; the counters, and the
//             extent of the eligible centres (where spatial_pairs.cu lays its grid)
//   rank      rule 3: eligible candidates ordered by key, descending, equal keys by index, and
//             the best Dmax gathered into rank order. Up to kCountingRankMax candidates each
//             one's rank is counted in parallel, one launch; larger frames use CUB's radix sort
//             (stable, so equal keys keep index order) and a gather. Device candidates are always
//             counted, a tile of keys at a time: the sort would need their count on the host.
// Placing a rank also zeroes its predecessor count and makes it undecided, for the next stages.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>

#include "rank.h"

namespace cudanms::detail {
namespace {

constexpr int kClassifyThreads = 256;
constexpr int kCountingWarps = 32;  // each counts over a 32nd of the frame

// Warp-aggregated: one atomic per warp and counter.
__device__ void count_in(uint32_t *counter, bool flag) {
  const uint32_t votes = __ballot_sync(kFullMask, flag);
  if (threadIdx.x % kWarp == 0 && votes != 0) atomicAdd(counter, __popc(votes));
}

// n is the capacity; the count is a device word (the staged header's, or the producer's), and
// the slots past it are never read.
__global__ void __launch_bounds__(kClassifyThreads) classify_kernel(const FrameArgs *frames) {
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const float4 *boxes = f.boxes;
  const float *scores = f.scores;
  const uint32_t n = f.capacity;
  const uint32_t *d_count = f.count;
  float *keys = f.keys;
  uint32_t *header = f.header;
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = min(*d_count, n);
  if (p == 0 && d_count != header + kIn) {  // a producer's count: into the header
    header[kIn] = *d_count;
    header[kCountOverflow] = *d_count > n;
  }
  bool valid = false;
  bool below = false;
  float4 box = make_float4(0, 0, 0, 0);
  if (p < count) {
    const float s = scores[p];
    box = boxes[p];
    valid = is_valid(to_box(box), s);
    below = valid && s < f.score_threshold;
    keys[p] = valid && !below ? s + 0.0f : -INFINITY;  // radix sort would put -0.0 below +0.0
  }
  count_in(&header[kInvalid], p < count && !valid);
  count_in(&header[kBelowScore], below);
  count_in(&header[kEligible], valid && !below);
  // The eligible centres' extent (frame_args.h), warp by warp: zero is below every key.
  uint32_t extent[4] = {0, 0, 0, 0};  // least x, least y (inverted), most x, most y
  if (valid && !below) {
    const uint32_t x = ordered_bits(0.5f * box.x + 0.5f * box.z);
    const uint32_t y = ordered_bits(0.5f * box.y + 0.5f * box.w);
    extent[0] = ~x;
    extent[1] = ~y;
    extent[2] = x;
    extent[3] = y;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      extent[k] = max(extent[k], __shfl_xor_sync(kFullMask, extent[k], offset));
    }
  }
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t mine = lane == 0   ? extent[0]
                        : lane == 1 ? extent[1]
                        : lane == 2 ? extent[2]
                                    : extent[3];
  if (lane < 4 && mine != 0) atomicMax(&header[kLeastX + lane], mine);
}

// Puts the candidate `p` of key `key` at rank r (< Dmax), zeroes its predecessor count and makes
// it undecided.
__device__ void place(const FrameArgs &f, uint32_t r, uint32_t p, float key) {
  f.order[r] = p;
  f.rank_scores[r] = key;
  f.rank_boxes[r] = f.boxes[p];
  f.rank_classes[r] = class_of(f, p);
  f.counts[r] = 0;
  f.statuses[r] = kUndecided;
}

// The keys of s_keys[from, to) (a multiple of 4 apart, 16-byte aligned) ranked before `key`,
// `before(other, key)` the order's test over that range: a 16-byte broadcast read for 4 tests, into
// 4 counts, so that no test waits on the one before it.
template <typename Before>
__device__ uint32_t count_before(const float *s_keys, uint32_t from, uint32_t to, float key,
                                 Before before) {
  uint32_t counts[4] = {0, 0, 0, 0};
#pragma unroll 4
  for (uint32_t j = from; j < to; j += 4) {
    const float4 o = *reinterpret_cast<const float4 *>(s_keys + j);
    counts[0] += before(o.x, key);
    counts[1] += before(o.y, key);
    counts[2] += before(o.z, key);
    counts[3] += before(o.w, key);
  }
  return counts[0] + counts[1] + counts[2] + counts[3];
}

// The rank stage in one launch: an eligible candidate's rank is the number of candidates ranked
// before it (ineligible keys are -inf, below every eligible one). Block b ranks the 32
// candidates 32b + lane; its warps count over slices of the keys, staged in shared memory a tile
// of kCountingRankMax at a time. Equal keys rank by index, which only the block's own 32 keys
// need tested: the keys before them rank first when equal, those after them never (one float
// test a key, where testing the index too took 51 us at 10 000 on an H100, against 37 us). Host
// frames take it up to one tile (larger ones are sorted); device candidates always, as only the
// device knows their count: blocks past it leave at once, so the work follows the frame's count,
// not the buffer's capacity.
// Two blocks a multiprocessor where one holds 2 048 threads (sm_80 and sm_90).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ >= 900)
constexpr int kCountingBlocksPerSm = 2;
#else
constexpr int kCountingBlocksPerSm = 1;
#endif
__global__ void __launch_bounds__(kCountingWarps *kWarp, kCountingBlocksPerSm)
    counting_rank_kernel(const FrameArgs *frames) {
  extern __shared__ float4 s_tile[];
  __shared__ uint32_t s_before[kCountingWarps][kWarp];
  float *s_keys = reinterpret_cast<float *>(s_tile);
  const FrameArgs f = frames[blockIdx.z];  // a copy: the stores below cannot alias it
  const float *keys = f.keys;
  const uint32_t count = min(*f.count, f.capacity);
  const uint32_t base = blockIdx.x * kWarp;
  if (base >= count) return;  // the whole block
  const uint32_t warp = threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t p = base + lane;
  const float key = p < count ? keys[p] : -INFINITY;
  uint32_t before = 0;
  for (uint32_t tile = 0; tile < count; tile += kCountingRankMax) {
    const uint32_t size = min(kCountingRankMax, count - tile);
    const uint32_t padded = (size + 3) / 4 * 4;  // -inf past the count: before no key
    __syncthreads();                             // every warp is done with the previous tile
    for (uint32_t j = threadIdx.x; j < padded; j += blockDim.x) {
      s_keys[j] = j < size ? keys[tile + j] : -INFINITY;
    }
    __syncthreads();
    const uint32_t slice = (padded / 4 + kCountingWarps - 1) / kCountingWarps * 4;
    const uint32_t from = min(padded, warp * slice), to = min(padded, from + slice);
    // The block's own keys within this tile, clamped to the warp's slice.
    const auto clamp_to = [](int64_t v, uint32_t lo, uint32_t hi) {
      return static_cast<uint32_t>(min(max(v, int64_t{lo}), int64_t{hi}));
    };
    const int64_t own = int64_t{base} - tile;
    const uint32_t own_from = clamp_to(own, from, to);
    const uint32_t own_to = clamp_to(own + kWarp, own_from, to);
    before += count_before(s_keys, from, own_from, key,
                           [](float other, float k) -> uint32_t { return other >= k; });
    for (uint32_t j = own_from; j < own_to; ++j) {
      const float other = s_keys[j];
      before += other > key || (other == key && tile + j < p);
    }
    before += count_before(s_keys, own_to, to, key,
                           [](float other, float k) -> uint32_t { return other > k; });
  }
  s_before[warp][lane] = before;
  __syncthreads();
  if (warp == 0 && key != -INFINITY) {
    uint32_t r = 0;
    for (int w = 0; w < kCountingWarps; ++w) r += s_before[w][lane];
    if (r < f.dmax) place(f, r, p, key);
  }
}

// After CUB's sort of one frame's keys: the best ranks gathered, in place over `order`.
__global__ void gather_kernel(const FrameArgs *frame, const float *sorted_keys) {
  const FrameArgs f = *frame;
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < ranked_count(f.header, f.dmax)) place(f, r, f.order[r], sorted_keys[r]);
}

__global__ void iota_kernel(uint32_t *values, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

}  // namespace

cudaError_t sort_temp_bytes(uint32_t capacity, size_t *bytes, cudaStream_t stream) {
  *bytes = 0;
  return cub::DeviceRadixSort::SortPairsDescending(
      nullptr, *bytes, static_cast<const float *>(nullptr), static_cast<float *>(nullptr),
      static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr),
      static_cast<int>(capacity), 0, 32, stream);
}

cudaError_t iota_into(uint32_t *values, uint32_t n, cudaStream_t stream) {
  iota_kernel<<<(n + 255) / 256, 256, 0, stream>>>(values, n);
  return cudaGetLastError();
}

cudaError_t prepare_rank() {
  // Past the default 48 KiB, shared memory must be asked for: up to 64 KiB of keys.
  cudaError_t error =
      cudaFuncSetAttribute(counting_rank_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kCountingRankMax * sizeof(float)));
  if (error != cudaSuccess) return error;
  // Room for two counting blocks a multiprocessor, keys included: Nsight Compute found one
  // resident (57 registers a thread, 64 KB of shared memory configured); asking for two and
  // the largest shared memory took the kernel from 39 to 36 us at 10 000 candidates.
  return cudaFuncSetAttribute(counting_rank_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared);
}

cudaError_t launch_rank(const FrameArgs *frames, uint32_t count, uint32_t capacity, uint32_t most,
                        const RankSortBuffers *sort, cudaStream_t stream) {
  classify_kernel<<<dim3((capacity + kClassifyThreads - 1) / kClassifyThreads, 1, count),
                    kClassifyThreads, 0, stream>>>(frames);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  if (sort == nullptr) {
    const size_t tile_bytes = (std::min(capacity, kCountingRankMax) + 3) / 4 * 4 * sizeof(float);
    counting_rank_kernel<<<dim3((capacity + kWarp - 1) / kWarp, 1, count), kCountingWarps * kWarp,
                           tile_bytes, stream>>>(frames);
    return cudaGetLastError();
  }
  size_t temp_bytes = sort->temp_bytes;
  error = cub::DeviceRadixSort::SortPairsDescending(sort->temp, temp_bytes, sort->keys,
                                                    sort->sorted_keys, sort->iota, sort->order,
                                                    static_cast<int>(capacity), 0, 32, stream);
  if (error != cudaSuccess) return error;
  gather_kernel<<<(most + 255) / 256, 256, 0, stream>>>(frames, sort->sorted_keys);
  return cudaGetLastError();
}

}  // namespace cudanms::detail
