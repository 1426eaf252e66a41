// The CUDA backend: per frame or batch of frames, on one stream, with one host synchronisation
// at the end; every kernel reads a frame's descriptor (FrameArgs), one frame per blockIdx.z.
// Frames of up to kSmallFrameMax candidates run all of NMS in one kernel (small_frames.cu);
// larger ones run these stages, a file each:
//   host      the descriptors and the candidates, copied as they are into one pinned buffer: no
//             per-candidate work (this file)
//   H2D       one copy, which also zeroes the frames' counters and brings their counts. Device
//             candidates (a producer's buffers, their count a device word) are read in place:
//             the stream waits on their event, and only the descriptor and zeroed counters go up.
//   rank      rules 1-3: classify, then the best Dmax in rank order (rank.cu)
//   pairs     which earlier rank suppresses which: in rank order (pairs.cu), or for a single
//             large frame in spatial order (spatial_pairs.cu)
//   settle    greedy's fixpoint or matrix's verdicts (settle.cu), then the kept candidates'
//             indices, in rank order, at most max_detections, into mapped host memory (output.h)
//   D2H       device candidates only: the kept values, written by a kernel into mapped memory
// Soft and weighted frames past kSmallFrameMax run the rank stage, then their own stages
// (valued_methods.h); group frames the rank stage and the grouping (group.h); and frames with
// min_neighbors the rank stage, their method and the neighbours stage (neighbours.h). The memory
// of all stages is the Workspace's (workspace.h).
// The number of candidates and of ranked ones is known only on the device, so every kernel reads
// them there and launches are sized for the most they can be. That makes a host frame's work
// independent of its count within a power-of-two capacity: frames of up to kGraphMax candidates
// replay one CUDA graph per capacity and method (graph_cache.h), one submission instead of six.
// Only a frame ranking more than kMaxCudaCandidates runs on the CPU, which computes the same.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/class_groups.h"
#include "common/points.h"
#include "cpu/cpu_nms.h"
#include "cuda_device.h"
#include "cuda_nms.h"
#include "cudanms/device_candidates.h"
#include "frame_args.h"
#include "graph_cache.h"
#include "group.h"
#include "host_wait.h"
#include "neighbours.h"
#include "output.h"
#include "pairs.h"
#include "rank.h"
#include "settle.h"
#include "small_frames.h"
#include "valued_methods.h"
#include "workspace.h"

#define CUDANMS_TRY(call) CUDANMS_CUDA_TRY(call)

namespace cudanms {
namespace detail {
namespace {

// Host frames of up to kGraphMax candidates replay a CUDA graph captured for a power-of-two
// capacity of at least kGraphMinCapacity; at most kMaxGraphs are kept, the oldest dropped first.
constexpr uint32_t kGraphMax = kCountingRankMax;
constexpr uint32_t kGraphMinCapacity = 256;
constexpr size_t kMaxGraphs = 16;

// Frames in one launch sequence at most; larger batches go in turn.
constexpr size_t kMaxBatch = 1024;

constexpr size_t round16(size_t bytes) { return (bytes + 15) & ~size_t{15}; }

// A frame staged in pinned memory for the copy to the device: its counters (the count among
// them), then room for `capacity` boxes, scores and, when it is per-class, class ids. Every part
// starts 16-byte aligned.
struct StagedLayout {
  explicit StagedLayout(size_t capacity, bool with_classes)
      : boxes(kHeaderWords * sizeof(uint32_t)),
        scores(boxes + capacity * sizeof(float4)),
        classes(scores + round16(capacity * sizeof(float))),
        bytes(classes + (with_classes ? round16(capacity * sizeof(int32_t)) : 0)) {}
  size_t boxes, scores, classes, bytes;
};

// Frame descriptors at the head of the staged buffer, the frames after them.
size_t args_bytes(size_t frames) { return round16(frames * sizeof(FrameArgs)); }

// The capacity a host frame of n candidates is staged in: n past kGraphMax, else n rounded up to
// an eighth of the power of two above it (at least kGraphMinCapacity), so that four graphs serve
// each doubling of the count and the copy carries at most a quarter more than the candidates.
uint32_t staged_capacity(uint32_t n) {
  if (n > kGraphMax) return n;
  if (n <= kGraphMinCapacity) return kGraphMinCapacity;
  uint32_t power = kGraphMinCapacity;
  while (power < n) power *= 2;
  const uint32_t step = power / 8;
  return (n + step - 1) / step * step;
}

// What a captured graph's launches depend on: the parameters travel in the frame's descriptor.
struct GraphKey {
  uint32_t capacity, most;
  bool with_classes;
  Method method;
  bool neighbours;  // min_neighbors above 0
  bool operator==(const GraphKey &o) const {
    return std::tie(capacity, most, with_classes, method, neighbours) ==
           std::tie(o.capacity, o.most, o.with_classes, o.method, o.neighbours);
  }
};

// A frame that runs on its own, in its own launch sequence: one whose kernels write the kept
// values, or count neighbours.
bool runs_alone(const Params &params) {
  return changes_values(params.method) || params.min_neighbors > 0;
}

class CudaContext final : public Context {
 public:
  CudaContext() = default;
  ~CudaContext() override {
    DeviceBinding::Scope scope(binding_.context());
    graphs_.clear();
    ws_.reset();
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (done_) cudaEventDestroy(done_);
  }

