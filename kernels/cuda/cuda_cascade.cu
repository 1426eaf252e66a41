// The cascade detector on CUDA (Micikevicius, "Maximizing Face Detection Performance", GTC 2015):
// every scale resized and integrated on the GPU, one thread per window, the stages run in
// segments, each launch over a queue of the windows alive after the one before. The kernels are
// cascade_stages.h's, a file per stage; this is the detector that sizes the tables and workspace
// and launches them. The per-window arithmetic is common/cascade_eval.h, the same code the CPU
// twin runs.
//
// Per frame (detect() into host windows): one upload of the grey image, the launches, one copy
// back of the windows into mapped host memory and one synchronisation (a second copy only when a
// frame returns more windows than any before it and past the mapped buffer). Into device
// candidates, a batch of frames of one size runs through the same launches as one frame: the
// level tables hold every frame's scales one after another, each at its own place in the
// planes, and each frame lists its windows apart for emit_candidates.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "common/cascade_eval.h"
#include "common/cascade_geometry.h"
#include "cuda/cascade_stages.h"
#include "cuda/cuda_device.h"
#include "cuda/host_wait.h"
#include "cuda_cascade.h"

#define CASCADE_TRY(call) CUDANMS_CUDA_TRY(call)

namespace cudanms::cascade::detail {
namespace {

using cudanms::detail::kBlockingEventFlags;

constexpr size_t kMappedWindows = 16 * 1024;  // windows copied back with the one synchronisation
constexpr size_t kSharedBytes = 48 * 1024;    // shared memory without opting in to more
constexpr size_t kStagingThreads = 8;         // copying a batch's host frames

using ::cudanms::detail::DeviceArray;
using ::cudanms::detail::DeviceBinding;
using ::cudanms::detail::MappedArray;

class CudaDetector final : public Detector {
 public:
  explicit CudaDetector(std::shared_ptr<const Model> model) : Detector(std::move(model)) {}
  ~CudaDetector() override {
    DeviceBinding::Scope scope(binding_.context());
    w_.reset();
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (uploaded_) cudaEventDestroy(uploaded_);
    if (staged_) cudaEventDestroy(staged_);
    if (slots_copied_) cudaEventDestroy(slots_copied_);
    if (image_read_) cudaEventDestroy(image_read_);
    if (done_) cudaEventDestroy(done_);
  }

