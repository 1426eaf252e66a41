// The settle stage (settle.cu): which ranked candidates are kept, from the pair stage's
// predecessor lists (greedy) or suppressor counts (matrix), then the frame's output (output.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "frame_args.h"

namespace cudanms::detail {

// The settle kernel keeps one status byte per ranked candidate in shared memory; frames that
// rank more are run on the CPU.
constexpr size_t kMaxCudaCandidates = 128 * 1024;

// Lets the settle kernel use the shared memory it needs; once per device, before any launch.
cudaError_t prepare_settle();

// Settles `count` frames of `method` (descriptors in device memory) whose pair stage has run,
// ranking at most `most` candidates each, and writes their outputs: a single greedy frame over
// the whole GPU, else a block per frame.
cudaError_t launch_settle(const FrameArgs *frames, uint32_t count, Method method, uint32_t most,
                          cudaStream_t stream);

}  // namespace cudanms::detail
