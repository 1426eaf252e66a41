// Seeded synthetic candidates shaped like real detector output, for the demo, tests and benchmark.
#pragma once

#include <cstdint>
#include <string>

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

// Inputs that pile many near-identical boxes on one place, as dense anchor detectors do (and
// that took the GPU path past its predecessor lists): `kind` is one of
//   "identical": count copies of (10, 10, 60, 60), distinct random scores
//   "groups":    count / 500 groups of 500 identical boxes each, random scores
//   "huge":      count random boxes with corners between 1e7 and 1.2e7, sides up to 2e6
//   "cluster":   count boxes jittered by up to 10 % around one 200x200 object
// Returns false for another kind.
bool dense_candidates(const std::string &kind, size_t count, uint64_t seed, CandidateSet *out);

}  // namespace cudanms::tools
