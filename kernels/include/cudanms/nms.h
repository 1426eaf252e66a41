// cudanms: non-maximum suppression on the CPU and on CUDA GPUs, one API.
//
// Read this header first. It is the whole public surface of kernels/: no GStreamer, no GLib.
//
//   cudanms::Status status;
//   auto nms = cudanms::Context::create({cudanms::Backend::kCuda}, &status);
//   cudanms::Result result;
//   status = nms->run({boxes, scores, class_ids, n}, params, &result);
//   // result.kept: indices of the kept candidates, best score first; result.counts: what happened.
//
// The rules, shared by every backend, bit for bit:
//  1. A candidate is invalid when its score or a coordinate is NaN or infinite, or x2 < x1 or
//     y2 < y1. Invalid candidates are dropped and counted. Zero-width or zero-height boxes are
//     valid.
//  2. A valid candidate whose score is below Params::score_threshold (strictly) is dropped and
//     counted.
//  3. If more than Params::max_candidates (Dmax) remain, the Dmax best-ranked are processed and the
//     rest are counted as over capacity. Rank: higher score first, equal scores by lower index
//     (-0.0 and +0.0 are equal scores).
//  4. Suppression, only between candidates of the same class unless Params::class_agnostic:
//     - Method::kGreedy, the standard NMS of OpenCV cv::dnn::NMSBoxes and torchvision.ops.nms:
//       walk the candidates in rank order; one is kept unless an already kept one overlaps it
//       by more than the threshold (strictly).
//     - Method::kMatrix, the map/reduce NMS of Oro et al. (ICASSP 2016): a candidate is kept
//       unless some candidate with a strictly higher score and a non-empty box (x2 > x1 and
//       y2 > y1) overlaps it by at least the threshold, whether or not that one is kept itself.
//     - Method::kSoft, Soft-NMS (Bodla et al., ICCV 2017) as OpenCV cv::dnn::softNMSBoxes
//       computes it: repeatedly select, of the candidates not yet selected whose current score is
//       at least Params::score_threshold (the floor), the one of highest current score (equal
//       scores: lower index); keep it with its current score, and multiply the current score of
//       every other unselected candidate still at or above the floor by the decay of its overlap
//       o by the selected one: SoftDecay::kLinear (1 - o) when o > threshold, else 1;
//       SoftDecay::kGaussian exp(-(o * o) / sigma), the threshold unused. Result::kept is in
//       selection order and Result::kept_scores holds the decayed scores.
//     - Method::kWeighted, the weighted NMS of MediaPipe's face detector (its
//       NonMaxSuppressionCalculator, algorithm WEIGHTED): greedy's kept set, each kept box
//       replaced by the score-weighted mean of itself and of the candidates it suppressed; a
//       suppressed candidate belongs to the best-ranked kept one that overlaps it by more than
//       the threshold. A kept candidate keeps its score. Result::kept_boxes holds the means.
//     - Method::kGroup, OpenCV's cv::groupRectangles (what CascadeClassifier::detectMultiScale
//       returns with minNeighbors = Params::min_neighbors, its level weights as scores): each
//       candidate is the integer rectangle x = round(x1), y = round(y1), w = round(x2) - x,
//       h = round(y2) - y (coordinates clamped to [-2^24, 2^24] first). Two rectangles are
//       similar when, with d = eps * (min(w1, w2) + min(h1, h2)) * 0.5 in double precision
//       (eps = Params::group_eps), |x1 - x2|, |y1 - y2|, |x1 + w1 - x2 - w2| and
//       |y1 + h1 - y2 - h2| are all at most d. A class is a connected component of similarity
//       (a chain of similar rectangles is one class). Its n members stand for one rectangle: the
//       members' sums of x, y, w and h (exact integers) each times 1 / n in single precision,
//       rounded; its kept candidate is its best-ranked member, with that member's score (the
//       class's highest), and box (x, y, x + w, y + h). A class with n <= min_neighbors is
//       dropped, and so is a class r1 of n1 members that another class r2 of n2 > min_neighbors
//       holds, with dx = round(w2 * eps), dy = round(h2 * eps) in double precision:
//       r1.x >= r2.x - dx, r1.y >= r2.y - dy, r1.x + w1 <= r2.x + w2 + dx,
//       r1.y + h1 <= r2.y + h2 + dy, and n2 > max(3, n1) or n1 < 3. With min_neighbors 0 every
//       candidate is a class of its own and none is dropped (OpenCV's grouping off). Rounding
//       is to nearest, ties to even, as OpenCV's cvRound. Result::kept_boxes holds the class
//       rectangles.
//     Points (CandidatesView::points: a face's landmarks, a body's joints) follow their box:
//     Result::kept_points holds each kept candidate's own, except for kWeighted, which merges
//     them as it merges the box, with the same weights in the same order.
//     Classes: Params::class_groups joins classes into groups whose candidates suppress one
//     another (kGroup: are grouped together) as if of one class; a class in no group is a group
//     of its own.
//  5. Neighbours (Params::min_neighbors; DeepStream's minBoxes, OpenCV's minNeighbors): the
//     candidates a kept one stands for besides itself, all of its class group:
//     - kGreedy: the lower-ranked candidates it overlaps by more than the threshold, whether or
//       not another kept candidate overlaps them too;
//     - kMatrix: the candidates it suppresses (strictly lower score, overlap at least the
//       threshold; none when its box is empty);
//     - kSoft: the candidates not yet selected and at or above the floor when it was selected
//       that it overlaps by more than the threshold (for the gaussian decay too);
//     - kWeighted: the candidates merged into it;
//     - kGroup: the other members of its class.
//     With min_neighbors above 0, a kept candidate with fewer neighbours is dropped once NMS is
//     done (its neighbours stay suppressed: a cluster too small goes whole), and
//     Result::kept_neighbors holds the kept ones' counts; kGroup fills it always.
//  6. Params::max_detections, when not 0, keeps only the first that many kept candidates.
//
// Soft-NMS's gaussian decay uses this library's own single-precision exp (common/decay.h, within
// 2 ulp of the true value, 1 exactly at 0, 0 below -87), so that every backend decays alike; a
// score is multiplied by the decay, s = s * d. Weighted NMS sums in rank order, the kept
// candidate first: w = max(score, 0), t += w, X1 += x1 * w, ... (each product rounded, then
// added), and the box becomes (X1 / t, Y1 / t, X2 / t, Y2 / t); the kept box unchanged if t is 0.
// Its points are merged the same way, on the host for every backend.
//
// Overlap of a candidate b by a higher-ranked candidate a, in single precision, with no fused
// multiply-add, in exactly this order of operations (every backend computes the same bits):
//   Overlap::kIoU:   iw = max(0, min(a.x2, b.x2) - max(a.x1, b.x1)), ih likewise, I = iw * ih,
//                    U = area(a) + area(b) - I with area = (x2 - x1) * (y2 - y1); I / U, 0 if U <=
//                    0.
//   Overlap::kIoMin: I / min(area(a), area(b)), 0 if that minimum is <= 0.
//   Overlap::kIoS:   the paper's intersection over the area of the higher-ranked window a, with
//                    the +1 convention of integer pixel windows: iw = max(0, min(a.x2, b.x2) -
//                    max(a.x1, b.x1) + 1), ih likewise, I / ((a.x2 - a.x1 + 1) * (a.y2 - a.y1 +
//                    1)).
//   Overlap::kDIoU:  distance IoU (Zheng et al., AAAI 2020; the YOLO family's DIoU-NMS): the
//                    kIoU value minus rho2 / c2, where cw = max(a.x2, b.x2) - min(a.x1, b.x1),
//                    ch likewise, c2 = cw * cw + ch * ch, dx = (b.x1 + b.x2) - (a.x1 + a.x2), dy
//                    likewise, rho2 = (dx * dx + dy * dy) * 0.25; the kIoU value alone if c2 <=
//                    0. Below 0 for boxes apart: with a threshold >= 0 only intersecting boxes
//                    suppress, but of two boxes with the same IoU the one centred farther away
//                    is suppressed less.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cudanms {

