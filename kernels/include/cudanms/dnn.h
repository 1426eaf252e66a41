// What runs before and after a DNN detector's network, on the CPU and on the GPU: a frame (RGB
// or YUV, host or device memory) into the network's letterboxed, normalised NCHW input tensor,
// and the network's output tensors into NMS candidates in frame pixels. The network itself is
// the caller's (the dnndetect element runs TorchScript with LibTorch): this library knows only
// tensors as float arrays. Pure C++17 and CUDA; no GStreamer, no LibTorch.
//
//   dnn::Letterbox box = dnn::Letterbox::fit(1920, 1080, spec);
//   dnn::preprocess(image, spec, input);                          // or preprocess_cuda, a batch
//   ... the network: input [B, 3, H, W] -> outputs ...
//   dnn::decode(outputs, 0, box, params, &candidates);            // or decode_cuda into buffers
//
// The CPU and the CUDA functions compute the same floats in the same order (no fused
// multiply-add, as in the rest of the library): the same input tensor and the same candidates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudanms/device_candidates.h"
#include "cudanms/nms.h"

namespace cudanms::dnn {

// Frames per call of the CUDA functions at most: one forward's batch.
inline constexpr int kMaxBatch = 64;

// ---------------------------------------------------------------------------------------------
// Input
// ---------------------------------------------------------------------------------------------

// 8-bit frames. The x of RGBx/BGRx is any fourth byte (alpha too). I420: Y, U, V planes; NV12:
// Y and interleaved UV; both 4:2:0, chroma of odd sizes rounded up.
enum class PixelFormat { kRGB, kBGR, kRGBx, kBGRx, kI420, kNV12 };
// YUV to RGB: the matrix and range of the frame's colorimetry.
enum class YuvMatrix { kBt601, kBt709 };

struct Image {
  PixelFormat format = PixelFormat::kRGB;
  int width = 0, height = 0;
  const uint8_t *planes[3] = {nullptr, nullptr, nullptr};
  int strides[3] = {0, 0, 0};  // bytes per row of each plane
  YuvMatrix matrix = YuvMatrix::kBt601;
  bool full_range = false;  // YUV 0..255 rather than 16..235 (Y) / 16..240 (UV)
};

// The network's input and how a frame becomes it.
struct InputSpec {
  int width = 0, height = 0;  // of the input tensor
  // true: scaled by one factor to fit, centred, the rest padded (aspect kept); false: stretched.
  bool letterbox = true;
  // Each RGB channel's value is (pixel - mean[c]) * scale[c], pixel in 0..255; padding is a
  // pixel of pad_value in every channel.
  float mean[3] = {0, 0, 0};
  float scale[3] = {1, 1, 1};
  float pad_value = 0;
  // The tensor's channels in B, G, R order (networks trained on OpenCV's BGR images, such as
  // NanoDet); mean and scale stay per R, G, B.
  bool bgr = false;
};

// Where a frame sits in the input tensor, and the way back to frame pixels.
struct Letterbox {
  int frame_width = 0, frame_height = 0;
  int scaled_width = 0, scaled_height = 0;  // the frame's size inside the input
  int pad_x = 0, pad_y = 0;                 // its top-left corner there

