// One seed per test run: from CUDANMS_SEED when set (to replay a failure), else fresh, and
// printed once so that any failure can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>

namespace cudanms::testing {

inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    const char *given = std::getenv("CUDANMS_SEED");
    const uint64_t s = given ? std::strtoull(given, nullptr, 10)
                             : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    std::cout << "[ seed     ] CUDANMS_SEED=" << s << " (set it to replay this run)" << std::endl;
    return s;
  }();
  return seed;
}

}  // namespace cudanms::testing
