// cudanms cascade: OpenCV's Haar and LBP cascade detectors on the CPU and on CUDA GPUs, every
// raw window of every scale, the same windows as OpenCV. Read this header first; it is the whole
// public surface of the cascade library (no GStreamer, no GLib; OpenCV's core only reads XML).
//
//   cudanms::Status status;
//   auto model = cudanms::cascade::Model::load(
//       "/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml", &status);
//   auto detector = cudanms::cascade::Detector::create(model, {cudanms::Backend::kCuda}, &status);
//   std::vector<cudanms::cascade::Window> windows;
//   status = detector->detect({gray, width, height, stride}, params, &windows);
//
// What a detector computes, on every backend, is what OpenCV 4.6 computes in
// cv::CascadeClassifier::detectMultiScale3(gray, rects, levels, weights, scale_factor,
// minNeighbors = 0, flags = 0, min_size, max_size, outputRejectLevels = true):
//  1. Scales: factor = 1, then factor *= scale_factor while the window (round(model window x
//     factor)) fits max_size and the image; those smaller than min_size are skipped.
//  2. Per scale: the image resized to round(size / factor) with OpenCV's bit-exact bilinear
//     resize (INTER_LINEAR_EXACT: 8-bit fixed-point weights), its integral, squared integral
//     (32-bit, wrapping) and, for cascades with tilted features, tilted integral.
//  3. Windows step 2 pixels at factors below 2 and 1 pixel from 2 up; along a row, a window
//     whose first stage fails makes OpenCV skip the next one, and so does this library.
//  4. Haar windows are normalised by the standard deviation of the inner window and skipped when
//     it is at most 10 grey levels; stage sums are accumulated in double, features in float.
//  5. A window is returned when it passes every stage; its score is the last stage's sum (the
//     "level weight"); its rectangle, in image pixels, is (round(x * factor), round(y * factor),
//     round(width * factor), round(height * factor)) clipped to the image.
// Windows come sorted by scale, then row, then column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudanms/device_candidates.h"
#include "cudanms/nms.h"

namespace cudanms::cascade {

enum class FeatureType { kHaar, kLbp };

// A cascade loaded from OpenCV's XML format (the one opencv_traincascade writes and Debian's
// opencv-data ships). Immutable; one model may serve many detectors on many threads.
class Model {
 public:
  // A missing file, another format (the pre-2.0 "opencv_haar_classifier" format included) or a
  // cascade whose features reach outside its window: nullptr and a status that says which.
  static std::shared_ptr<const Model> load(const std::string &path, Status *status);

  struct Stage {
    int32_t first_tree;
    int32_t trees;
    float threshold;  // the file's threshold minus 1e-5, as OpenCV
  };
  struct Tree {
    int32_t first_node;
    int32_t first_leaf;
  };
  struct Node {
    int32_t feature;
    float threshold;  // ordered (Haar) features
    int32_t left;     // > 0: the next node of this tree; <= 0: leaf -left
    int32_t right;
  };
  struct Rect {
    int32_t x, y, width, height;
  };
  struct HaarFeature {
    Rect rects[3];
    float weights[3];  // a third rectangle counts only with a positive weight, as in OpenCV
    bool tilted;
  };