  Status init(const DetectorOptions &options) {
    Status opened = binding_.open(options.device);
    if (!opened.ok()) return opened;
    CUDANMS_ENTER(binding_);
    sm_count_ = binding_.sm_count();
    w_ = std::make_unique<Workspace>();
    // The host waits on these (host_wait.h).
    CASCADE_TRY(cudaEventCreateWithFlags(&staged_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&slots_copied_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&image_read_, kBlockingEventFlags));
    CASCADE_TRY(cudaEventCreateWithFlags(&done_, kBlockingEventFlags));
    if (options.stream) {
      stream_ = static_cast<cudaStream_t>(options.stream);
    } else {
      CASCADE_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    if (options.time_device) {
      CASCADE_TRY(cudaEventCreate(&start_));
      CASCADE_TRY(cudaEventCreate(&stop_));
      CASCADE_TRY(cudaEventCreate(&uploaded_));
    }
    const Model &m = *model_;
    const int stages = static_cast<int>(m.stages.size());
    for (const auto &stage : m.stages) max_trees_ = std::max(max_trees_, stage.trees);
    // One float per tree of a stage per warp of the segment kernels, in shared memory.
    constexpr int kMaxSharedTrees = kSharedBytes / (kWarpsPerBlock * sizeof(float));
    if (max_trees_ > kMaxSharedTrees) {
      return Status::Error("a stage of " + std::to_string(max_trees_) +
                           " trees is more than the CUDA backend takes (" +
                           std::to_string(kMaxSharedTrees) + "); use the cpu backend");
    }
    bounds_.push_back(0);
    for (const int s : options.segment_starts) {
      if (s > bounds_.back() && s < stages) bounds_.push_back(s);
    }
    bounds_.push_back(stages);

    Status status = w_->stages.upload(m.stages, stream_);
    if (status.ok()) status = w_->trees.upload(m.trees, stream_);
    if (status.ok()) status = w_->nodes.upload(m.nodes, stream_);
    if (status.ok()) status = w_->leaves.upload(m.leaves, stream_);
    if (status.ok()) status = w_->subsets.upload(m.subsets, stream_);
    if (status.ok()) status = w_->counts.reserve(bounds_.size() + 1);
    if (status.ok()) status = w_->reached.reserve(1);
    if (status.ok()) status = w_->h_counts.reserve(bounds_.size() + 1);
    if (status.ok()) status = w_->h_reached.reserve(1);
    if (status.ok()) status = w_->h_windows.reserve(kMappedWindows);
    if (!status.ok()) return status;
    CASCADE_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return binding_.name(); }
  void *cuda_context() const override { return binding_.context(); }

 private:
  // The frames where the kernels read them, as the batch's slots: device pixels in place (after
  // their events), host pixels through the pinned staging buffer, asynchronously. The slots, too,
  // go through pinned memory (a copy from pageable memory may wait for the stream). Staging
  // buffers are refilled only once the previous batch's copies out of them are done.
  Status upload(const std::vector<DeviceFrame> &frames) {
    if (start_) CASCADE_TRY(cudaEventRecord(start_, stream_));
    const size_t row = static_cast<size_t>(geometry_.image_width);
    const size_t pixels = row * geometry_.image_height;
    bool staged = false;
    std::vector<size_t> host_frames;
    CASCADE_TRY(waits_.event(slots_copied_));
    Status reserved = w_->h_slots.reserve(frames.size());
    if (reserved.ok()) reserved = w_->slots.reserve(frames.size());
    if (!reserved.ok()) return reserved;
    for (size_t f = 0; f < frames.size(); ++f) {
      const GrayView &image = frames[f].image;
      FrameSlot &slot = w_->h_slots.get()[f];
      slot = FrameSlot{};
      if (image.on_device) {
        if (image.ready)
          CASCADE_TRY(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(image.ready), 0));
        slot.pixels = image.pixels;
        slot.stride = image.stride;
      } else {
        if (!staged) {  // the last batch's copy is done: the staging buffers may grow
          CASCADE_TRY(waits_.event(staged_));
          Status status = w_->image.reserve(pixels * frames.size());
          if (status.ok()) status = w_->h_image.reserve(pixels * frames.size());
          if (!status.ok()) return status;
        }
        staged = true;
        host_frames.push_back(f);
        slot.pixels = w_->image.get() + f * pixels;
        slot.stride = row;
      }
      if (DeviceCandidates *out = frames[f].out) {
        slot.boxes = reinterpret_cast<float4 *>(out->boxes());
        slot.scores = out->scores();
        slot.class_ids = out->class_ids();
        slot.count = out->count();
        slot.capacity = static_cast<uint32_t>(std::min<size_t>(out->capacity(), UINT32_MAX));
        slot.class_id = frames[f].output.class_id;
        slot.min_score = frames[f].output.min_score;
      }
    }
    // The host frames into the staging buffer, several at once: one thread copies ~5 GB/s, and a
    // batch of 1080p frames is tens of MB.
    const auto stage = [&](size_t first) {
      for (size_t k = first; k < host_frames.size(); k += kStagingThreads) {
        const GrayView &image = frames[host_frames[k]].image;
        uint8_t *to = w_->h_image.get() + host_frames[k] * pixels;
        for (int y = 0; y < image.height; ++y)
          std::memcpy(to + y * row, image.pixels + y * image.stride, row);
      }
    };
    std::vector<std::thread> copiers;
    for (size_t t = 1; t < std::min(host_frames.size(), kStagingThreads); ++t) {
      try {
        copiers.emplace_back(stage, t);
      } catch (const std::system_error &) {  // no thread to be had: copied here
        stage(t);
      }
    }
    if (!host_frames.empty()) stage(0);
    for (std::thread &t : copiers) t.join();
    if (staged) {  // one copy for the host frames of the batch, gaps and all
      CASCADE_TRY(cudaMemcpyAsync(w_->image.get(), w_->h_image.get(), pixels * frames.size(),
                                  cudaMemcpyHostToDevice, stream_));
      CASCADE_TRY(cudaEventRecord(staged_, stream_));
    }
    CASCADE_TRY(cudaMemcpyAsync(w_->slots.get(), w_->h_slots.get(),
                                frames.size() * sizeof(FrameSlot), cudaMemcpyHostToDevice,
                                stream_));
    CASCADE_TRY(cudaEventRecord(slots_copied_, stream_));
    if (uploaded_) CASCADE_TRY(cudaEventRecord(uploaded_, stream_));
    return Status::Ok();
  }

