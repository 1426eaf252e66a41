// Method::kGroup on the device (group.cu): OpenCV's rectangle grouping over a frame's ranked
// candidates after the rank stage. Similar pairs are found among all pairs up to
// kGroupAllPairsMax ranks, past it by a sweep over x (CUB's sort), so that a crowded frame costs
// its near pairs, not N²; a union-find whose roots are the best-ranked members makes the
// classes; atomics sum them; then the classes held by others are dropped and the rest written out
// in rank order with their values (common/group.h: the same arithmetic as the CPU's).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Up to this many ranks the pair kernel tests every pair (a few microseconds on an H100): cheaper
// than sorting.
constexpr uint32_t kGroupAllPairsMax = 8192;

// Device arrays of one frame ranking at most `most`: per rank its rectangle, its parent in the
// union-find, its class's members, sums and mean (where it is a class's root) and whether it is
// kept; the sweep's keys and ranks, sorted, and CUB's temporary storage (past
// kGroupAllPairsMax only); the survivors' list and count.
struct GroupBuffers {
  int4 *rects, *means;
  uint32_t *parents, *members, *kept;
  unsigned long long *sums;  // 4 per rank
  uint32_t *keys, *sorted_keys, *ranks, *sorted_ranks;
  void *temp;
  size_t temp_bytes;
  uint32_t *survivors;  // most, then the count
};

cudaError_t group_sort_temp_bytes(uint32_t most, size_t *bytes, cudaStream_t stream);

// Groups one frame (descriptor in device memory) whose rank stage has run, ranking at most
// `most`, and writes its output: the kept indices in rank order, at most `limit`, and their
// values into the frame's kept arrays. `grouping`: the frame's min_neighbors is above 0 (else
// every candidate is a class of its own); the kernels read its value from the descriptor, so
// that a captured graph serves every value.
cudaError_t launch_group(const FrameArgs *frame, uint32_t most, bool grouping,
                         const GroupBuffers &buffers, cudaStream_t stream);

}  // namespace cudanms::detail