// A view over the caller's memory; nothing is copied until run().
struct CandidatesView {
  const float *boxes = nullptr;        // count x {x1, y1, x2, y2}, packed, pixels
  const float *scores = nullptr;       // count
  const int32_t *class_ids = nullptr;  // count, or nullptr: every candidate is class 0
  size_t count = 0;                    // at most kMaxCount
  // Optional points that belong to each box: count x points_per_candidate x {x, y}, packed.
  // They take no part in NMS; the kept ones come back in Result::kept_points (rule 4).
  const float *points = nullptr;
  uint32_t points_per_candidate = 0;  // at most kMaxPointsPerCandidate; 0: no points
};

inline constexpr size_t kMaxCount = UINT32_MAX;
inline constexpr uint32_t kMaxPointsPerCandidate = 1024;

// Candidates a producer's kernels wrote to device memory (cudanms/device_candidates.h hands out
// pooled buffers of this shape): NMS runs on them in place, after the producer's work.
struct DeviceCandidatesView {
  const float *boxes = nullptr;        // capacity x {x1, y1, x2, y2}, 16-byte aligned
  const float *scores = nullptr;       // capacity
  const int32_t *class_ids = nullptr;  // capacity, or nullptr: every candidate is class 0
  const uint32_t *count = nullptr;     // how many are used: a device word; above capacity: error
  size_t capacity = 0;                 // at most kMaxCount
  void *ready = nullptr;               // a cudaEvent_t recorded after they were written, or nullptr
  void *context = nullptr;  // the CUcontext they live in: the NMS context's (Context::cuda_context)
  // Optional: host-mapped memory holding the count once `ready` has completed (a sealed
  // DeviceCandidates buffer's), read with no copy; nullptr: the count is copied from `count`.
  const uint32_t *host_count = nullptr;
};