  // Frames of one size, at most max_batch_frames() of them.
  Status detect_batch_checked(const std::vector<DeviceFrame> &frames, const DetectParams &params,
                              DetectStats *stats) override {
    CUDANMS_ENTER(binding_);
    for (const DeviceFrame &frame : frames) {
      Status status = check_context(*frame.out);
      if (!status.ok()) return status;
    }
    const GrayView &first = frames.front().image;
    Status status = prepare(first.width, first.height, params, frames.size());
    if (!status.ok()) return status;
    const Geometry &g = geometry_;
    stats->scales = g.levels.size();
    bool on_device = false;
    if (g.levels.empty()) {
      for (const DeviceFrame &frame : frames)
        CASCADE_TRY(cudaMemsetAsync(frame.out->count(), 0, sizeof(uint32_t), stream_));
    } else {
      status = upload(frames);
      if (status.ok()) status = launch(frames.size(), true);
      if (!status.ok()) return status;
      const unsigned frame_blocks = std::max<unsigned>(
          1, static_cast<unsigned>(sm_count_) / static_cast<unsigned>(frames.size()));
      CASCADE_TRY(emit_candidates_async(
          frame_blocks, static_cast<int>(frames.size()), finals(), w_->levels.get(),
          static_cast<int>(g.levels.size() * frames.size()), stream_));
      for (const DeviceFrame &frame : frames) on_device |= frame.image.on_device;
    }
    for (const DeviceFrame &frame : frames) {
      status = frame.out->seal(stream_);
      if (!status.ok()) return status;
    }
    // The caller may reuse device pixels once detect() returns: wait for their one reader.
    if (on_device) CASCADE_TRY(waits_.event(image_read_));
    return Status::Ok();
  }

  Status check_context(const DeviceCandidates &out) const {
    if (out.context() == binding_.context()) return Status::Ok();
    return Status::Error("the device candidates live in another CUDA context than the detector's");
  }

  // Grid indices, rows and level counts of a batch stay within the kernels' int32 and grid z.
  size_t max_batch_frames(int width, int height, const DetectParams &params) const override {
    const Geometry g = make_geometry(*model_, width, height, params, false);
    size_t rows = 0;
    for (const Level &l : g.levels) rows += static_cast<size_t>(l.height);
    const size_t per_frame = std::max<size_t>({g.windows, rows, 1});
    const size_t levels = std::max<size_t>(g.levels.size(), 1);
    return std::max<size_t>(std::min<size_t>(INT32_MAX / per_frame, 65535 / levels), 1);
  }

  Status detect_device_checked(const GrayView &image, const DetectParams &params,
                               const DeviceOutput &output, DeviceCandidates *out,
                               DetectStats *stats) override {
    if (image.width > 0 && image.height > 0)
      return detect_batch_checked({DeviceFrame{image, output, out}}, params, stats);
    CUDANMS_ENTER(binding_);
    Status status = check_context(*out);
    if (!status.ok()) return status;
    CASCADE_TRY(cudaMemsetAsync(out->count(), 0, sizeof(uint32_t), stream_));
    return out->seal(stream_);
  }

