// The CUDA backend's memory (workspace.cu): device arrays for every stage and mapped host arrays
// for the results, grown on demand and kept between frames. Frame b of a batch of frames staged
// with capacity C and ranking at most M candidates has slots [bC, bC + C) of the keys and the
// order, [bM, bM + M) of the rank arrays and the counts, and M predecessor rows from row bM.
// Every array must be freed inside its CUDA context's scope.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_device.h"
#include "frame_args.h"
#include "group.h"
#include "rank.h"
#include "spatial_pairs.h"

namespace cudanms::detail {

// The most candidates a frame staged with `capacity` ranks, and the most it keeps.
uint32_t most_ranked(uint32_t capacity, const Params &params);
uint32_t kept_limit(const Params &params, uint32_t most);

struct Workspace {
  // Sizes the arrays for `frames` frames staged with capacity C, ranking at most M, and `staged`
  // bytes of staged input (on `stream`, which it synchronises when it zeroes new arrays); a no-op
  // when they are large enough already.
  Status reserve(size_t frames, size_t C, size_t M, size_t staged, cudaStream_t stream);
  // CUB's sort of one frame of n candidates: its buffers, sized on first use.
  Status reserve_sort(size_t n, cudaStream_t stream);
  // The grouping of one frame ranking at most M: its buffers, sized on first use.
  Status reserve_group(size_t M, cudaStream_t stream);
  // Counts the times any array moved: a CUDA graph holds the addresses it was captured with.
  uint64_t moves() const { return moves_; }

  // Frame b's descriptor, but for its candidates, count, counters and output: its parameters
  // and its slices of the arrays, in a batch staged with capacity C ranking at most M.
  FrameArgs frame_args(size_t b, uint32_t C, uint32_t M, const Params &params,
                       uint32_t capacity) const;
  SpatialPairsBuffers spatial_buffers() const;
  RankSortBuffers sort_buffers() const;  // for the frame in slot 0
  GroupBuffers group_buffers() const;

  MappedArray<unsigned char> h_stage;  // descriptors, then the frames, as the host stages them
  MappedArray<uint32_t> h_out;         // per frame: counters, then kept indices
  MappedArray<float4> h_kept_boxes;    // soft, weighted and device candidates: the kept values
  MappedArray<float> h_kept_scores;
  MappedArray<int32_t> h_kept_classes;
  MappedArray<uint32_t> h_kept_neighbours;  // rule 5's counts, and kGroup's
  DeviceArray<uint32_t> d_slot_moves;       // weighted frames with neighbours and points
  DeviceArray<unsigned char> d_stage;
  DeviceArray<uint32_t> d_out;  // device candidates: the output, read by their kept values

 private:
  DeviceArray<float> d_keys;
  DeviceArray<uint32_t> d_order;
  DeviceArray<float> d_rank_scores;
  DeviceArray<float4> d_rank_boxes;
  DeviceArray<int32_t> d_rank_classes;
  DeviceArray<uint32_t> d_counts;
  DeviceArray<uint32_t> d_statuses;
  DeviceArray<uint32_t> d_kept_words;
  DeviceArray<uint32_t> d_predecessors;
  DeviceArray<uint32_t> d_kept_ranks;  // weighted: per rank
  DeviceArray<uint32_t> d_clusters;    // weighted: per rank
  DeviceArray<uint32_t> d_neighbours;  // rule 5: per kept slot
  DeviceArray<float> d_sorted_keys;    // a frame past kCountingRankMax: CUB's sort
  DeviceArray<uint32_t> d_iota;
  DeviceArray<unsigned char> d_sort_temp;
  // A single frame's pairs in spatial order (spatial_pairs.h).
  DeviceArray<uint32_t> d_spatial_bins;  // per rank: its bin, then its place there
  DeviceArray<uint32_t> d_bin_counts;    // counts, then starts
  DeviceArray<uint32_t> d_spatial_ranks;
  DeviceArray<float4> d_spatial_boxes;
  DeviceArray<int32_t> d_spatial_classes;
  DeviceArray<float4> d_tile_bounds;
  DeviceArray<float2> d_tile_areas;
  DeviceArray<uint32_t> d_meetings;
  // A single frame's grouping (group.h).
  DeviceArray<int4> d_group_rects;  // rects, then means
  DeviceArray<uint32_t>
      d_group_words;  // parents, members, kept, keys, sorted keys, ranks, sorted ranks, survivors
  DeviceArray<unsigned long long> d_group_sums;
  DeviceArray<unsigned char> d_group_temp;

  size_t staged_capacity_ = 0;  // bytes of staged input
  size_t input_capacity_ = 0;   // key and order slots, over all frames of a batch
  size_t ranked_capacity_ = 0;  // rank slots, over all frames of a batch
  size_t output_capacity_ = 0;  // output words, over all frames of a batch
  size_t kept_capacity_ = 0;    // kept values
  size_t sort_capacity_ = 0;
  size_t sort_temp_bytes_ = 0;
  size_t spatial_capacity_ = 0;  // ranks of a single frame's spatial pair stage
  size_t group_capacity_ = 0;    // ranks of a single frame's grouping
  size_t group_temp_bytes_ = 0;
  uint64_t moves_ = 0;
};

}  // namespace cudanms::detail