enum class Method { kGreedy, kMatrix, kSoft, kWeighted, kGroup };
enum class SoftDecay { kLinear, kGaussian };
enum class Overlap { kIoU, kIoMin, kIoS, kDIoU };
enum class Backend { kCpu, kCuda };

struct Params {
  Method method = Method::kGreedy;
  Overlap overlap = Overlap::kIoU;
  float threshold = 0.5f;        // in [0, 1]
  float score_threshold = 0.0f;  // candidates scoring below it are dropped; -inf keeps all
  size_t max_candidates = 4096;  // Dmax, at least 1
  size_t max_detections = 0;     // 0: no cap
  bool class_agnostic = false;
  // Groups of class ids whose candidates suppress one another (rule 4); a class may be in one
  // group at most. Empty: every class on its own. Ignored when class_agnostic.
  std::vector<std::vector<int32_t>> class_groups;
  SoftDecay soft_decay = SoftDecay::kGaussian;  // Method::kSoft only
  float sigma = 0.5f;                           // kGaussian's, above 0 (OpenCV's default)
  // Rule 5: the neighbours a kept candidate needs; 0: none (kGroup: grouping off).
  uint32_t min_neighbors = 0;
  double group_eps = 0.2;  // Method::kGroup's similarity, finite and at least 0 (OpenCV's)
};

struct Counts {
  size_t in = 0;             // candidates given
  size_t invalid = 0;        // rule 1
  size_t below_score = 0;    // rule 2
  size_t over_capacity = 0;  // rule 3
  size_t kept = 0;           // result size
};

struct Result {
  std::vector<uint32_t> kept;  // indices into the candidates, in rank order
  Counts counts;
  // With ContextOptions::time_device on a CUDA context: the GPU time from the first copy to the
  // device to the end of the last copy back, in microseconds; in a batch (Context::run of
  // several frames), an even share of the batch's. Otherwise 0.
  float device_time_us = 0;
  // Where the frame was computed: a CUDA context's frames on its GPU, except frames ranking more
  // candidates than its settle stage holds (128 Ki), which it computes on the CPU.
  Backend computed_on = Backend::kCpu;
  // The kept candidates' boxes (4 floats each), scores and class ids (0 without class ids), in
  // the order of `kept`: for device candidates, as the caller has no host copy of them, and for
  // the methods that change them (kSoft's decayed scores, kWeighted's and kGroup's boxes).
  std::vector<float> kept_boxes;
  std::vector<float> kept_scores;
  std::vector<int32_t> kept_class_ids;
  // For candidates with points: points_per_candidate x {x, y} per kept candidate, in the order
  // of `kept` (kWeighted's merged, rule 4). Empty otherwise.
  std::vector<float> kept_points;
  // Each kept candidate's neighbours (rule 5), in the order of `kept`: with
  // Params::min_neighbors above 0, and for kGroup (its class size less one). Empty otherwise.
  std::vector<uint32_t> kept_neighbors;
};

// One frame of a batch (Context::run of several frames): its candidates and its parameters.
struct Frame {
  CandidatesView candidates;
  Params params;
};

class Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed_; }
  const std::string &message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

struct ContextOptions {
  Backend backend = Backend::kCpu;
  int device = 0;          // CUDA device index
  void *stream = nullptr;  // a cudaStream_t to run on; nullptr: the context makes its own
  // CUDA works in the CUDA context current on the creating thread (e.g. a GstCudaContext pushed
  // by an element) when it is on `device`, else in the device's primary context.
  // The workspace is sized for frames of this many candidates at creation; larger frames grow it.
  // Params::max_candidates (Dmax) is only a cap: a huge Dmax costs what the frames bring.
  size_t reserve_candidates = 4096;
  bool time_device = false;  // fill Result::device_time_us (CUDA events; for benchmarks)
};

