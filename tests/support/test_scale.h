// The slowest tests at a scale that a sanitizer finishes in minutes: CUDANMS_TEST_SCALE=small
// (tools/run-cuda-sanitizers.sh sets it for racecheck, under which the kernels run ~100x slower;
// tools/sanitize.sh for ASan + UBSan, under which the CPU cascade is several times slower) keeps
// every kernel and branch those tests reach, with fewer and smaller cases. Every other run is at
// full scale.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace cudanms::testing {

inline bool small_test_scale() {
  const char *scale = std::getenv("CUDANMS_TEST_SCALE");
  return scale != nullptr && std::strcmp(scale, "small") == 0;
}

// Random cases visited: every one, or at the small scale every 97th (prime to the periods of the
// random cases' loops, so the visited ones still span the generators, methods and rules; every
// 7th did not finish test_cuda_nms's 960 in 330 s of racecheck on an H100).
inline size_t random_case_stride() { return small_test_scale() ? 97 : 1; }

}  // namespace cudanms::testing