  Status init(const ContextOptions &options) {
    Status status = binding_.open(options.device);
    if (!status.ok()) return status;
    CUDANMS_ENTER(binding_);
    ws_ = std::make_unique<Workspace>();
    if (options.stream != nullptr) {
      stream_ = static_cast<cudaStream_t>(options.stream);
    } else {
      CUDANMS_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    CUDANMS_TRY(cudaEventCreateWithFlags(&done_, kBlockingEventFlags));
    if (options.time_device) {
      CUDANMS_TRY(cudaEventCreate(&start_));
      CUDANMS_TRY(cudaEventCreate(&stop_));
    }
    CUDANMS_TRY(prepare_rank());
    CUDANMS_TRY(prepare_settle());
    CUDANMS_TRY(prepare_small_frames());
    int device = 0;
    CUDANMS_TRY(cudaGetDevice(&device));
    CUDANMS_TRY(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    const auto reserved =
        static_cast<uint32_t>(std::min(options.reserve_candidates, kMaxCudaCandidates));
    return ws_->reserve(1, reserved, reserved,
                        args_bytes(1) + StagedLayout(staged_capacity(reserved), true).bytes,
                        stream_);
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return binding_.name(); }
  void *cuda_context() const override { return binding_.context(); }

 private:
  // Copies host candidates into the staged frame at `h` (the device's copy at `d`) and points
  // the descriptor at them.
  static void stage(const CandidatesView &c, bool with_classes, const StagedLayout &layout,
                    unsigned char *h, unsigned char *d, FrameArgs *f) {
    const auto n = static_cast<uint32_t>(c.count);
    std::memset(h, 0, layout.boxes);
    reinterpret_cast<uint32_t *>(h)[kIn] = n;
    std::memcpy(h + layout.boxes, c.boxes, n * sizeof(float4));
    std::memcpy(h + layout.scores, c.scores, n * sizeof(float));
    if (with_classes) std::memcpy(h + layout.classes, c.class_ids, n * sizeof(int32_t));
    f->boxes = reinterpret_cast<const float4 *>(d + layout.boxes);
    f->scores = reinterpret_cast<const float *>(d + layout.scores);
    f->classes = with_classes ? reinterpret_cast<const int32_t *>(d + layout.classes) : nullptr;
    f->header = reinterpret_cast<uint32_t *>(d);
    f->count = f->header + kIn;
  }

  Status run_checked(const CandidatesView &c, const Params &params, Result *result) override {
    const auto n = static_cast<uint32_t>(c.count);
    result->counts.in = n;
    result->computed_on = Backend::kCuda;
    if (n == 0) return Status::Ok();
    const uint32_t capacity = staged_capacity(n);
    // Launches are sized for the most candidates NMS may process; the device knows how many.
    const uint32_t most = most_ranked(capacity, params);
    // The settle kernel's statuses would not fit in shared memory: the CPU computes the same.
    if (most > kMaxCudaCandidates) return cpu_->run(c, params, result);
    CUDANMS_ENTER(binding_);
    const bool classes = with_classes(c, params);
    const StagedLayout layout(capacity, classes);
    const size_t staged = args_bytes(1) + layout.bytes;
    Status status = ws_->reserve(1, capacity, most, staged, stream_);
    if (!status.ok()) return status;

    unsigned char *h = ws_->h_stage.get();
    unsigned char *d = ws_->d_stage.get();
    FrameArgs f = ws_->frame_args(0, capacity, most, params, capacity);
    stage(c, classes, layout, h + args_bytes(1), d + args_bytes(1), &f);
    f.out = ws_->h_out.device();
    std::memcpy(h, &f, sizeof f);
    const auto *frames = reinterpret_cast<const FrameArgs *>(d);
    const uint32_t greedy = params.method == Method::kGreedy ? 1 : 0;
    // Past kCountingRankMax (never in a graph), ranked by CUB's radix sort.
    RankSortBuffers sort_buffers{};
    if (capacity > kCountingRankMax) {
      status = ws_->reserve_sort(capacity, stream_);
      if (!status.ok()) return status;
      sort_buffers = ws_->sort_buffers();
    }
    const RankSortBuffers *sort = capacity > kCountingRankMax ? &sort_buffers : nullptr;
    if (params.method == Method::kGroup) {
      status = ws_->reserve_group(most, stream_);
      if (!status.ok()) return status;
    }
    auto submit = [&]() -> Status {
      CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
      return runs_alone(params) ? launch_alone(frames, params, capacity, most, sort)
                                : launch(frames, 1, greedy, capacity, most, sort);
    };
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    const GraphKey key{capacity, most, classes, params.method, params.min_neighbors > 0};
    status = capacity <= kGraphMax ? graphs_.replay(key, ws_->moves(), stream_, submit) : submit();
    if (status.ok()) status = finish(result);
    if (!status.ok()) return status;
    read_result(params, ws_->h_out.get(), result);
    if (changes_values(params.method)) read_kept_values(result);
    read_kept_neighbours(params, result);
    if (params.method == Method::kWeighted && c.points_per_candidate > 0) {
      return merge_weighted_points(c, f, result);
    }
    return Status::Ok();
  }

  // Rule 5's counts, where the frame's kernels wrote them.
  void read_kept_neighbours(const Params &params, Result *result) const {
    if (params.min_neighbors == 0 && params.method != Method::kGroup) return;
    const uint32_t *counts = ws_->h_kept_neighbours.get();
    result->kept_neighbors.assign(counts, counts + result->counts.kept);
  }

  // kWeighted's points, merged on the host like the CPU backend's: the rank order and the
  // claims kernel's clusters come back for it, only for frames with points.
  Status merge_weighted_points(const CandidatesView &c, const FrameArgs &f, Result *result) {
    const size_t ranked = std::min(ws_->h_out.get()[kEligible], f.dmax);
    rank_order_.resize(ranked);
    claims_.resize(ranked);
    if (ranked > 0) {
      CUDANMS_TRY(cudaMemcpyAsync(rank_order_.data(), f.order, ranked * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, stream_));
      CUDANMS_TRY(cudaMemcpyAsync(claims_.data(), f.clusters, ranked * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, stream_));
      if (f.slot_moves) {  // the neighbours stage moved the kept slots the claims name
        slot_moves_.resize(ranked);
        CUDANMS_TRY(cudaMemcpyAsync(slot_moves_.data(), f.slot_moves, ranked * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, stream_));
      }
      CUDANMS_TRY(waits_.stream(stream_, done_));
      if (f.slot_moves) {
        for (uint32_t &claim : claims_) {
          if (claim != UINT32_MAX) claim = slot_moves_[claim];
        }
      }
    }
    merged_points(c, result->kept, rank_order_.data(), claims_.data(), ranked,
                  &result->kept_points);
    return Status::Ok();
  }

  // The kept values the kernels wrote into mapped memory, for result->counts.kept candidates.
  void read_kept_values(Result *result) const {
    const Workspace &w = *ws_;
    const size_t kept = result->counts.kept;
    const float *boxes = reinterpret_cast<const float *>(w.h_kept_boxes.get());
    result->kept_boxes.assign(boxes, boxes + 4 * kept);
    result->kept_scores.assign(w.h_kept_scores.get(), w.h_kept_scores.get() + kept);
    result->kept_class_ids.assign(w.h_kept_classes.get(), w.h_kept_classes.get() + kept);
  }

  // Frames of up to kGraphMax candidates share launch sequences, kMaxBatch at a time, greedy
  // frames first; a larger frame, and a soft or weighted one, runs on its own.
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    std::vector<size_t> batch;
    for (size_t k = 0; k < frames.size(); ++k) {
      if (frames[k].candidates.count == 0 || frames[k].candidates.count > kGraphMax ||
          runs_alone(frames[k].params)) {
        const Status status = run_checked(frames[k].candidates, frames[k].params, &(*results)[k]);
        if (!status.ok()) return status;
      } else {
        batch.push_back(k);
      }
    }
    std::stable_partition(batch.begin(), batch.end(), [&frames](size_t k) {
      return frames[k].params.method == Method::kGreedy;
    });
    for (size_t first = 0; first < batch.size(); first += kMaxBatch) {
      const Status status = run_batch_part(frames, batch.data() + first,
                                           std::min(kMaxBatch, batch.size() - first), results);
      if (!status.ok()) return status;
    }
    return Status::Ok();
  }

  // The `count` frames whose indices start at `part` (greedy ones first) in one launch sequence
  // and one synchronisation.
  Status run_batch_part(const std::vector<Frame> &frames, const size_t *part, size_t count,
                        std::vector<Result> *results) {
    CUDANMS_ENTER(binding_);
    uint32_t C = 0, M = 0, greedy = 0;
    size_t staged = args_bytes(count);
    for (size_t b = 0; b < count; ++b) {
      const Frame &frame = frames[part[b]];
      const auto n = static_cast<uint32_t>(frame.candidates.count);
      C = std::max(C, n);
      M = std::max(M, most_ranked(n, frame.params));
      greedy += frame.params.method == Method::kGreedy;
      staged += StagedLayout(n, with_classes(frame)).bytes;
    }
    Status status = ws_->reserve(count, C, M, staged, stream_);
    if (!status.ok()) return status;

    unsigned char *h = ws_->h_stage.get();
    unsigned char *d = ws_->d_stage.get();
    size_t offset = args_bytes(count);
    for (size_t b = 0; b < count; ++b) {
      const Frame &frame = frames[part[b]];
      const auto n = static_cast<uint32_t>(frame.candidates.count);
      const StagedLayout layout(n, with_classes(frame));
      FrameArgs f = ws_->frame_args(b, C, M, frame.params, n);
      stage(frame.candidates, with_classes(frame), layout, h + offset, d + offset, &f);
      f.out = ws_->h_out.device() + b * (kHeaderWords + M);
      std::memcpy(h + b * sizeof(FrameArgs), &f, sizeof f);
      offset += layout.bytes;
      Result &result = (*results)[part[b]];
      result.counts.in = n;
      result.computed_on = Backend::kCuda;
    }
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
    status = launch(reinterpret_cast<const FrameArgs *>(d), static_cast<uint32_t>(count), greedy, C,
                    M, nullptr);
    if (status.ok()) status = finish(&(*results)[part[0]]);
    if (!status.ok()) return status;
    for (size_t b = 0; b < count; ++b) {
      read_result(frames[part[b]].params, ws_->h_out.get() + b * (kHeaderWords + M),
                  &(*results)[part[b]]);
    }
    return Status::Ok();
  }

  // Whether the frame's class ids are staged: per-class NMS on candidates that have them.
  static bool with_classes(const CandidatesView &c, const Params &params) {
    return !params.class_agnostic && c.class_ids != nullptr;
  }
  static bool with_classes(const Frame &frame) {
    return with_classes(frame.candidates, frame.params);
  }

  Status run_device_checked(const DeviceCandidatesView &c, const Params &params,
                            Result *result) override {
    if (c.context != binding_.context()) {
      return Status::Error("the device candidates live in another CUDA context than " +
                           binding_.name() + "'s NMS; download them first");
    }
    result->computed_on = Backend::kCuda;
    if (c.capacity == 0) return Status::Ok();
    const auto n = static_cast<uint32_t>(c.capacity);
    const uint32_t most = most_ranked(n, params);
    if (most > kMaxCudaCandidates) return run_downloaded(c, params, result);
    CUDANMS_ENTER(binding_);
    // Class groups: their table goes up with the descriptor, after the header.
    const ClassGroupTable groups = groups_classes(params) && c.class_ids != nullptr
                                       ? class_group_table(params.class_groups)
                                       : ClassGroupTable();
    const size_t table_offset = args_bytes(1) + kHeaderWords * sizeof(uint32_t);
    const size_t staged = table_offset + groups.size() * sizeof(int2);
    Status status = ws_->reserve(1, n, most, staged, stream_);
    if (status.ok() && params.method == Method::kGroup) status = ws_->reserve_group(most, stream_);
    if (!status.ok()) return status;

    Workspace &w = *ws_;
    unsigned char *h = w.h_stage.get();
    unsigned char *d = w.d_stage.get();
    FrameArgs f = ws_->frame_args(0, n, most, params, n);
    f.boxes = reinterpret_cast<const float4 *>(c.boxes);
    f.scores = c.scores;
    f.classes = c.class_ids;
    f.count = c.count;
    f.header = reinterpret_cast<uint32_t *>(d + args_bytes(1));
    f.out = w.d_out.get();
    if (!groups.empty()) {
      auto *table = reinterpret_cast<int2 *>(h + table_offset);
      for (size_t k = 0; k < groups.size(); ++k) table[k] = {groups[k].first, groups[k].second};
      f.class_groups = reinterpret_cast<const int2 *>(d + table_offset);
      f.class_group_count = static_cast<uint32_t>(groups.size());
    }
    std::memcpy(h, &f, sizeof f);
    std::memset(h + args_bytes(1), 0, kHeaderWords * sizeof(uint32_t));
    if (c.ready) CUDANMS_TRY(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(c.ready), 0));
    if (start_) CUDANMS_TRY(cudaEventRecord(start_, stream_));
    CUDANMS_TRY(cudaMemcpyAsync(d, h, staged, cudaMemcpyHostToDevice, stream_));
    const auto *frame = reinterpret_cast<const FrameArgs *>(d);
    status = runs_alone(params)
                 ? launch_alone(frame, params, n, most, nullptr)
                 : launch(frame, 1, params.method == Method::kGreedy ? 1 : 0, n, most, nullptr);
    if (!status.ok()) return status;
    if (!changes_values(params.method)) {
      CUDANMS_TRY(launch_kept_values(w.d_out.get(), f.detections, f.boxes, c.scores, c.class_ids,
                                     w.h_kept_boxes.device(), w.h_kept_scores.device(),
                                     w.h_kept_classes.device(), stream_));
    }
    CUDANMS_TRY(cudaMemcpyAsync(w.h_out.get(), w.d_out.get(),
                                (kHeaderWords + size_t{f.detections}) * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, stream_));
    status = finish(result);
    if (!status.ok()) return status;
    const uint32_t *out = w.h_out.get();
    if (out[kCountOverflow] != 0) {
      return Status::Error("the producer counted " + std::to_string(out[kIn]) +
                           " candidates in a buffer of " + std::to_string(n));
    }
    result->counts.in = out[kIn];
    read_result(params, out, result);
    read_kept_values(result);
    read_kept_neighbours(params, result);
    return Status::Ok();
  }

