// Seeded synthetic candidates shaped like real detector output, for the demo, tests and benchmark.
#pragma once

#include <cstdint>

#include "candidate_set.h"

namespace cudanms::tools {

// Like a sliding-window detector's raw windows (Micikevicius, GTC 2015): objects of 24-200 px
// in a width x height frame, tens of jittered windows around each, the score falling with the
// jitter, and a sprinkle of isolated false positives. Classes are drawn from [0, classes).
CandidateSet sliding_window_candidates(size_t count, uint64_t seed, int classes = 1,
                                       int width = 1920, int height = 1080);

// Square integer windows (x, y, side) at a few scales around faces, as a cascade face detector
// emits them: the input of the paper's map/reduce NMS (Oro et al., ICASSP 2016).
CandidateSet face_windows(size_t count, uint64_t seed, int width = 1920, int height = 1080);

}  // namespace cudanms::tools
