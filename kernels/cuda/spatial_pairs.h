// The pair stage of a large frame in spatial order (spatial_pairs.cu): only tiles of boxes that
// can meet are tested against one another, so the work grows with the overlapping pairs, not N².
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Device buffers of a frame ranking at most `most` candidates (spatial_tiles and
// spatial_meetings tell the sizes): the ranks sorted by their boxes' size and place, the boxes
// and classes in that order, the bounds and range of areas of each tile of 32 of them, the tile
// pairs that meet, and CUB's sort scratch.
struct SpatialPairsBuffers {
  uint32_t *keys_in, *keys_out;    // most each
  uint32_t *ranks_in, *ranks_out;  // most each
  float4 *boxes;                   // most
  int32_t *classes;                // most
  float4 *tile_bounds;             // spatial_tiles(most)
  float2 *tile_areas;              // spatial_tiles(most): the least and the largest
  uint32_t *meetings;              // spatial_meetings(most): the tile pairs that meet
  void *sort_temp;
  size_t sort_temp_bytes;
};

// Tiles of 32 ranks in spatial order, at most kMaxSpatialTiles; and the tile pairs (a, b >= a)
// that may meet.
constexpr uint32_t kMaxSpatialTiles = 1u << 16;
constexpr uint32_t spatial_tiles(uint32_t most) { return (most + 31) / 32; }
constexpr size_t spatial_meetings(uint32_t most) {
  return size_t{spatial_tiles(most)} * (spatial_tiles(most) + 1) / 2;
}

// The bytes of CUB's sort scratch for `most` ranks.
cudaError_t spatial_sort_temp_bytes(uint32_t most, size_t *bytes);

// Greedy's predecessor lists or matrix's suppressor counts of one frame (descriptor in device
// memory) whose rank stage has run, as pairs_kernel of cuda_nms.cu writes them, on a device of
// `sms` multiprocessors. The frame's header must hold zero in kMeetings.
cudaError_t launch_spatial_pairs(const FrameArgs *frame, Method method, uint32_t most, int sms,
                                 const SpatialPairsBuffers &buffers, cudaStream_t stream);

}  // namespace cudanms::detail
