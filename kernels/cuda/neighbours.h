// Rule 5 of cudanms/nms.h on the device (neighbours.cu), for the methods that find their kept
// candidates first: greedy's and matrix's neighbours counted per kept candidate (Soft-NMS and
// weighted NMS count theirs as they go), then the kept ones with at least min_neighbors, at most
// `detections` of them, compacted in place in the frame's output.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// Greedy's or matrix's neighbours of each kept slot of one frame (descriptor in device memory)
// whose settle stage wrote its kept ranks: a block per kept slot tests the ranks after it, on a
// device of `sms` multiprocessors.
cudaError_t launch_count_neighbours(const FrameArgs *frame, Method method, int sms,
                                    cudaStream_t stream);

// Keeps the kept slots with enough neighbours, in order, at most `detections`: the indices, the
// kept values where the method wrote them, the neighbours into `kept_neighbours`, the new count.
cudaError_t launch_keep_neighboured(const FrameArgs *frame, cudaStream_t stream);

}  // namespace cudanms::detail