  // Device candidates ranking more than the settle kernel holds: the CPU computes the same
  // result on a download.
  Status run_downloaded(const DeviceCandidatesView &c, const Params &params, Result *result) {
    HostCandidates host;
    Status status = download(c, &host);
    if (!status.ok()) return status;
    status = cpu_->run(host.view(), params, result);
    if (!status.ok() || changes_values(params.method)) return status;  // values given
    for (const uint32_t p : result->kept) {
      result->kept_boxes.insert(result->kept_boxes.end(), &host.boxes[4 * size_t{p}],
                                &host.boxes[4 * size_t{p} + 4]);
      result->kept_scores.push_back(host.scores[p]);
      result->kept_class_ids.push_back(host.class_ids[p]);
    }
    return Status::Ok();
  }

  // The one synchronisation of a frame or a batch.
  Status finish(Result *result) {
    if (stop_) CUDANMS_TRY(cudaEventRecord(stop_, stream_));
    CUDANMS_TRY(waits_.stream(stream_, done_));
    if (stop_) {
      float ms = 0;
      CUDANMS_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      result->device_time_us = 1000.0f * ms;
    }
    return Status::Ok();
  }

  static void read_result(const Params &params, const uint32_t *out, Result *result) {
    Counts &counts = result->counts;
    counts.invalid = out[kInvalid];
    counts.below_score = out[kBelowScore];
    counts.over_capacity = out[kEligible] - std::min<size_t>(out[kEligible], params.max_candidates);
    counts.kept = out[kKeptCount];
    result->kept.assign(out + kHeaderWords, out + kHeaderWords + counts.kept);
  }

