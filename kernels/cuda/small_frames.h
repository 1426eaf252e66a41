// Frames of up to kSmallFrameMax candidates, all of NMS in one kernel launch (small_frames.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

constexpr uint32_t kSmallFrameMax = 1024;

// Lets the kernels use the shared memory they need; once per device, before any launch.
cudaError_t prepare_small_frames();

// The blocks that share each of `frames` frames staged with `capacity` and ranking at most
// `most` candidates, on a device of `sms` multiprocessors.
uint32_t small_frame_blocks(uint32_t capacity, uint32_t most, uint32_t frames, int sms);

// Launches NMS for `count` frames of `method` (descriptors in device memory) staged with at most
// `capacity` <= kSmallFrameMax candidates each, `blocks` from small_frame_blocks (Soft-NMS runs a
// block a frame: its selections are the block's). Every frame's header must hold zero in
// kArrived.
cudaError_t launch_small_frames(const FrameArgs *frames, uint32_t count, Method method,
                                uint32_t capacity, uint32_t blocks, cudaStream_t stream);

}  // namespace cudanms::detail
