// cudanms/dnn.h on the GPU: one launch pre-processes a batch of frames into the input tensor,
// two decode a batch's outputs into each frame's device candidates buffer (its chunks' counts,
// then its candidates). The arithmetic is common/dnn_math.h's, as on the CPU.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/dnn_math.h"
#include "cuda_device.h"

namespace cudanms::dnn {
namespace {

using detail::kBlazeFacePoints;
using detail::kBlazeFaceRegressors;

// A batch's frames, by value in the kernel's parameters (kMaxBatch x ~90 bytes).
struct Frames {
  Image images[kMaxBatch];
  Letterbox boxes[kMaxBatch];
};

// One thread per input pixel of one frame (blockIdx.y): the three planes of its pixel.
__global__ void preprocess_kernel(const Frames frames, const InputSpec spec, float *d_nchw) {
  const int frame = blockIdx.y;
  const int64_t plane = static_cast<int64_t>(spec.width) * spec.height;
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= plane) return;
  const int x = static_cast<int>(at % spec.width), y = static_cast<int>(at / spec.width);
  detail::write_input(d_nchw + frame * 3 * plane, plane, at,
                      detail::input_pixel(frames.images[frame], spec, frames.boxes[frame], x, y),
                      spec);
}

struct Targets {
  Letterbox boxes[kMaxBatch];
  float *boxes_out[kMaxBatch];
  float *scores[kMaxBatch];
  int32_t *class_ids[kMaxBatch];
  uint32_t *count[kMaxBatch];
  float *points[kMaxBatch];  // or nullptr
  float threshold[kMaxBatch];
  int32_t class_id[kMaxBatch];
  ClassFilter classes[kMaxBatch];
};

constexpr int kDecodeThreads = 256;

// Anchor i's candidates: BlazeFace's and YOLO's one at most, into b, score, cls and points;
// NanoDet's one per kept class, of which only the count and the box here (the scores and
// classes are read again as they are written).
__device__ int decode_anchor(const Outputs &outputs, const Targets &targets, int frame, int i,
                             float *b, float *score, int32_t *cls, float *points) {
  const Letterbox &box = targets.boxes[frame];
  const float threshold = targets.threshold[frame];
  const int64_t first = static_cast<int64_t>(frame) * outputs.anchors;
  switch (outputs.head) {
    case Head::kBlazeFace:
      return detail::decode_blazeface(outputs.tensors[0] + first * kBlazeFaceRegressors,
                                      outputs.tensors[1] + first, i, box, threshold, b, score,
                                      points);
    case Head::kYolo:
      return detail::decode_yolo(outputs.tensors[0] + first * (4 + outputs.classes),
                                 outputs.anchors, outputs.classes, i, box, threshold,
                                 targets.classes[frame], b, score, cls);
    default: {
      const int n =
          detail::nanodet_classes_kept(outputs.tensors[0] + first * outputs.classes,
                                       outputs.classes, i, threshold, targets.classes[frame]);
      if (n > 0)
        detail::decode_nanodet_box(outputs.tensors[1] + first * 4 * outputs.bins, outputs.bins, i,
                                   outputs.input_width, outputs.input_height, box, b);
      return n;
    }
  }
}

// The anchors of a frame in chunks of a block, a block per chunk of every frame (blockIdx.y), so
// that a batch fills the GPU (a block per frame kept a batch of 32 on 32 of an H100's 132 SMs):
// first each chunk's count of candidates, then each chunk's candidates written after the chunks
// before it, so that a frame's candidates stay in anchor order, as the CPU's are.
__device__ int chunk_anchor(const Outputs &outputs, const Targets &targets, float *b, float *score,
                            int32_t *cls, float *points) {
  const int frame = blockIdx.y, i = blockIdx.x * kDecodeThreads + threadIdx.x;
  *cls = targets.class_id[frame];
  return i < outputs.anchors ? decode_anchor(outputs, targets, frame, i, b, score, cls, points) : 0;
}

__global__ void count_chunks_kernel(const Outputs outputs, const Targets targets,
                                    uint32_t *chunk_counts) {
  using Reduce = cub::BlockReduce<int, kDecodeThreads>;
  __shared__ typename Reduce::TempStorage reduce;
  float b[4], score = 0, points[2 * kBlazeFacePoints];
  int32_t cls;
  const int kept = chunk_anchor(outputs, targets, b, &score, &cls, points);
  const int total = Reduce(reduce).Sum(kept);
  if (threadIdx.x == 0) chunk_counts[blockIdx.y * gridDim.x + blockIdx.x] = total;
}

__global__ void write_chunks_kernel(const Outputs outputs, const Targets targets,
                                    const uint32_t *chunk_counts) {
  using Scan = cub::BlockScan<int, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t before;
  const int frame = blockIdx.y, i = blockIdx.x * kDecodeThreads + threadIdx.x;
  if (threadIdx.x == 0) {
    uint32_t sum = 0;
    for (unsigned c = 0; c < blockIdx.x; c++) sum += chunk_counts[frame * gridDim.x + c];
    before = sum;
    if (blockIdx.x == gridDim.x - 1)
      *targets.count[frame] = sum + chunk_counts[frame * gridDim.x + blockIdx.x];
  }
  float b[4], score = 0, points[2 * kBlazeFacePoints];
  int32_t cls;
  const int kept = chunk_anchor(outputs, targets, b, &score, &cls, points);
  int slot;
  Scan(scan).ExclusiveSum(kept, slot);
  __syncthreads();  // `before` is written
  if (!kept) return;
  int at = static_cast<int>(before) + slot;
  float4 *boxes_out = reinterpret_cast<float4 *>(targets.boxes_out[frame]);
  if (outputs.head == Head::kNanoDet) {
    const float *s =
        outputs.tensors[0] + (static_cast<int64_t>(frame) * outputs.anchors + i) * outputs.classes;
    for (int c = 0; c < outputs.classes; c++) {
      if (!(s[c] >= targets.threshold[frame]) || !detail::class_kept(targets.classes[frame], c))
        continue;
      boxes_out[at] = make_float4(b[0], b[1], b[2], b[3]);
      targets.scores[frame][at] = s[c];
      targets.class_ids[frame][at] = c;
      at++;
    }
    return;
  }
  boxes_out[at] = make_float4(b[0], b[1], b[2], b[3]);
  targets.scores[frame][at] = score;
  targets.class_ids[frame][at] = cls;
  if (!targets.points[frame]) return;
  const int points_per = outputs.head == Head::kBlazeFace ? kBlazeFacePoints : 0;
  for (int k = 0; k < 2 * points_per; k++)
    targets.points[frame][at * 2 * points_per + k] = points[k];
}

}  // namespace