  // The kernels for `count` frames (descriptors in device memory, the first `greedy` of them
  // greedy), launches sized for `capacity` candidates and `most` ranked: one launch per method
  // up to kSmallFrameMax, else rank, pairs and settle. `sort`: one frame ranked by CUB's sort.
  Status launch(const FrameArgs *frames, uint32_t count, uint32_t greedy, uint32_t capacity,
                uint32_t most, const RankSortBuffers *sort) {
    const FrameArgs *matrix = frames + greedy;
    if (capacity <= kSmallFrameMax) {
      const uint32_t blocks = small_frame_blocks(capacity, most, count, sms_);
      if (greedy > 0) {
        CUDANMS_TRY(
            launch_small_frames(frames, greedy, Method::kGreedy, capacity, blocks, stream_));
      }
      if (count > greedy) {
        CUDANMS_TRY(launch_small_frames(matrix, count - greedy, Method::kMatrix, capacity, blocks,
                                        stream_));
      }
      return Status::Ok();
    }
    CUDANMS_TRY(launch_rank(frames, count, capacity, most, sort, stream_));
    if (greedy > 0) CUDANMS_TRY(pairs_then_settle(frames, greedy, Method::kGreedy, most));
    if (count > greedy)
      CUDANMS_TRY(pairs_then_settle(matrix, count - greedy, Method::kMatrix, most));
    return Status::Ok();
  }

