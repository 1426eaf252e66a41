// cudanms/dnn.h on the GPU: one launch pre-processes a batch of frames into the input tensor,
// one launch decodes a batch's outputs into each frame's device candidates buffer. The
// arithmetic is common/dnn_math.h's, as on the CPU.
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

// One block per frame: the anchors in chunks of the block, each chunk's candidates written in
// anchor order after the previous chunks' (a block-wide exclusive scan of their counts).
__global__ void decode_kernel(const Outputs outputs, const Targets targets) {
  using Scan = cub::BlockScan<int, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int written;
  const int frame = blockIdx.x;
  const int points_per = outputs.head == Head::kBlazeFace ? kBlazeFacePoints : 0;
  if (threadIdx.x == 0) written = 0;
  __syncthreads();
  for (int base = 0; base < outputs.anchors; base += kDecodeThreads) {
    const int i = base + threadIdx.x;
    float b[4], score = 0, points[2 * kBlazeFacePoints];
    int32_t cls = targets.class_id[frame];
    const int kept = i < outputs.anchors
                         ? decode_anchor(outputs, targets, frame, i, b, &score, &cls, points)
                         : 0;
    int slot, chunk;
    Scan(scan).ExclusiveSum(kept, slot, chunk);
    float4 *boxes_out = reinterpret_cast<float4 *>(targets.boxes_out[frame]);
    if (kept && outputs.head == Head::kNanoDet) {
      const float *s = outputs.tensors[0] +
                       (static_cast<int64_t>(frame) * outputs.anchors + i) * outputs.classes;
      int at = written + slot;
      for (int c = 0; c < outputs.classes; c++) {
        if (!(s[c] >= targets.threshold[frame]) || !detail::class_kept(targets.classes[frame], c))
          continue;
        boxes_out[at] = make_float4(b[0], b[1], b[2], b[3]);
        targets.scores[frame][at] = s[c];
        targets.class_ids[frame][at] = c;
        at++;
      }
    } else if (kept) {
      const int at = written + slot;
      boxes_out[at] = make_float4(b[0], b[1], b[2], b[3]);
      targets.scores[frame][at] = score;
      targets.class_ids[frame][at] = cls;
      if (targets.points[frame]) {
        for (int k = 0; k < 2 * points_per; k++)
          targets.points[frame][at * 2 * points_per + k] = points[k];
      }
    }
    __syncthreads();  // every thread has read `written` before it moves on
    if (threadIdx.x == 0) written += chunk;
    __syncthreads();
  }
  if (threadIdx.x == 0) *targets.count[frame] = static_cast<uint32_t>(written);
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

Status decode_cuda(const Outputs &outputs, const Letterbox *letterboxes,
                   DeviceCandidates *const *targets, float *const *d_points,
                   const DecodeParams *params, void *stream) {
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
  decode_kernel<<<outputs.batch, kDecodeThreads, 0, s>>>(outputs, t);
  CUDANMS_CUDA_TRY(cudaGetLastError());
  for (int i = 0; i < outputs.batch; i++) {
    Status sealed = targets[i]->seal(s);
    if (!sealed.ok()) return sealed;
  }
  return Status::Ok();
}

}  // namespace cudanms::dnn