  Status detect_checked(const GrayView &image, const DetectParams &params,
                        std::vector<Window> *windows, DetectStats *stats) override {
    CUDANMS_ENTER(binding_);
    Status status = prepare(image.width, image.height, params, 1);
    if (!status.ok()) return status;
    const Geometry &g = geometry_;
    stats->scales = g.levels.size();
    if (g.levels.empty()) return Status::Ok();

    DeviceFrame frame;
    frame.image = image;
    status = upload({frame});
    if (status.ok()) status = launch(1, false);
    if (!status.ok()) return status;
    if (stop_) CASCADE_TRY(cudaEventRecord(stop_, stream_));
    CASCADE_TRY(waits_.stream(stream_, done_));

    const size_t segments = bounds_.size() - 1;
    const uint32_t found = w_->h_counts.get()[segments];
    if (found > w_->h_windows.size()) {  // more than ever before: grow, and copy the rest
      Status grown = w_->h_windows.reserve(found);
      if (!grown.ok()) return grown;
      CASCADE_TRY(cudaMemcpy(w_->h_windows.get(), w_->windows.get(), found * sizeof(OutWindow),
                             cudaMemcpyDeviceToHost));
    }
    if (stop_) {
      float ms = 0;
      CASCADE_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      stats->device_time_us = 1000.0f * ms;
      CASCADE_TRY(cudaEventElapsedTime(&ms, uploaded_, stop_));
      stats->after_upload_us = 1000.0f * ms;
    }
    stats->windows_evaluated = static_cast<size_t>(*w_->h_reached.get());
    for (size_t k = 0; k + 1 < segments; ++k)
      stats->alive_after_segment.push_back(w_->h_counts.get()[k]);
    stats->alive_after_segment.push_back(found);

    // In the mapped buffer itself: no copy per frame.
    OutWindow *const out = w_->h_windows.get();
    std::sort(out, out + found, [](const OutWindow &a, const OutWindow &b) {
      return a.level != b.level ? a.level < b.level : a.y != b.y ? a.y < b.y : a.x < b.x;
    });
    for (const OutWindow *o = out; o != out + found; ++o) {
      Window w{};
      if (!window_rect(g, g.levels[o->level], o->x, o->y, &w)) continue;
      w.score = o->score;
      w.scale = o->level;
      windows->push_back(w);
    }
    stats->windows_out = windows->size();
    return Status::Ok();
  }

  // Where the last segment lists the windows of a batch's frames (device candidates).
  Finals finals() const {
    Finals f;
    f.list = w_->finals.get();
    f.per_frame = geometry_.windows;
    f.counts = w_->counts.get() + bounds_.size();
    f.frames = w_->slots.get();
    f.image_width = geometry_.image_width, f.image_height = geometry_.image_height;
    return f;
  }

