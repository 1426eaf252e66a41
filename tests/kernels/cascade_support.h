// Shared by the cascade tests: the real frames (tools/cascade_frames.h), the cascades
// (opencv-data), and a comparison of two window lists rectangle for rectangle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cascade_frames.h"
#include "cudanms/cascade.h"
#include "support/test_scale.h"

namespace cudanms::testing {

using tools::cascade_frames;
using tools::env_or;
using tools::GrayFrame;
using tools::video_gray_frames;

// The real frames the CPU cascade's comparisons with OpenCV read: every one, or at the small scale
// (tools/sanitize.sh, where the instrumented CPU cascade takes minutes a frame set) all but the
// two 1080p ones, which take the same code paths with 2.3 times the pixels of the other five.
inline std::vector<GrayFrame> cpu_cascade_frames(std::string *why) {
  std::vector<GrayFrame> frames = cascade_frames(why);
  if (small_test_scale())
    frames.erase(std::remove_if(frames.begin(), frames.end(),
                                [](const GrayFrame &f) { return f.gray.rows >= 1080; }),
                 frames.end());
  return frames;
}

inline std::string cascade_path(const std::string &name) {
  const std::string root = env_or("CUDANMS_OPENCV_DATA", "/usr/share/opencv4");
  const bool lbp = name.rfind("lbp", 0) == 0;
  return root + (lbp ? "/lbpcascades/" : "/haarcascades/") + name + ".xml";
}

inline bool file_exists(const std::string &path) { return std::ifstream(path).good(); }

inline cudanms::cascade::GrayView view_of(const cv::Mat &gray) {
  return {gray.data, gray.cols, gray.rows, gray.step[0]};
}

// How one window list compares with a reference, rectangle for rectangle.
struct Agreement {
  size_t reference = 0;        // windows in the reference
  size_t identical = 0;        // reference windows found with the identical rectangle
  size_t extra = 0;            // windows not in the reference
  double max_score_error = 0;  // relative, over the identical ones
};

using RectKey = std::tuple<int, int, int, int>;

inline Agreement compare_windows(const std::vector<cv::Rect> &ref_rects,
                                 const std::vector<double> &ref_scores,
                                 const std::vector<cudanms::cascade::Window> &ours) {
  std::multimap<RectKey, double> pending;
  for (size_t i = 0; i < ref_rects.size(); ++i) {
    const cv::Rect &r = ref_rects[i];
    pending.emplace(RectKey{r.x, r.y, r.width, r.height}, ref_scores[i]);
  }
  Agreement a;
  a.reference = ref_rects.size();
  for (const auto &w : ours) {
    auto [first, last] = pending.equal_range(RectKey{w.x, w.y, w.width, w.height});
    if (first == last) {
      ++a.extra;
      continue;
    }
    auto best = first;
    for (auto it = first; it != last; ++it) {
      if (std::abs(it->second - w.score) < std::abs(best->second - w.score)) best = it;
    }
    const double scale = std::max(std::abs(best->second), 1e-12);
    a.max_score_error = std::max(a.max_score_error, std::abs(best->second - w.score) / scale);
    ++a.identical;
    pending.erase(best);
  }
  return a;
}

inline Agreement compare_windows(const std::vector<cudanms::cascade::Window> &reference,
                                 const std::vector<cudanms::cascade::Window> &ours) {
  std::vector<cv::Rect> rects;
  std::vector<double> scores;
  for (const auto &w : reference) {
    rects.emplace_back(w.x, w.y, w.width, w.height);
    scores.push_back(w.score);
  }
  return compare_windows(rects, scores, ours);
}

// The cases every cascade test runs: cascade x frame x scale factor x size limits.
struct CascadeCase {
  std::string cascade;
  double scale_factor;
  cv::Size min_size, max_size;
};

inline const std::vector<CascadeCase> &cascade_cases() {
  static const std::vector<CascadeCase> cases = {
      {"haarcascade_frontalface_alt2", 1.1, {0, 0}, {0, 0}},
      {"haarcascade_frontalface_alt2", 1.25, {50, 50}, {200, 200}},
      {"haarcascade_frontalface_default", 1.2, {30, 30}, {0, 0}},
      {"haarcascade_fullbody", 1.1, {0, 0}, {300, 600}},
      {"lbpcascade_frontalface_improved", 1.1, {0, 0}, {0, 0}},
      {"lbpcascade_frontalface_improved", 1.25, {50, 50}, {200, 200}},
  };
  return cases;
}

inline std::string case_name(const CascadeCase &c) {
  char text[160];
  std::snprintf(text, sizeof text, "%s sf=%.2f min=%dx%d max=%dx%d", c.cascade.c_str(),
                c.scale_factor, c.min_size.width, c.min_size.height, c.max_size.width,
                c.max_size.height);
  return text;
}

inline cudanms::cascade::DetectParams params_of(const CascadeCase &c) {
  cudanms::cascade::DetectParams p;
  p.scale_factor = c.scale_factor;
  p.min_width = c.min_size.width;
  p.min_height = c.min_size.height;
  p.max_width = c.max_size.width;
  p.max_height = c.max_size.height;
  return p;
}

// The leaves of the last stage of alt2 changed so that tree order matters: tree 0's to 1, tree
// 1's to 2^-53, which 1 + 2^-53 rounds away (ties to even) but a smaller partial sum keeps.
inline std::shared_ptr<const cudanms::cascade::Model> order_sensitive_model(
    const cudanms::cascade::Model &alt2) {
  auto model = std::make_shared<cudanms::cascade::Model>(alt2);
  const cudanms::cascade::Model::Stage &last = model->stages.back();
  for (int t = 0; t < 2; ++t) {
    const size_t first = model->trees[last.first_tree + t].first_leaf;
    const size_t end = model->trees[last.first_tree + t + 1].first_leaf;
    for (size_t k = first; k < end; ++k) model->leaves[k] = t == 0 ? 1.0f : std::ldexp(1.0f, -53);
  }
  return model;
}

}  // namespace cudanms::testing