  static Letterbox fit(int frame_width, int frame_height, const InputSpec &spec);
  // A position in input pixels as frame pixels.
  float frame_x(float input_x) const;
  float frame_y(float input_y) const;
};

// How each input pixel is sampled, on both backends: bilinear interpolation between the four
// frame pixels around its centre, scaled up or down, the rule of OpenCV's
// `cv::resize(INTER_LINEAR)` (which Ultralytics' LetterBox calls) and of MediaPipe's GPU
// ImageToTensorCalculator, computed in float (no rounding to 8 bits between). YUV pixels are
// converted to RGB (clamped to 0..255) before they are interpolated.
//
// One frame into its [3, spec.height, spec.width] slice of an NCHW float tensor, RGB planes.
Status preprocess(const Image &image, const InputSpec &spec, float *chw);
// count frames in device memory (in the current CUDA context) into d_nchw[i * 3 * H * W], on
// stream (a cudaStream_t; nullptr: the legacy default stream). Asynchronous.
Status preprocess_cuda(const Image *images, int count, const InputSpec &spec, float *d_nchw,
                       void *stream);

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

// What the network's outputs mean.
enum class Head {
  // MediaPipe's BlazeFace front model as tools/blazeface-to-torchscript.py writes it: tensor 0
  // the regressors [B, 896, 16] (box x, y, w, h, then six keypoints, in input pixels of 128,
  // from the anchor), tensor 1 the logits [B, 896, 1]. Score: sigmoid of the logit clipped to
  // +-100. One class (DecodeParams::class_id); six points per candidate.
  kBlazeFace,
  // Ultralytics YOLO v8/v11 (yolo export format=torchscript): tensor 0 [B, 4 + classes, anchors],
  // per anchor the box's centre x, y, width, height in input pixels, then each class's score.
  // A candidate per anchor: its best class (the first of equals) and that class's score.
  kYolo,
  // NanoDet (RangiLyu/nanodet, a Generalized Focal Loss head) as tools/nanodet-to-torchscript.py
  // writes it: tensor 0 the class scores [B, anchors, classes] (sigmoid applied), tensor 1 the
  // box distributions [B, anchors, 4 x bins] (left, top, right, bottom, each `bins` logits);
  // the anchors are the cells of strides 8, 16 and 32 over the input, each grid row by row. Each
  // side's distance from the cell's centre is the softmax-weighted mean bin times the stride
  // (gfl_head.py's Integral); the box is clipped to the frame. A candidate per anchor and class
  // scoring at least the threshold (NanoDet's multiclass rule: one box may stand for two classes).
  kNanoDet,
};

// "blazeface", "yolo", "nanodet": the dnndetect element's decoder names.
const char *head_name(Head head);

// The input each head's models were trained on: BlazeFace 128x128 in [-1, 1], black around
// (MediaPipe); YOLO 640x640 in [0, 1], grey 114 around (Ultralytics); NanoDet 416x416 BGR
// normalised by ImageNet's mean and std, black around (NanoDet's config). Letterboxed.
InputSpec model_input(Head head);

// At most this many classes can be filtered by DecodeParams::classes.
inline constexpr int kMaxFilteredClasses = 256;

// The classes whose candidates a decoder keeps: every class, or those named.
struct ClassFilter {
  bool all = true;
  uint32_t bits[kMaxFilteredClasses / 32] = {};
  // Keeps only the classes named so far and `class_id`; false if that is out of range.
  bool keep(int class_id);
  bool keeps(int class_id) const;
  // How many of classes 0 .. classes - 1 it keeps.
  int count(int classes) const;
};

// The outputs of one forward, as contiguous float arrays (host memory for decode, device memory
// for decode_cuda). The shapes are checked by Outputs::check.
struct Outputs {
  Head head = Head::kYolo;
  const float *tensors[2] = {nullptr, nullptr};
  int batch = 0;
  int anchors = 0;
  int classes = 0;                        // kYolo, kNanoDet; 1 for kBlazeFace
  int bins = 0;                           // kNanoDet: logits per side
  int input_width = 0, input_height = 0;  // kNanoDet: its grid of cells
  // From the tensors' shapes (tensor 0's, then tensor 1's) and, for kNanoDet, the input's size:
  // an error saying what was expected.
  static Status describe(Head head, const std::vector<std::vector<int64_t>> &shapes, Outputs *out,
                         int input_width = 0, int input_height = 0);
  int points_per_candidate() const;  // 6 for kBlazeFace, 0 otherwise
};

struct DecodeParams {
  float score_threshold = 0.5f;  // candidates scoring below it (or NaN) are dropped
  int32_t class_id = 0;          // kBlazeFace's class; kYolo's, kNanoDet's are the class indices
  ClassFilter classes;           // kYolo (of the best class), kNanoDet: the classes kept
};

// The most candidates one frame of `outputs` can give with `params`: the anchors, or for
// kNanoDet the anchors times the classes kept.
size_t max_candidates(const Outputs &outputs, const DecodeParams &params);

// One frame's candidates in frame pixels, in anchor order.
struct Candidates {
  std::vector<float> boxes;  // x1, y1, x2, y2 per candidate
  std::vector<float> scores;
  std::vector<int32_t> class_ids;
  std::vector<float> points;  // points_per_candidate x {x, y} per candidate
  int points_per_candidate = 0;
  void clear();
  size_t size() const { return scores.size(); }
  CandidatesView view() const;
};

// Frame `image` of the batch (host tensors) into *out (cleared first).
Status decode(const Outputs &outputs, int image, const Letterbox &letterbox,
              const DecodeParams &params, Candidates *out);

// Every frame of the batch (device tensors) into its device candidates buffer, in anchor order
// (a buffer's capacity must hold max_candidates()), points into d_points[i] (capacity x
// points_per_candidate x 2 floats) where given, with frame i's params[i] (frames of one batch
// may come from elements with different thresholds); the caller seals the buffers its consumers
// read (seal_all); d_workspace holds decode_workspace(outputs) counts in device memory.
// Asynchronous.
Status decode_cuda(const Outputs &outputs, const Letterbox *letterboxes,
                   DeviceCandidates *const *targets, float *const *d_points,
                   const DecodeParams *params, uint32_t *d_workspace, void *stream);
size_t decode_workspace(const Outputs &outputs);

// BlazeFace front's 896 anchors' centres in [0, 1] of the input (MediaPipe's SsdAnchorsCalculator
// with its face graph's options): 16x16 cells x 2, then 8x8 cells x 6, row by row.
struct Anchor {
  float x_center, y_center;
};
const std::vector<Anchor> &blazeface_anchors();

}  // namespace cudanms::dnn