  // Geometry, tables and workspace for frames of this size and these parameters, batches of up
  // to `frames` of them: the level tables repeat a frame's levels once per frame of the batch,
  // each at its own place in the planes, so that every kernel runs the batch in one launch. They
  // grow with the largest batch and serve every smaller one (its frames' levels come first).
  Status prepare(int width, int height, const DetectParams &params, size_t frames) {
    if (geometry_.matches(width, height, params) && !geometry_.levels.empty() &&
        frames <= table_frames_)
      return Status::Ok();
    Geometry g = make_geometry(*model_, width, height, params);
    Status status = geometry_fits(g);
    if (!status.ok()) return status;
    geometry_ = std::move(g);
    table_frames_ = 0;
    const Geometry &geo = geometry_;
    if (geo.levels.empty()) return Status::Ok();

    std::vector<DeviceLevel> levels;
    int rows = 0, grid_rows = 0, tiles = 0;
    for (size_t f = 0; f < frames; ++f) {
      for (const Level &l : geo.levels) {
        DeviceLevel d{};
        d.width = l.width, d.height = l.height, d.step = l.step, d.cols = l.cols, d.rows = l.rows;
        d.first_row = rows, d.first_grid_row = grid_rows, d.first_tile = tiles;
        d.x_taps = static_cast<int32_t>(l.x_taps), d.y_taps = static_cast<int32_t>(l.y_taps);
        d.origin = static_cast<int64_t>(f * geo.plane_size + l.origin);
        d.first_window = static_cast<int64_t>(f * geo.windows + l.first_window);
        d.factor = l.factor, d.out_width = l.out_width, d.out_height = l.out_height;
        d.frame = static_cast<int32_t>(f);
        rows += l.height, grid_rows += l.rows;
        tiles += tiles_across(l.cols) * ((l.rows + kTileRows - 1) / kTileRows);
        levels.push_back(d);
      }
      if (f == 0)
        total_rows_ = rows, total_grid_rows_ = grid_rows, total_tiles_ = tiles;  // a frame's
    }
    const FeatureTables tables = make_feature_tables(*model_, geo.stride);
    const bool haar = model_->feature_type == FeatureType::kHaar;
    const size_t plane = geo.plane_size * frames;
    const size_t windows = geo.windows * frames;
    status = w_->levels.upload(levels, stream_);
    if (status.ok()) status = w_->x_taps.upload(geo.x_taps, stream_);
    if (status.ok()) status = w_->y_taps.upload(geo.y_taps, stream_);
    if (status.ok()) status = w_->haar.upload(tables.haar, stream_);
    const std::vector<HaarStump> stumps = haar_stumps(*model_, tables.haar);
    if (status.ok() && !stumps.empty()) status = w_->stumps.upload(stumps, stream_);
    if (status.ok()) status = w_->lbp.upload(tables.lbp, stream_);
    if (status.ok()) status = w_->counts.reserve(bounds_.size() + frames);
    if (status.ok()) status = w_->resized.reserve(plane);
    if (status.ok()) status = w_->sum.reserve(plane);
    if (status.ok() && haar) status = w_->sqsum.reserve(plane);
    if (status.ok() && model_->has_tilted_features) {
      status = w_->tilted.reserve(plane);
      const size_t n =
          static_cast<size_t>(geo.levels.front().width) + geo.levels.front().height - 1;
      if (status.ok()) status = w_->tilt_grid.reserve(n * n);
    }
    if (status.ok()) status = w_->status.reserve(windows);
    if (status.ok()) status = w_->norms.reserve(windows);
    if (status.ok()) status = w_->queue_a.reserve(windows);
    if (status.ok()) status = w_->queue_b.reserve(windows);
    if (status.ok()) status = w_->windows.reserve(geo.windows);  // detect(): one frame
    if (status.ok()) status = w_->finals.reserve(windows);
    if (!status.ok()) {
      geometry_ = Geometry{};
      return status;
    }
    // Row 0 and column 0 of every level stay zero: the kernels never write them.
    CASCADE_TRY(cudaMemsetAsync(w_->sum.get(), 0, plane * sizeof(int32_t), stream_));
    if (haar) CASCADE_TRY(cudaMemsetAsync(w_->sqsum.get(), 0, plane * sizeof(int32_t), stream_));
    if (model_->has_tilted_features)
      CASCADE_TRY(cudaMemsetAsync(w_->tilted.get(), 0, plane * sizeof(int32_t), stream_));

    stage_stumps_ = stump_stage(*model_, stumps, bounds_[1]);
    tree_stumps_ = stumps.empty() ? nullptr : w_->stumps.get();
    view_ = host_view(*model_, tables);  // then its arrays pointed at the device copies
    view_.stages = w_->stages.get(), view_.trees = w_->trees.get(), view_.nodes = w_->nodes.get();
    view_.leaves = w_->leaves.get(), view_.subsets = w_->subsets.get();
    view_.haar = w_->haar.get(), view_.lbp = w_->lbp.get();
    table_frames_ = frames;
    return Status::Ok();
  }