  // A frame that runs alone (runs_alone): a soft or weighted one of up to kSmallFrameMax
  // candidates in one kernel; else the rank stage, then its method's stages (Soft-NMS's
  // selections; weighted's greedy pairs, settle and merge; the grouping; greedy's or matrix's
  // pairs and settle) and, for rule 5, the neighbours stage.
  Status launch_alone(const FrameArgs *frame, const Params &params, uint32_t capacity,
                      uint32_t most, const RankSortBuffers *sort) {
    const Method method = params.method;
    const bool counting = counts_neighbours(method, params.min_neighbors);
    if (capacity <= kSmallFrameMax && !counting && method != Method::kGroup) {
      CUDANMS_TRY(launch_small_frames(frame, 1, method, capacity,
                                      small_frame_blocks(capacity, most, 1, sms_), stream_));
      return Status::Ok();
    }
    CUDANMS_TRY(launch_rank(frame, 1, capacity, most, sort, stream_));
    switch (method) {
      case Method::kSoft:
        CUDANMS_TRY(launch_soft(frame, stream_));
        break;
      case Method::kWeighted:
        CUDANMS_TRY(pairs_then_settle(frame, 1, Method::kGreedy, most));
        CUDANMS_TRY(launch_weighted_merge(frame, most, stream_));
        break;
      case Method::kGroup:
        CUDANMS_TRY(
            launch_group(frame, most, params.min_neighbors > 0, ws_->group_buffers(), stream_));
        break;
      case Method::kGreedy:
      case Method::kMatrix:
        CUDANMS_TRY(pairs_then_settle(frame, 1, method, most));
        CUDANMS_TRY(launch_count_neighbours(frame, method, sms_, stream_));
        break;
    }
    if (counting) CUDANMS_TRY(launch_keep_neighboured(frame, stream_));
    return Status::Ok();
  }

