// Shared by the cascade tests: the real frames (Debian's opencv-doc samples), the cascades
// (opencv-data), and a comparison of two window lists rectangle for rectangle.
//
// Where OpenCV's videoio and imgcodecs are present the frames are decoded here; elsewhere (the
// GPU host's package recipe has neither) they are read as PGM files from
// $CUDANMS_CASCADE_FRAMES, written by tools/gpu-host/make-cascade-frames.py.
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

#include "cudanms/cascade.h"
#include "pgm.h"

#if __has_include(<opencv2/videoio.hpp>) && __has_include(<opencv2/imgcodecs.hpp>)
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#define CUDANMS_DECODES_FRAMES 1
#endif

namespace cudanms::testing {

inline std::string env_or(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

inline std::string cascade_path(const std::string &name) {
  const std::string root = env_or("CUDANMS_OPENCV_DATA", "/usr/share/opencv4");
  const bool lbp = name.rfind("lbp", 0) == 0;
  return root + (lbp ? "/lbpcascades/" : "/haarcascades/") + name + ".xml";
}

inline bool file_exists(const std::string &path) { return std::ifstream(path).good(); }

struct GrayFrame {
  std::string name;
  cv::Mat gray;
};

// The frame names, in the order cascade_frames() returns them.
inline const std::vector<std::string> &cascade_frame_names() {
  static const std::vector<std::string> names = {
      "megamind_030", "megamind_060",        "megamind_120", "vtest_000",
      "messi5",       "megamind_tile_1080p", "vtest_1080p"};
  return names;
}

#ifdef CUDANMS_DECODES_FRAMES
inline std::vector<cv::Mat> video_frames(const std::string &path, const std::vector<int> &wanted) {
  cv::VideoCapture capture(path);
  std::vector<cv::Mat> out;
  cv::Mat frame;
  for (int index = 0; capture.read(frame) && out.size() < wanted.size(); ++index) {
    if (index == wanted[out.size()]) out.push_back(frame.clone());
  }
  return out;
}

inline cv::Mat to_gray(const cv::Mat &bgr) {
  cv::Mat gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  return gray;
}

// Six Megamind frames of 640x540 tiled 3x2: a 1920x1080 frame with real faces (the talk's
// setting).
inline cv::Mat megamind_tile(const std::string &path) {
  const std::vector<cv::Mat> six = video_frames(path, {0, 40, 80, 120, 160, 200});
  if (six.size() != 6) return {};
  cv::Mat tile(1080, 1920, CV_8UC3);
  for (int i = 0; i < 6; ++i) {
    cv::resize(six[i], tile(cv::Rect((i % 3) * 640, (i / 3) * 540, 640, 540)), cv::Size(640, 540),
               0, 0, cv::INTER_AREA);
  }
  return tile;
}

inline std::vector<GrayFrame> decode_frames() {
  const std::string samples =
      env_or("CUDANMS_OPENCV_SAMPLES", "/usr/share/doc/opencv-doc/examples/data");
  std::vector<GrayFrame> frames;
  const std::vector<cv::Mat> mega = video_frames(samples + "/Megamind.avi", {30, 60, 120});
  const std::vector<cv::Mat> vtest = video_frames(samples + "/vtest.avi", {0});
  const cv::Mat messi = cv::imread(samples + "/messi5.jpg");
  const cv::Mat tile = megamind_tile(samples + "/Megamind.avi");
  if (mega.size() != 3 || vtest.size() != 1 || messi.empty() || tile.empty()) return {};
  cv::Mat vtest_big;
  cv::resize(vtest[0], vtest_big, cv::Size(1920, 1080), 0, 0, cv::INTER_LINEAR);
  const std::vector<cv::Mat> bgr = {mega[0], mega[1], mega[2], vtest[0], messi, tile, vtest_big};
  for (size_t i = 0; i < bgr.size(); ++i)
    frames.push_back({cascade_frame_names()[i], to_gray(bgr[i])});
  return frames;
}
#endif

// The real frames, or empty with *why saying what is missing.
inline std::vector<GrayFrame> cascade_frames(std::string *why) {
  static const std::vector<GrayFrame> frames = [] {
#ifdef CUDANMS_DECODES_FRAMES
    return decode_frames();
#else
    std::vector<GrayFrame> out;
    const std::string dir = env_or("CUDANMS_CASCADE_FRAMES", "");
    for (const std::string &name : cascade_frame_names()) {
      cv::Mat gray = dir.empty() ? cv::Mat() : tools::read_pgm(dir + "/" + name + ".pgm");
      if (gray.empty()) return std::vector<GrayFrame>{};
      out.push_back({name, gray});
    }
    return out;
#endif
  }();
  if (frames.empty()) {
#ifdef CUDANMS_DECODES_FRAMES
    *why = "the opencv-doc samples (Megamind.avi, vtest.avi, messi5.jpg) are missing";
#else
    *why = "no frames: set CUDANMS_CASCADE_FRAMES to the PGMs of make-cascade-frames.py";
#endif
  }
  return frames;
}

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

}  // namespace cudanms::testing
