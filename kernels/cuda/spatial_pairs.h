// The pair stage of a large frame in spatial order (spatial_pairs.cu): only tiles of boxes that
// can meet are tested against one another, so the work grows with the overlapping pairs, not N².
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Device buffers of a frame ranking at most `most` candidates (spatial_tiles and
// spatial_meetings tell the sizes): per rank its bin and place there, the bins' counts and
// starts, the ranks in spatial order, the boxes and classes in that order, the bounds and range
// of areas of each tile of 32 of them, and the tile pairs that meet.
struct SpatialPairsBuffers {
  uint32_t *bins, *places;  // most each
  uint32_t *bin_counts;     // kMaxSpatialBins each
  uint32_t *bin_starts;
  uint32_t *ranks_out;  // most: the rank in each slot of the spatial order
  float4 *boxes;        // most
  int32_t *classes;     // most
  float4 *tile_bounds;  // spatial_tiles(most)
  float2 *tile_areas;   // spatial_tiles(most): the least and the largest
  uint32_t *meetings;   // spatial_meetings(most): the tile pairs that meet
};

// Tiles of 32 ranks in spatial order, at most kMaxSpatialTiles; and the tile pairs (a, b >= a)
// that may meet.
constexpr uint32_t kMaxSpatialTiles = 1u << 16;
__host__ __device__ constexpr uint32_t spatial_tiles(uint32_t most) { return (most + 31) / 32; }
constexpr size_t spatial_meetings(uint32_t most) {
  return size_t{spatial_tiles(most)} * (spatial_tiles(most) + 1) / 2;
}

// The bins: 16 size classes, each a grid of 2^(2 * bits) cells over the centres' extent (its
// bits shared by the axes as the extent's aspect asks), bits from spatial_grid_bits(most), 1 to
// kMaxSpatialGridBits.
constexpr uint32_t kMaxSpatialGridBits = 5;
constexpr uint32_t kMaxSpatialBins = 16u << (2 * kMaxSpatialGridBits);
uint32_t spatial_grid_bits(uint32_t most);

// Greedy's predecessor lists or matrix's suppressor counts of one frame (descriptor in device
// memory) whose rank stage has run, as pairs.cu writes them in rank order, on a device of
// `sms` multiprocessors. The frame's header must hold zero in kMeetings, and the extent of its
// eligible centres (the classify kernel's).
cudaError_t launch_spatial_pairs(const FrameArgs *frame, Method method, uint32_t most, int sms,
                                 const SpatialPairsBuffers &buffers, cudaStream_t stream);

}  // namespace cudanms::detail