// Created once, reused per frame. The workspace (device memory and pinned host buffers for CUDA)
// is allocated at creation; run() allocates only when a frame ranks more candidates than any
// before. Memory that cannot be had is a Status, from create() or run(), never an abort.
// One context must not run on two threads at once.
class Context {
 public:
  static std::unique_ptr<Context> create(const ContextOptions &options, Status *status);
  virtual ~Context() = default;
  // On failure, *result is left empty and the status says why; a CUDA context that failed
  // may keep failing, and callers should fall back to a CPU context.
  Status run(const CandidatesView &candidates, const Params &params, Result *result);
  // The same on device candidates, CUDA contexts only: the context's stream waits for their ready
  // event (no host wait), and the one synchronisation brings back the counts, the kept indices
  // and the kept values. Nothing is copied to the host but the result.
  Status run(const DeviceCandidatesView &candidates, const Params &params, Result *result);
  // Several frames at once, each with its own candidates and parameters: *results gets one
  // Result per frame, in order, each as run() would give. On CUDA, greedy and matrix frames of up
  // to 16 Ki candidates go in one launch sequence and one synchronisation (one settle block per
  // frame, side by side on the GPU); larger frames, soft, weighted and group ones, and frames
  // with min_neighbors, run one after the other. A frame with bad input
  // fails the whole call, before any work, and *results is left empty.
  Status run(const std::vector<Frame> &frames, std::vector<Result> *results);
  // Waits for device candidates' ready event and copies their count (one word) to the host:
  // what a consumer reads to pick where a frame's NMS runs before it moves a candidate.
  virtual Status device_count(const DeviceCandidatesView &candidates, uint32_t *count) const;
  virtual Backend backend() const = 0;
  // The CUcontext a CUDA context works in (the one current when it was created, else the device's
  // primary context); nullptr on the CPU.
  virtual void *cuda_context() const { return nullptr; }
  // A human-readable name of where it runs, e.g. "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)".
  virtual std::string device_name() const = 0;

 private:
  // run() with its arguments checked and *result cleared.
  virtual Status run_checked(const CandidatesView &candidates, const Params &params,
                             Result *result) = 0;
  virtual Status run_device_checked(const DeviceCandidatesView &candidates, const Params &params,
                                    Result *result);
  // run() of several frames, checked and with *results sized and cleared: in turn, unless the
  // backend does better.
  virtual Status run_batch_checked(const std::vector<Frame> &frames, std::vector<Result> *results);
  // The candidates with each class id replaced by its class group's, in *group_ids, when
  // params group classes; else the candidates as they are.
  static CandidatesView grouped(const CandidatesView &candidates, const Params &params,
                                std::vector<int32_t> *group_ids);
  std::vector<std::vector<int32_t>> group_ids_ = std::vector<std::vector<int32_t>>(1);
};

// True when the CUDA backend is compiled in and a CUDA device can be used; otherwise false,
// and *why (if given) says what is missing.
bool cuda_available(std::string *why = nullptr);
// The CUDA devices this process may use (CUDA_VISIBLE_DEVICES applied): 0 without the CUDA
// backend, a driver or a device.
int cuda_device_count();
// CUDA device `device`'s UUID as NVML and nvidia-smi write it ("GPU-8d3f2a1c-..."): what ties
// the two numberings together when CUDA_VISIBLE_DEVICES reorders or hides devices. "" when
// there is no such device.
std::string cuda_device_uuid(int device);

// Names as used by the tool and the element properties ("greedy", "iou", "cuda", ...).
const char *to_string(Method method);
const char *to_string(Overlap overlap);
const char *to_string(SoftDecay decay);
const char *to_string(Backend backend);
bool parse_method(const std::string &name, Method *method);
bool parse_overlap(const std::string &name, Overlap *overlap);
bool parse_soft_decay(const std::string &name, SoftDecay *decay);
// "2,7;0,1": groups separated by ';', class ids by ','; spaces allowed. False on anything else.
bool parse_class_groups(const std::string &text, std::vector<std::vector<int32_t>> *groups);
std::string class_groups_to_string(const std::vector<std::vector<int32_t>> &groups);
bool parse_backend(const std::string &name, Backend *backend);

// Checks Params against the rules above; run() calls it too.
Status validate(const Params &params);

}  // namespace cudanms
