// The CUDA backend's memory (workspace.h).
#include <algorithm>
#include <utility>

#include "pairs.h"
#include "workspace.h"

namespace cudanms::detail {

uint32_t most_ranked(uint32_t capacity, const Params &params) {
  return static_cast<uint32_t>(std::min<size_t>(capacity, params.max_candidates));
}

uint32_t kept_limit(const Params &params, uint32_t most) {
  return params.max_detections == 0 || params.max_detections > most
             ? most
             : static_cast<uint32_t>(params.max_detections);
}

FrameArgs Workspace::frame_args(size_t b, uint32_t C, uint32_t M, const Params &params,
                                uint32_t capacity) const {
  FrameArgs f{};
  f.keys = d_keys.get() + b * C;
  f.order = d_order.get() + b * C;
  f.rank_boxes = d_rank_boxes.get() + b * M;
  f.rank_scores = d_rank_scores.get() + b * M;
  f.rank_classes = d_rank_classes.get() + b * M;
  f.counts = d_counts.get() + b * M;
  f.statuses = d_statuses.get() + b * M;
  f.kept_words = d_kept_words.get() + b * words_of(M);
  f.predecessors = d_predecessors.get() + b * M * kMaxPredecessors;
  f.capacity = capacity;
  f.dmax = static_cast<uint32_t>(std::min<size_t>(params.max_candidates, UINT32_MAX));
  f.limit = kept_limit(params, most_ranked(capacity, params));
  f.score_threshold = params.score_threshold;
  f.threshold = params.threshold;
  f.overlap = params.overlap;
  f.soft_decay = params.soft_decay;
  f.sigma = params.sigma;
  f.class_agnostic = params.class_agnostic;
  f.min_neighbors = params.min_neighbors;
  f.detections = f.limit;
  f.group_eps = params.group_eps;
  if (params.method == Method::kWeighted) {
    f.kept_ranks = d_kept_ranks.get() + b * M;
    f.clusters = d_clusters.get() + b * M;
  }
  if (changes_values(params.method)) {
    f.kept_boxes = h_kept_boxes.device();
    f.kept_scores = h_kept_scores.device();
    f.kept_classes = h_kept_classes.device();
  }
  if (counts_neighbours(params.method, params.min_neighbors)) {
    f.limit = most_ranked(capacity, params);  // the method keeps all it finds
    f.kept_ranks = d_kept_ranks.get() + b * M;
    f.neighbours = d_neighbours.get() + b * M;
    f.slot_moves = d_slot_moves.get() + b * M;
  }
  if (counts_neighbours(params.method, params.min_neighbors) || params.method == Method::kGroup) {
    f.kept_neighbours = h_kept_neighbours.device();
  }
  return f;
}

SpatialPairsBuffers Workspace::spatial_buffers() const {
  SpatialPairsBuffers b{};
  b.bins = d_spatial_bins.get();
  b.places = b.bins + spatial_capacity_;
  b.bin_counts = d_bin_counts.get();
  b.bin_starts = b.bin_counts + kMaxSpatialBins;
  b.ranks_out = d_spatial_ranks.get();
  b.boxes = d_spatial_boxes.get();
  b.classes = d_spatial_classes.get();
  b.tile_bounds = d_tile_bounds.get();
  b.tile_areas = d_tile_areas.get();
  b.meetings = d_meetings.get();
  return b;
}

GroupBuffers Workspace::group_buffers() const {
  GroupBuffers g{};
  const size_t M = group_capacity_;
  g.rects = d_group_rects.get();
  g.means = g.rects + M;
  uint32_t *words = d_group_words.get();
  g.parents = words;
  g.members = words + M;
  g.kept = words + 2 * M;
  g.keys = words + 3 * M;
  g.sorted_keys = words + 4 * M;
  g.ranks = words + 5 * M;
  g.sorted_ranks = words + 6 * M;
  g.survivors = words + 7 * M;  // M + 1
  g.sums = d_group_sums.get();
  g.temp = d_group_temp.get();
  g.temp_bytes = group_temp_bytes_;
  return g;
}

Status Workspace::reserve_group(size_t M, cudaStream_t stream) {
  if (M <= group_capacity_) return Status::Ok();
  group_capacity_ = 0;
  ++moves_;
  Status status = d_group_rects.reserve(2 * M);
  if (status.ok()) status = d_group_words.reserve(8 * M + 1);
  if (status.ok()) status = d_group_sums.reserve(4 * M);
  if (!status.ok()) return status;
  group_temp_bytes_ = 0;
  if (M > kGroupAllPairsMax) {
    CUDANMS_CUDA_TRY(group_sort_temp_bytes(static_cast<uint32_t>(M), &group_temp_bytes_, stream));
    status = d_group_temp.reserve(group_temp_bytes_);
    if (!status.ok()) return status;
  }
  group_capacity_ = M;
  return Status::Ok();
}

RankSortBuffers Workspace::sort_buffers() const {
  return {d_keys.get(),  d_sorted_keys.get(), d_iota.get(),
          d_order.get(), d_sort_temp.get(),   sort_temp_bytes_};
}

Status Workspace::reserve(size_t frames, size_t C, size_t M, size_t staged, cudaStream_t stream) {
  Status status = Status::Ok();
  auto step = [&status](Status s) {
    if (status.ok()) status = std::move(s);
  };
  if (staged > staged_capacity_) {
    staged_capacity_ = 0;
    ++moves_;
    step(h_stage.reserve(staged));
    step(d_stage.reserve(staged));
    if (!status.ok()) return status;
    staged_capacity_ = staged;
  }
  if (frames * C > input_capacity_) {
    input_capacity_ = 0;
    ++moves_;
    step(d_keys.reserve(frames * C));
    step(d_order.reserve(frames * C));
    if (!status.ok()) return status;
    input_capacity_ = frames * C;
  }
  if (M > kept_capacity_) {
    kept_capacity_ = 0;
    ++moves_;
    step(h_kept_boxes.reserve(M));
    step(h_kept_scores.reserve(M));
    step(h_kept_classes.reserve(M));
    step(h_kept_neighbours.reserve(M));
    if (!status.ok()) return status;
    kept_capacity_ = M;
  }
  const size_t ranked = frames * M;
  const size_t outputs = frames * (kHeaderWords + M);
  if (ranked > ranked_capacity_ || outputs > output_capacity_) {
    ranked_capacity_ = output_capacity_ = 0;
    ++moves_;
    step(h_out.reserve(outputs));
    step(d_out.reserve(outputs));
    step(d_rank_scores.reserve(ranked));
    step(d_rank_boxes.reserve(ranked));
    step(d_rank_classes.reserve(ranked));
    step(d_counts.reserve(ranked));
    step(d_statuses.reserve(ranked));
    step(d_kept_words.reserve(ranked));  // at least words_of(M) per frame
    step(d_predecessors.reserve(ranked * kMaxPredecessors));
    step(d_kept_ranks.reserve(ranked));
    step(d_clusters.reserve(ranked));
    step(d_neighbours.reserve(ranked));
    step(d_slot_moves.reserve(ranked));
    if (!status.ok()) return status;
    // Zeroed once, so that no byte is ever read uninitialised (compute-sanitizer initcheck):
    // the settle kernel reads predecessor rows eight slots at a time, past a row's count too,
    // and the copy back takes `limit` kept slots of which the frame may fill fewer.
    CUDANMS_CUDA_TRY(cudaMemsetAsync(d_predecessors.get(), 0,
                                     ranked * kMaxPredecessors * sizeof(uint32_t), stream));
    CUDANMS_CUDA_TRY(cudaMemsetAsync(d_out.get(), 0, outputs * sizeof(uint32_t), stream));
    CUDANMS_CUDA_TRY(cudaStreamSynchronize(stream));
    ranked_capacity_ = ranked;
    output_capacity_ = outputs;
  }
  if (in_spatial_order(1, M) && M > spatial_capacity_) {
    spatial_capacity_ = 0;
    ++moves_;
    const auto most = static_cast<uint32_t>(M);
    step(d_spatial_bins.reserve(2 * M));
    step(d_bin_counts.reserve(2 * kMaxSpatialBins));
    step(d_spatial_ranks.reserve(M));
    step(d_spatial_boxes.reserve(M));
    step(d_spatial_classes.reserve(M));
    step(d_tile_bounds.reserve(spatial_tiles(most)));
    step(d_tile_areas.reserve(spatial_tiles(most)));
    step(d_meetings.reserve(spatial_meetings(most)));
    if (!status.ok()) return status;
    spatial_capacity_ = M;
  }
  return Status::Ok();
}

Status Workspace::reserve_sort(size_t n, cudaStream_t stream) {
  if (n <= sort_capacity_) return Status::Ok();
  sort_capacity_ = 0;
  ++moves_;
  Status status = d_sorted_keys.reserve(n);
  if (status.ok()) status = d_iota.reserve(n);
  if (!status.ok()) return status;
  CUDANMS_CUDA_TRY(sort_temp_bytes(static_cast<uint32_t>(n), &sort_temp_bytes_, stream));
  status = d_sort_temp.reserve(sort_temp_bytes_);
  if (!status.ok()) return status;
  CUDANMS_CUDA_TRY(iota_into(d_iota.get(), static_cast<uint32_t>(n), stream));
  sort_capacity_ = n;
  return Status::Ok();
}

}  // namespace cudanms::detail