Status preprocess_cuda(const Image *images, int count, const InputSpec &spec, float *d_nchw,
                       void *stream) {
  if (count < 1 || count > kMaxBatch) {
    return Status::Error("a batch holds 1 to " + std::to_string(kMaxBatch) + " frames");
  }
  Frames frames;
  for (int i = 0; i < count; i++) {
    Status status = detail::check_image(images[i], spec);
    if (!status.ok()) return status;
    frames.images[i] = images[i];
    frames.boxes[i] = Letterbox::fit(images[i].width, images[i].height, spec);
  }
  const int64_t plane = static_cast<int64_t>(spec.width) * spec.height;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((plane + kThreads - 1) / kThreads), count);
  preprocess_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(frames, spec, d_nchw);
  CUDANMS_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

size_t decode_workspace(const Outputs &outputs) {
  return static_cast<size_t>(outputs.batch) *
         ((outputs.anchors + kDecodeThreads - 1) / kDecodeThreads);
}

Status decode_cuda(const Outputs &outputs, const Letterbox *letterboxes,
                   DeviceCandidates *const *targets, float *const *d_points,
                   const DecodeParams *params, uint32_t *d_workspace, void *stream) {
  if (outputs.batch < 1 || outputs.batch > kMaxBatch) {
    return Status::Error("a batch holds 1 to " + std::to_string(kMaxBatch) + " frames");
  }
  Targets t{};
  for (int i = 0; i < outputs.batch; i++) {
    const size_t most = max_candidates(outputs, params[i]);
    if (!targets[i] || targets[i]->capacity() < most) {
      return Status::Error("a device candidates buffer must hold a frame's every candidate (" +
                           std::to_string(most) + ")");
    }
    t.boxes[i] = letterboxes[i];
    t.boxes_out[i] = targets[i]->boxes();
    t.scores[i] = targets[i]->scores();
    t.class_ids[i] = targets[i]->class_ids();
    t.count[i] = targets[i]->count();
    t.points[i] = d_points ? d_points[i] : nullptr;
    t.threshold[i] = params[i].score_threshold;
    t.class_id[i] = params[i].class_id;
    t.classes[i] = params[i].classes;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 grid((outputs.anchors + kDecodeThreads - 1) / kDecodeThreads, outputs.batch);
  count_chunks_kernel<<<grid, kDecodeThreads, 0, s>>>(outputs, t, d_workspace);
  CUDANMS_CUDA_TRY(cudaGetLastError());
  write_chunks_kernel<<<grid, kDecodeThreads, 0, s>>>(outputs, t, d_workspace);
  CUDANMS_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace cudanms::dnn