  cudaError_t pairs_then_settle(const FrameArgs *frames, uint32_t count, Method method,
                                uint32_t most) {
    const cudaError_t error =
        launch_pairs(frames, count, method, most, sms_, ws_->spatial_buffers(), stream_);
    return error != cudaSuccess ? error : launch_settle(frames, count, method, most, stream_);
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr;  // both set only with ContextOptions::time_device
  cudaEvent_t stop_ = nullptr;
  cudaEvent_t done_ = nullptr;  // what the host waits on
  HostWait waits_;
  int sms_ = 1;                                             // the device's multiprocessors
  std::unique_ptr<Context> cpu_ = create_cpu_context({});   // frames past kMaxCudaCandidates
  std::vector<uint32_t> rank_order_, claims_, slot_moves_;  // weighted frames with points
  std::unique_ptr<Workspace> ws_;
  GraphCache<GraphKey> graphs_{kMaxGraphs};
};

}  // namespace

std::unique_ptr<Context> create_cuda_context(const ContextOptions &options, Status *status) {
  auto context = std::make_unique<CudaContext>();
  *status = context->init(options);
  if (!status->ok()) return nullptr;
  return context;
}

}  // namespace detail

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

int cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::string cuda_device_uuid(int device) {
  cudaDeviceProp prop{};
  if (device < 0 || device >= cuda_device_count() ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "";
  const auto *b = reinterpret_cast<const unsigned char *>(prop.uuid.bytes);
  char text[48];
  snprintf(text, sizeof text,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

}  // namespace cudanms