  // The launches of a batch (the first `frames` of the level tables); into_finals: the last
  // segment lists each frame's windows for device candidates, else (one frame) they are
  // published to mapped memory for detect().
  Status launch(size_t frames, bool into_finals) {
    const Geometry &g = geometry_;
    const int levels = static_cast<int>(g.levels.size() * frames);
    const int total_rows = total_rows_ * static_cast<int>(frames);
    const int total_grid_rows = total_grid_rows_ * static_cast<int>(frames);
    const bool haar = model_->feature_type == FeatureType::kHaar;
    const Level &widest = g.levels.front();
    CASCADE_TRY(resize_levels_async(w_->slots.get(), w_->levels.get(), levels, widest.width,
                                    widest.height, w_->x_taps.get(), w_->y_taps.get(), g.stride,
                                    w_->resized.get(), stream_));
    CASCADE_TRY(cudaEventRecord(image_read_, stream_));  // the frames' only reader is done
    int32_t *sq = haar ? w_->sqsum.get() : nullptr;
    CASCADE_TRY(integrals_async(w_->levels.get(), levels, total_rows, widest.width,
                                w_->resized.get(), g.stride, w_->sum.get(), sq, stream_));
    if (model_->has_tilted_features) {
      Status status = tilted_integrals(frames);
      if (!status.ok()) return status;
    }
    const int32_t *tilted = model_->has_tilted_features ? w_->tilted.get() : w_->sum.get();

    const size_t segments = bounds_.size() - 1;
    CASCADE_TRY(cudaMemsetAsync(w_->counts.get(), 0, (bounds_.size() + frames) * sizeof(uint32_t),
                                stream_));
    CASCADE_TRY(cudaMemsetAsync(w_->reached.get(), 0, sizeof(unsigned long long), stream_));
    CASCADE_TRY(first_segment_async(static_cast<int>(total_tiles_ * frames), view_, stage_stumps_,
                                    w_->levels.get(), levels, g.stride, w_->sum.get(), sq, tilted,
                                    bounds_[1], w_->status.get(), w_->norms.get(), stream_));
    CASCADE_TRY(walk_rows_async(total_grid_rows, w_->levels.get(), levels, w_->status.get(),
                                w_->norms.get(), w_->queue_a.get(), w_->counts.get(),
                                w_->reached.get(), stream_));
    // With one segment, the queue holds windows that passed every stage: running the last stage
    // again gives their score.
    QueueEntry *in = w_->queue_a.get(), *out = w_->queue_b.get();
    const unsigned queue_blocks = static_cast<unsigned>(sm_count_) * 16;
    const size_t runs = std::max<size_t>(segments, 2);
    for (size_t k = 1; k < runs; ++k) {
      const bool last = k + 1 == runs;
      const int first = segments == 1 ? bounds_[1] - 1 : bounds_[k];
      const int end = segments == 1 ? bounds_[1] : bounds_[k + 1];
      const int group = group_size(last);
      const size_t shared =
          view_.exact_stage_sums ? 0 : (kThreads / group) * max_trees_ * sizeof(float);
      const uint32_t *in_count = w_->counts.get() + k - 1;
      if (last) {
        CASCADE_TRY(last_segment_async(group, queue_blocks, shared, view_, tree_stumps_,
                                       w_->levels.get(), g.stride, w_->sum.get(), tilted, first,
                                       end, in, in_count, into_finals ? nullptr : w_->windows.get(),
                                       w_->counts.get() + segments,
                                       into_finals ? finals() : Finals{}, max_trees_, stream_));
      } else {
        CASCADE_TRY(middle_segment_async(group, queue_blocks, shared, view_, tree_stumps_,
                                         w_->levels.get(), g.stride, w_->sum.get(), tilted, first,
                                         end, in, in_count, out, w_->counts.get() + k, max_trees_,
                                         stream_));
      }
      std::swap(in, out);
    }
    if (into_finals) return Status::Ok();  // detect_batch_checked orders them
    CASCADE_TRY(publish_async(w_->counts.get(), static_cast<int>(segments + 1), w_->reached.get(),
                              w_->windows.get(), static_cast<uint32_t>(w_->h_windows.size()),
                              w_->h_counts.device(), w_->h_reached.device(), w_->h_windows.device(),
                              stream_));
    return Status::Ok();
  }