namespace cudanms::dnn {

// A batch's candidates on their way to the host (CudaStage::decode): the GPU packs them into
// host-mapped memory and each frame's are read once the batch's work is done, on whichever thread
// waits for that frame, so that the thread that launches batches never waits for one. Thread-safe
// (frames taken on several threads at once); the memory goes back to the stage with the last
// holder.
class Download {
 public:
  virtual ~Download() = default;
  // Whether the batch's GPU work is done: take() would not wait.
  virtual bool ready() = 0;
  // Waits for it, then frame `frame`'s candidates (with their points) into *out, cleared first.
  virtual Status take(int frame, Candidates *out) = 0;
};

// A stage's stream on the GPU, summed over its batches timed so far (by events read once they
// have passed, never waited for): each batch's forward, from when the stream reached it (its
// pre-processing done) to its decoding; its decoding (and its download's packing); and, between
// two batches timed one after the other, the stream's idle time from the first's end to the
// second's start (the GPU waiting for the host or the pre-processing).
struct GpuTimes {
  uint64_t batches = 0;
  double forward_ms = 0, decode_ms = 0;
  uint64_t gaps = 0;
  double idle_ms = 0;
};

// The GPU half of a DNN detector, for one element: its CUDA stream, the input tensor, the
// staging of frames that arrive in host memory, and the downloads of candidates that carry
// points. Bound to the CUDA context current on the creating thread when it is on the device
// (e.g. the pipeline's GstCudaContext), else the device's primary context.
class CudaStage {
 public:
  static std::unique_ptr<CudaStage> create(int device, Status *status);
  virtual ~CudaStage() = default;
  virtual void *stream() const = 0;   // a cudaStream_t: the network runs on it too
  virtual void *context() const = 0;  // the CUcontext
  virtual const std::string &device_name() const = 0;
  // Waits for the work queued on the stream (benchmarks time a stage with it).
  virtual Status synchronize() = 0;

  // The batch's frames into the input tensor: frames with on_device[i] are read where they are,
  // the others are copied to the device first (asynchronously where their memory is pinned:
  // keep them until frames_copied()). Two tensors take turns, so that a batch's pre-processing
  // (and its frames' upload) runs on a stream of its own while the forward before it runs; the
  // stream() waits for it. The tensor stays valid until the call after next.
  virtual Status preprocess(const Image *images, const bool *on_device, int count,
                            const InputSpec &spec, float **d_input) = 0;
  // Waits until the last preprocess() has copied its host frames: then they may go.
  virtual Status frames_copied() = 0;
  // The batch's outputs (device tensors) into each frame's device candidates buffer (params[i]
  // for frame i). Frames with to_host[i] (to_host may be nullptr: none) also go to the host with
  // their points (a device candidates buffer holds no points): *download reads them once they
  // are there. The other frames' buffers are sealed (seal_all). Asynchronous.
  virtual Status decode(const Outputs &outputs, const Letterbox *letterboxes,
                        DeviceCandidates *const *targets, const DecodeParams *params,
                        const bool *to_host, std::shared_ptr<Download> *download) = 0;
  // GpuTimes of the batches that have passed, from any thread; restarted from zero (e.g. after a
  // warm-up).
  virtual GpuTimes gpu_times() = 0;
  virtual void restart_gpu_times() = 0;
};

}  // namespace cudanms::dnn