  FeatureType feature_type;
  int window_width = 0;
  int window_height = 0;
  std::vector<Stage> stages;
  std::vector<Tree> trees;
  std::vector<Node> nodes;
  std::vector<float> leaves;
  std::vector<int32_t> subsets;  // LBP: 8 words (256 categories) per node
  std::vector<HaarFeature> haar_features;
  std::vector<Rect> lbp_features;  // the top-left block of each 3x3 grid of blocks
  bool has_tilted_features = false;
  std::string name;  // the file's base name without extension, e.g. "haarcascade_frontalface_alt2"
};

// An 8-bit grey image, rows stride bytes apart: in host memory, or (CUDA detectors) in device
// memory of the detector's CUDA context, e.g. the luma plane of a GstCudaMemory, read in place.
// Either way the caller may reuse the pixels once detect() returns.
struct GrayView {
  const uint8_t *pixels = nullptr;
  int width = 0;
  int height = 0;
  size_t stride = 0;
  bool on_device = false;
  void *ready = nullptr;  // on the device: a cudaEvent_t after which the pixels are valid, or null
};

// What a detection into device candidates writes for each window: its rectangle as the box
// {x, y, x + width, y + height}, its score as a float, and this class id.
struct DeviceOutput {
  int32_t class_id = 0;
  double min_score = -1e300;  // windows scoring below it are left out
};

// One frame of a batch (Detector::detect over frames): its pixels, and where and how its
// windows are written, as the one-frame detect() into device candidates takes them.
struct DeviceFrame {
  GrayView image;
  DeviceOutput output;
  DeviceCandidates *out = nullptr;
};

struct DetectParams {
  double scale_factor = 1.1;          // > 1
  int min_width = 0, min_height = 0;  // smallest window, image pixels
  int max_width = 0, max_height = 0;  // largest window; 0 (either): as large as the image
};

struct Window {
  int32_t x, y, width, height;  // image pixels, clipped to the image
  double score;                 // the last stage's sum
  int32_t scale;                // index into the frame's scales
};

struct DetectorOptions {
  Backend backend = Backend::kCpu;
  int device = 0;          // CUDA device index
  void *stream = nullptr;  // a cudaStream_t to run on; nullptr: the detector makes its own
  // CUDA works in the CUDA context current on the creating thread when it is on `device`, else
  // in the device's primary context (as cudanms::ContextOptions).
  // CUDA: the stages are run in segments, one launch each, each over a queue of the windows that
  // passed the segment before (Micikevicius, GTC 2015). Each entry is the first stage (0-based) of
  // a new segment, ascending from 1; starts at or past the last stage are ignored. The default,
  // stages 1, 2-3, 4-7, 8-end, is the talk's split (1-3, 4-7, 8-end) with the first stage alone:
  // every window runs only that one, so a warp's lanes stay busy, and the row walk skips its
  // windows before they run more. Empty: one segment, every stage in one launch.
  std::vector<int> segment_starts = {1, 3, 7};
  bool time_device = false;  // fill DetectStats::device_time_us (CUDA events; for benchmarks)
};

struct DetectStats {
  size_t scales = 0;
  size_t windows_evaluated = 0;  // windows the row walk reaches, all scales (OpenCV's count)
  size_t windows_out = 0;
  // Windows alive after each segment (CUDA) or 0 (CPU); the first is after segment 1.
  std::vector<size_t> alive_after_segment;
  float device_time_us = 0;   // CUDA with time_device: from the upload to the last copy back
  float after_upload_us = 0;  // the same from the end of the upload: a frame already on the GPU
};

// Created once per model and backend, reused per frame: the workspace (device memory, pinned
// host buffers) grows with the largest frame seen and is reused; detect() allocates only when a
// frame is larger or its scales differ from the last. One detector must not run on two threads
// at once.
class Detector {
 public:
  static std::unique_ptr<Detector> create(std::shared_ptr<const Model> model,
                                          const DetectorOptions &options, Status *status);
  virtual ~Detector() = default;
  // On failure *windows is empty and the status says why; a CUDA detector that failed may keep
  // failing, and callers should fall back to a CPU detector.
  Status detect(const GrayView &image, const DetectParams &params, std::vector<Window> *windows,
                DetectStats *stats = nullptr);
  // CUDA detectors only: the same windows, in the same order, written into device candidates,
  // and out->ready() recorded after them. Returns without waiting for the GPU; stats get the
  // scales only. Nothing is copied back: hand out->view() to cudanms::Context::run. The count
  // written is the frame's whole count: were it above the buffer's capacity (the first capacity
  // windows are written), NMS and download() report it as an error rather than lose windows.
  Status detect(const GrayView &image, const DetectParams &params, const DeviceOutput &output,
                DeviceCandidates *out, DetectStats *stats = nullptr);
  // CUDA detectors only: each frame as detect(frame.image, params, frame.output, frame.out)
  // alone writes it (the same windows, order and count), but the frames of one size run through
  // one set of launches, their scales side by side in the same kernels: e.g. one frame of each of
  // many cameras on one thread and one stream (the default cascade at 1080p on an H100: 0.25 ms
  // a frame in batches of 16, 0.38 one by one). Detectors of their own on their own streams, one
  // per camera thread, overlap better still (docs/performance.md). Frames of different sizes run in
  // one set per size, in batches of at most max_batch_frames(). Returns without waiting for the GPU
  // once every frame's pixels are read; stats get the scales only. A frame without device
  // candidates is an error, and nothing is detected.
  Status detect(const std::vector<DeviceFrame> &frames, const DetectParams &params,
                DetectStats *stats = nullptr);
  // The most frames of this size one set of launches takes (the kernels' 32-bit indices); at
  // least 1. CPU detectors: 1.
  virtual size_t max_batch_frames(int width, int height, const DetectParams &params) const {
    (void)width, (void)height, (void)params;
    return 1;
  }
  // The most windows a frame of this size can return with these parameters (the grid windows of
  // every scale; a capacity that can never be exceeded), or 0 when the parameters are invalid.
  size_t max_windows(int width, int height, const DetectParams &params) const;
  virtual Backend backend() const = 0;
  virtual std::string device_name() const = 0;
  // The CUcontext a CUDA detector works in (as cudanms::Context::cuda_context); nullptr on the CPU.
  virtual void *cuda_context() const { return nullptr; }
  const Model &model() const { return *model_; }

 protected:
  explicit Detector(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
  std::shared_ptr<const Model> model_;

 private:
  virtual Status detect_checked(const GrayView &image, const DetectParams &params,
                                std::vector<Window> *windows, DetectStats *stats) = 0;
  virtual Status detect_device_checked(const GrayView &image, const DetectParams &params,
                                       const DeviceOutput &output, DeviceCandidates *out,
                                       DetectStats *stats);
  // Frames of one size (at least 1 pixel), at most max_batch_frames() of them.
  virtual Status detect_batch_checked(const std::vector<DeviceFrame> &frames,
                                      const DetectParams &params, DetectStats *stats);
};

// Checks the parameters against an image of that size; detect() calls it too.
Status validate(const DetectParams &params);

}  // namespace cudanms::cascade