  // Lanes per window. The segments before the last hold tens of thousands of windows in the
  // walk's order (a row's windows together, by column) and are bound by L1 and by issued
  // instructions: two lanes a window put 16 neighbouring windows in a warp, whose reads of one
  // feature share cache lines. The last segment holds the few windows that go deep, each a chain
  // of stages: a warp a window. More lanes where the leaves must wait in shared memory. Measured
  // on an H100 (docs/performance.md, issue 30's passes): with the talk's split, lanes a third of
  // a stage's trees 0.404 / 0.573 / 0.374 ms of GPU time (alt2 / default / LBP at 1080p), these
  // 0.370 / 0.495 / 0.346; the first stage alone and 2 lanes for stages 2-7 then cut a default
  // frame's instructions from 117 M to 87 M.
  int group_size(bool last_segment) const {
    int group = last_segment ? 32 : 2;
    while (group < 32 && !view_.exact_stage_sums &&
           (kThreads / group) * max_trees_ * sizeof(float) > kSharedBytes)
      group *= 2;
    return group;
  }

  // Level by level, every frame of the batch.
  Status tilted_integrals(size_t frames) {
    const Geometry &g = geometry_;
    for (size_t f = 0; f < frames; ++f) {
      for (const Level &l : g.levels) {
        const int64_t origin = static_cast<int64_t>(f * g.plane_size + l.origin);
        CASCADE_TRY(tilted_integral_async(w_->resized.get(), origin, g.stride, l.width, l.height,
                                          w_->tilt_grid.get(), w_->tilted.get(), stream_));
      }
    }
    return Status::Ok();
  }

  DeviceBinding binding_;
  int sm_count_ = 1;
  int max_trees_ = 1;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t start_ = nullptr, stop_ = nullptr, uploaded_ = nullptr;
  cudaEvent_t staged_ = nullptr;        // the last copy out of the pinned staging buffer
  cudaEvent_t slots_copied_ = nullptr;  // the last copy out of the pinned slots
  cudaEvent_t image_read_ = nullptr;    // the resize of the last frame, which reads its pixels
  cudaEvent_t done_ = nullptr;          // the host's wait for a frame's windows
  cudanms::detail::HostWait waits_;
  std::vector<int> bounds_;  // segment k runs stages [bounds_[k], bounds_[k + 1])

  Geometry geometry_;
  int total_rows_ = 0, total_grid_rows_ = 0, total_tiles_ = 0;  // of one frame
  size_t table_frames_ = 0;                                     // the frames the level tables hold
  CascadeView view_{};
  StumpStage stage_stumps_;                 // segment 1's stage as parameters, where it can be
  const HaarStump *tree_stumps_ = nullptr;  // the trees as stumps, where they are

  // The device memory, freed inside the detector's context.
  struct Workspace {
    DeviceArray<StageView> stages;
    DeviceArray<TreeView> trees;
    DeviceArray<NodeView> nodes;
    DeviceArray<float> leaves;
    DeviceArray<int32_t> subsets;
    DeviceArray<HaarOffsets> haar;
    DeviceArray<HaarStump> stumps;
    DeviceArray<LbpOffsets> lbp;
    DeviceArray<DeviceLevel> levels;
    DeviceArray<AxisTap> x_taps, y_taps;
    DeviceArray<uint8_t> image, resized, status;
    DeviceArray<int32_t> sum, sqsum, tilted;
    DeviceArray<uint32_t> tilt_grid, counts;
    DeviceArray<unsigned long long> reached;
    DeviceArray<float> norms;
    DeviceArray<QueueEntry> queue_a, queue_b;
    DeviceArray<OutWindow> windows;
    DeviceArray<Final> finals;  // device candidates: each frame's windows that pass, unordered
    DeviceArray<FrameSlot> slots;
    MappedArray<FrameSlot> h_slots;  // written here, then copied to slots
    MappedArray<uint8_t> h_image;
    MappedArray<uint32_t> h_counts;
    MappedArray<unsigned long long> h_reached;
    MappedArray<OutWindow> h_windows;
  };
  std::unique_ptr<Workspace> w_;
};

}  // namespace

std::unique_ptr<Detector> create_cuda_detector(std::shared_ptr<const Model> model,
                                               const DetectorOptions &options, Status *status) {
  auto detector = std::make_unique<CudaDetector>(std::move(model));
  *status = detector->init(options);
  if (!status->ok()) return nullptr;
  return detector;
}

}  // namespace cudanms::cascade::detail
