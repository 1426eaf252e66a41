#include "synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace cudanms::tools {
namespace {

constexpr size_t kWindowsPerObjectMin = 10;
constexpr size_t kWindowsPerObjectMax = 60;
constexpr double kFalsePositiveShare = 0.05;

}  // namespace

CandidateSet sliding_window_candidates(size_t count, uint64_t seed, int classes, int width,
                                       int height) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> class_of(0, std::max(classes, 1) - 1);
  std::uniform_int_distribution<size_t> windows_of(kWindowsPerObjectMin, kWindowsPerObjectMax);
  std::normal_distribution<float> jitter(0.0f, 1.0f);
  CandidateSet set;
  set.boxes.reserve(4 * count);
  set.scores.reserve(count);
  set.classes.reserve(count);
  while (set.size() < count) {
    if (unit(rng) < kFalsePositiveShare) {
      const float side = 24.0f + 176.0f * unit(rng);
      const float x = (width - side) * unit(rng);
      const float y = (height - side) * unit(rng);
      set.add(x, y, x + side, y + side, 0.3f * unit(rng), class_of(rng));
      continue;
    }
    const float side = 24.0f + 176.0f * unit(rng);
    const float aspect = 0.5f + unit(rng);  // height over width
    const float w = side;
    const float h = std::min(side * aspect, static_cast<float>(height));
    const float cx = w / 2 + (width - w) * unit(rng);
    const float cy = h / 2 + (height - h) * unit(rng);
    const float peak = 0.5f + 0.5f * unit(rng);
    const int class_id = class_of(rng);
    for (size_t k = windows_of(rng); k > 0 && set.size() < count; --k) {
      const float dx = 0.15f * w * jitter(rng);
      const float dy = 0.15f * h * jitter(rng);
      const float ds = std::exp(0.1f * jitter(rng));
      const float ww = w * ds;
      const float hh = h * ds;
      const float x1 = cx + dx - ww / 2;
      const float y1 = cy + dy - hh / 2;
      const float drift = std::sqrt((dx * dx) / (w * w) + (dy * dy) / (h * h)) + std::abs(ds - 1);
      const float score = peak * std::exp(-4.0f * drift) * (0.9f + 0.1f * unit(rng));
      set.add(x1, y1, x1 + ww, y1 + hh, score, class_id);
    }
  }
  return set;
}

CandidateSet face_windows(size_t count, uint64_t seed, int width, int height) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> step(-6, 6);
  CandidateSet set;
  while (set.size() < count) {
    const int side = 24 + static_cast<int>(unit(rng) * 120);
    const int x = static_cast<int>(unit(rng) * (width - 2 * side));
    const int y = static_cast<int>(unit(rng) * (height - 2 * side));
    const float peak = 0.5f + 0.5f * unit(rng);
    for (int k = 0; k < 30 && set.size() < count; ++k) {
      const int scale = side + 4 * step(rng);
      const int wx = x + step(rng);
      const int wy = y + step(rng);
      const float drift = std::abs(static_cast<float>(wx - x)) +
                          std::abs(static_cast<float>(wy - y)) +
                          std::abs(static_cast<float>(scale - side)) / 4.0f;
      const float score = std::round(1000.0f * peak * std::exp(-0.1f * drift)) / 1000.0f;
      set.add(wx, wy, wx + scale, wy + scale, score);
    }
  }
  return set;
}

bool dense_candidates(const std::string &kind, size_t count, uint64_t seed, CandidateSet *out) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  CandidateSet set;
  if (kind == "identical") {
    for (size_t i = 0; i < count; ++i) set.add(10, 10, 60, 60, unit(rng));
  } else if (kind == "groups") {
    constexpr size_t kGroup = 500;
    for (size_t i = 0; i < count; ++i) {
      const float g = static_cast<float>(i / kGroup);
      const float x = 30.0f * std::fmod(g, 60.0f), y = 30.0f * std::floor(g / 60.0f);
      set.add(x, y, x + 50, y + 50, unit(rng));
    }
  } else if (kind == "huge") {
    for (size_t i = 0; i < count; ++i) {
      const float x = 1e7f + 2e6f * unit(rng) * 0.5f, y = 1e7f + 2e6f * unit(rng) * 0.5f;
      set.add(x, y, x + 2e6f * unit(rng) * 0.5f, y + 2e6f * unit(rng) * 0.5f, unit(rng));
    }
  } else if (kind == "cluster") {
    for (size_t i = 0; i < count; ++i) {
      const float dx = 20.0f * (unit(rng) - 0.5f), dy = 20.0f * (unit(rng) - 0.5f);
      const float grow = 20.0f * (unit(rng) - 0.5f);
      set.add(500 + dx, 300 + dy, 700 + dx + grow, 500 + dy + grow, unit(rng));
    }
  } else {
    return false;
  }
  *out = std::move(set);
  return true;
}

}  // namespace cudanms::tools
