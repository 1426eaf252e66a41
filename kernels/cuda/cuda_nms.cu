// The CUDA backend. Per frame, on one stream, with one host synchronisation at the end:
//   host:  rules 1-3 (common/select.h), candidates packed into one pinned buffer
//   H2D    one copy
//   sort   scores descending (CUB radix sort, stable: equal scores keep index order)
//   gather boxes and classes into rank order
//   mask   bit j of row i: the candidate of rank j < i suppresses the one of rank i (warp ballots)
//   reduce greedy: resolved 32 ranks at a time in one block; matrix: AND over each row
//   compact kept ranks into packed positions, capped at max_detections
//   D2H    one copy, then the host maps packed positions to candidate indices
// The mask is dense (Dmax^2 bits), which bounds Dmax on this path; see kMaxCudaCandidates.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "common/overlap.h"
#include "common/select.h"
#include "cuda_nms.h"

#define CUDANMS_TRY(call)                       \
  do {                                          \
    const cudaError_t cudanms_error_ = (call);  \
    if (cudanms_error_ != cudaSuccess) {        \
      return cuda_error(#call, cudanms_error_); \
    }                                           \
  } while (0)

namespace cudanms {
namespace detail {
namespace {

constexpr uint32_t kWarp = 32;
constexpr uint32_t kFullMask = 0xffffffffu;
constexpr int kResolveThreads = 1024;  // 32 warps: one per rank of the 32-rank word in flight
constexpr int kMaskRowsPerBlock = 8;

// The greedy reduce keeps one bit per candidate in shared memory (32 KiB of the default 48).
constexpr size_t kMaxCudaCandidates = 256 * 1024;

Status cuda_error(const char *what, cudaError_t error) {
  return Status::Error(std::string(what) + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

__host__ __device__ uint32_t words_for(uint32_t n) { return (n + kWarp - 1) / kWarp; }

__device__ Box to_box(float4 v) { return {v.x, v.y, v.z, v.w}; }

__global__ void gather_kernel(const float4 *boxes, const int32_t *classes, const uint32_t *order,
                              uint32_t m, float4 *rank_boxes, int32_t *rank_classes) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < m) {
    const uint32_t p = order[r];
    rank_boxes[r] = boxes[p];
    rank_classes[r] = classes[p];
  }
}

// One warp per (row i, word w): lane l tests whether rank j = 32w + l suppresses rank i.
// Only words holding some j < i are written; the reducers read no others.
template <Method kMethod>
__global__ void mask_kernel(const float4 *rank_boxes, const float *rank_scores,
                            const int32_t *rank_classes, uint32_t m, uint32_t words,
                            Overlap overlap_kind, float threshold, uint32_t *mask) {
  const uint32_t i = blockIdx.y * blockDim.y + threadIdx.y;
  const uint32_t w = blockIdx.x;
  if (i >= m || w * kWarp >= i) return;
  const uint32_t j = w * kWarp + threadIdx.x;
  bool suppresses = false;
  if (j < i && rank_classes[j] == rank_classes[i]) {
    const Box a = to_box(rank_boxes[j]);
    const Box b = to_box(rank_boxes[i]);
    if (kMethod == Method::kGreedy) {
      suppresses = greedy_suppresses(overlap_kind, threshold, a, b);
    } else {
      suppresses = matrix_suppresses(overlap_kind, threshold, a, rank_scores[j], b, rank_scores[i]);
    }
  }
  const uint32_t bits = __ballot_sync(kFullMask, suppresses);
  if (threadIdx.x == 0) mask[static_cast<size_t>(i) * words + w] = bits;
}

// Exact greedy in rank order, 32 ranks per step: warp t finds whether a kept candidate of an
// earlier word suppresses rank 32w + t, then one thread settles the word's ranks in order.
__global__ void greedy_reduce_kernel(const uint32_t *mask, uint32_t m, uint32_t words,
                                     uint32_t *kept_bits) {
  extern __shared__ uint32_t s_kept[];
  __shared__ bool s_suppressed_before[kWarp];
  __shared__ uint32_t s_diagonal[kWarp];
  const uint32_t t = threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  for (uint32_t w = 0; w < words; ++w) {
    const uint32_t r = w * kWarp + t;
    if (r < m) {
      const uint32_t *row = mask + static_cast<size_t>(r) * words;
      uint32_t hits = 0;
      for (uint32_t v = lane; v < w; v += kWarp) hits |= row[v] & s_kept[v];
      const bool suppressed = __any_sync(kFullMask, hits != 0);
      if (lane == 0) {
        s_suppressed_before[t] = suppressed;
        s_diagonal[t] = t > 0 ? row[w] : 0u;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t word = 0;
      for (uint32_t k = 0; k < kWarp && w * kWarp + k < m; ++k) {
        if (!s_suppressed_before[k] && (s_diagonal[k] & word) == 0) word |= 1u << k;
      }
      s_kept[w] = word;
    }
    __syncthreads();
  }
  for (uint32_t v = threadIdx.x; v < words; v += blockDim.x) kept_bits[v] = s_kept[v];
}

// The paper's reduce: rank i is kept iff its row holds no suppressing bit. One block per word
// of 32 ranks, one warp per rank, then a ballot packs the 32 answers into the word.
__global__ void matrix_reduce_kernel(const uint32_t *mask, uint32_t m, uint32_t words,
                                     uint32_t *kept_bits) {
  __shared__ bool s_kept[kWarp];
  const uint32_t w = blockIdx.x;
  const uint32_t t = threadIdx.x / kWarp;
  const uint32_t lane = threadIdx.x % kWarp;
  const uint32_t r = w * kWarp + t;
  bool kept = false;
  if (r < m) {
    const uint32_t *row = mask + static_cast<size_t>(r) * words;
    const uint32_t row_words = words_for(r);  // words holding ranks j < r
    uint32_t hits = 0;
    for (uint32_t v = lane; v < row_words; v += kWarp) hits |= row[v];
    kept = __all_sync(kFullMask, hits == 0);
  }
  if (lane == 0) s_kept[t] = kept;
  __syncthreads();
  if (t == 0) {
    const uint32_t bits = __ballot_sync(kFullMask, s_kept[lane]);
    if (lane == 0) kept_bits[w] = bits;
  }
}

// out[0] = number kept (at most limit); out[1..] = packed positions of the kept, in rank order.
__global__ void compact_kernel(const uint32_t *kept_bits, uint32_t words, const uint32_t *order,
                               uint32_t limit, uint32_t *out) {
  using Scan = cub::BlockScan<uint32_t, kResolveThreads>;
  __shared__ typename Scan::TempStorage s_scan;
  __shared__ uint32_t s_base;
  if (threadIdx.x == 0) s_base = 0;
  __syncthreads();
  for (uint32_t start = 0; start < words; start += kResolveThreads) {
    const uint32_t w = start + threadIdx.x;
    uint32_t bits = w < words ? kept_bits[w] : 0u;
    uint32_t offset = 0;
    uint32_t total = 0;
    Scan(s_scan).ExclusiveSum(static_cast<uint32_t>(__popc(bits)), offset, total);
    offset += s_base;
    for (; bits != 0; bits &= bits - 1, ++offset) {
      if (offset < limit) out[1 + offset] = order[w * kWarp + (__ffs(bits) - 1)];
    }
    __syncthreads();
    if (threadIdx.x == 0) s_base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = s_base < limit ? s_base : limit;
}

__global__ void iota_kernel(uint32_t *values, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] = i;
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }
  Status allocate(size_t count) {
    cudaFree(ptr_);
    ptr_ = nullptr;
    CUDANMS_TRY(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    return Status::Ok();
  }
  T *get() const { return ptr_; }

 private:
  T *ptr_ = nullptr;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  Status allocate(size_t count) {
    cudaFreeHost(ptr_);
    ptr_ = nullptr;
    CUDANMS_TRY(cudaMallocHost(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    return Status::Ok();
  }
  T *get() const { return ptr_; }

 private:
  T *ptr_ = nullptr;
};

// Per candidate in the staging buffer: a float4 box, a score, a class id.
constexpr size_t kStagedBytes = sizeof(float4) + sizeof(float) + sizeof(int32_t);

class CudaContext final : public Context {
 public:
  CudaContext() = default;
  ~CudaContext() override {
    if (owns_stream_) cudaStreamDestroy(stream_);
  }

  Status init(const ContextOptions &options) {
    int count = 0;
    CUDANMS_TRY(cudaGetDeviceCount(&count));
    if (options.device < 0 || options.device >= count) {
      return Status::Error("CUDA device " + std::to_string(options.device) + " does not exist (" +
                           std::to_string(count) + " found)");
    }
    device_ = options.device;
    CUDANMS_TRY(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    CUDANMS_TRY(cudaGetDeviceProperties(&prop, device_));
    name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
    if (options.stream != nullptr) {
      stream_ = static_cast<cudaStream_t>(options.stream);
    } else {
      CUDANMS_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    return reserve(options.max_candidates);
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return name_; }

 private:
  Status run_checked(const CandidatesView &c, const Params &params, Result *result) override {
    select_candidates(c, params, &selected_, &result->counts);
    const auto m = static_cast<uint32_t>(selected_.size());
    if (m == 0) return Status::Ok();
    CUDANMS_TRY(cudaSetDevice(device_));
    Status status = reserve(std::max<size_t>(m, params.max_candidates));
    if (!status.ok()) return status;

    stage(c, params, m);
    status = launch(params, m);
    if (!status.ok()) return status;
    CUDANMS_TRY(cudaStreamSynchronize(stream_));

    const uint32_t *out = h_out_.get();
    result->kept.resize(out[0]);
    for (uint32_t k = 0; k < out[0]; ++k) result->kept[k] = selected_[out[1 + k]];
    result->counts.kept = out[0];
    return Status::Ok();
  }

  // Packs the selected candidates into the pinned staging buffer: m boxes, m scores, m classes.
  void stage(const CandidatesView &c, const Params &params, uint32_t m) {
    auto *boxes = reinterpret_cast<float4 *>(h_stage_.get());
    auto *scores = reinterpret_cast<float *>(boxes + m);
    auto *classes = reinterpret_cast<int32_t *>(scores + m);
    for (uint32_t p = 0; p < m; ++p) {
      const size_t index = selected_[p];
      std::memcpy(&boxes[p], c.boxes + 4 * index, sizeof(float4));
      // Radix sort orders -0.0 below +0.0; the rules rank them equal, so canonicalise.
      scores[p] = c.scores[index] + 0.0f;
      classes[p] = (params.class_agnostic || c.class_ids == nullptr) ? 0 : c.class_ids[index];
    }
  }

  Status launch(const Params &params, uint32_t m) {
    auto *d_boxes = reinterpret_cast<float4 *>(d_stage_.get());
    auto *d_scores = reinterpret_cast<float *>(d_boxes + m);
    auto *d_classes = reinterpret_cast<int32_t *>(d_scores + m);
    CUDANMS_TRY(cudaMemcpyAsync(d_stage_.get(), h_stage_.get(), m * kStagedBytes,
                                cudaMemcpyHostToDevice, stream_));

    size_t sort_bytes = sort_temp_bytes_;
    CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
        d_sort_temp_.get(), sort_bytes, d_scores, d_rank_scores_.get(), d_iota_.get(),
        d_order_.get(), static_cast<int>(m), 0, 32, stream_));

    const uint32_t blocks = (m + 255) / 256;
    gather_kernel<<<blocks, 256, 0, stream_>>>(d_boxes, d_classes, d_order_.get(), m,
                                               d_rank_boxes_.get(), d_rank_classes_.get());
    CUDANMS_TRY(cudaGetLastError());

    const uint32_t words = words_for(m);
    const dim3 mask_grid(words, (m + kMaskRowsPerBlock - 1) / kMaskRowsPerBlock);
    const dim3 mask_block(kWarp, kMaskRowsPerBlock);
    if (params.method == Method::kGreedy) {
      mask_kernel<Method::kGreedy><<<mask_grid, mask_block, 0, stream_>>>(
          d_rank_boxes_.get(), d_rank_scores_.get(), d_rank_classes_.get(), m, words,
          params.overlap, params.threshold, d_mask_.get());
      CUDANMS_TRY(cudaGetLastError());
      greedy_reduce_kernel<<<1, kResolveThreads, words * sizeof(uint32_t), stream_>>>(
          d_mask_.get(), m, words, d_kept_bits_.get());
    } else {
      mask_kernel<Method::kMatrix><<<mask_grid, mask_block, 0, stream_>>>(
          d_rank_boxes_.get(), d_rank_scores_.get(), d_rank_classes_.get(), m, words,
          params.overlap, params.threshold, d_mask_.get());
      CUDANMS_TRY(cudaGetLastError());
      matrix_reduce_kernel<<<words, kResolveThreads, 0, stream_>>>(d_mask_.get(), m, words,
                                                                   d_kept_bits_.get());
    }
    CUDANMS_TRY(cudaGetLastError());

    const uint32_t limit = params.max_detections == 0 || params.max_detections > m
                               ? m
                               : static_cast<uint32_t>(params.max_detections);
    compact_kernel<<<1, kResolveThreads, 0, stream_>>>(d_kept_bits_.get(), words, d_order_.get(),
                                                       limit, d_out_.get());
    CUDANMS_TRY(cudaGetLastError());
    CUDANMS_TRY(cudaMemcpyAsync(h_out_.get(), d_out_.get(), (1 + size_t{limit}) * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, stream_));
    return Status::Ok();
  }

  // Sizes every buffer for n candidates; a no-op when they are already large enough.
  Status reserve(size_t n) {
    if (n <= capacity_) return Status::Ok();
    if (n > kMaxCudaCandidates) {
      return Status::Error("the CUDA backend takes at most " + std::to_string(kMaxCudaCandidates) +
                           " candidates per frame (max_candidates), asked for " +
                           std::to_string(n));
    }
    capacity_ = 0;
    const size_t words = words_for(static_cast<uint32_t>(n));
    Status status = Status::Ok();
    auto step = [&status](Status s) {
      if (status.ok()) status = std::move(s);
    };
    step(h_stage_.allocate(n * kStagedBytes));
    step(h_out_.allocate(n + 1));
    step(d_stage_.allocate(n * kStagedBytes));
    step(d_rank_scores_.allocate(n));
    step(d_iota_.allocate(n));
    step(d_order_.allocate(n));
    step(d_rank_boxes_.allocate(n));
    step(d_rank_classes_.allocate(n));
    step(d_mask_.allocate(n * words));
    step(d_kept_bits_.allocate(words));
    step(d_out_.allocate(n + 1));
    if (!status.ok()) return status;

    sort_temp_bytes_ = 0;
    CUDANMS_TRY(cub::DeviceRadixSort::SortPairsDescending(
        nullptr, sort_temp_bytes_, static_cast<const float *>(nullptr),
        static_cast<float *>(nullptr), static_cast<const uint32_t *>(nullptr),
        static_cast<uint32_t *>(nullptr), static_cast<int>(n), 0, 32, stream_));
    status = d_sort_temp_.allocate(sort_temp_bytes_);
    if (!status.ok()) return status;

    iota_kernel<<<(n + 255) / 256, 256, 0, stream_>>>(d_iota_.get(), static_cast<uint32_t>(n));
    CUDANMS_TRY(cudaGetLastError());
    CUDANMS_TRY(cudaStreamSynchronize(stream_));
    capacity_ = n;
    return Status::Ok();
  }

  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  size_t capacity_ = 0;
  size_t sort_temp_bytes_ = 0;
  std::vector<uint32_t> selected_;  // candidate indices, in packed (ascending index) order

  PinnedBuffer<unsigned char> h_stage_;
  PinnedBuffer<uint32_t> h_out_;
  DeviceBuffer<unsigned char> d_stage_;
  DeviceBuffer<float> d_rank_scores_;
  DeviceBuffer<uint32_t> d_iota_;
  DeviceBuffer<uint32_t> d_order_;  // rank -> packed position
  DeviceBuffer<float4> d_rank_boxes_;
  DeviceBuffer<int32_t> d_rank_classes_;
  DeviceBuffer<uint32_t> d_mask_;
  DeviceBuffer<uint32_t> d_kept_bits_;
  DeviceBuffer<uint32_t> d_out_;
  DeviceBuffer<unsigned char> d_sort_temp_;
};

}  // namespace

std::unique_ptr<Context> create_cuda_context(const ContextOptions &options, Status *status) {
  auto context = std::make_unique<CudaContext>();
  *status = context->init(options);
  if (!status->ok()) return nullptr;
  return context;
}

}  // namespace detail

bool cuda_compiled() { return true; }

bool cuda_available(std::string *why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(error);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

}  // namespace cudanms
