// The real frames the cascade tests and benchmark run on, made from Debian's opencv-doc samples
// (Megamind.avi, vtest.avi, messi5.jpg): decoded here where OpenCV's videoio and imgcodecs are
// present; elsewhere (the GPU host's package recipe has neither) read as binary PGMs from
// $CUDANMS_CASCADE_FRAMES, written by tools/gpu-host/make-cascade-frames.py the same way.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#if __has_include(<opencv2/videoio.hpp>) && __has_include(<opencv2/imgcodecs.hpp>)
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#define CUDANMS_DECODES_FRAMES 1
#endif

namespace cudanms::tools {

inline std::string env_or(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

// A binary PGM (P5, 8-bit), or an empty Mat when the file is missing or not one.
inline cv::Mat read_pgm(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int w = 0, h = 0, maxval = 0;
  if (!(in >> magic >> w >> h >> maxval) || magic != "P5" || maxval != 255 || w <= 0 || h <= 0)
    return {};
  in.get();  // the one whitespace character before the pixels
  cv::Mat gray(h, w, CV_8UC1);
  in.read(reinterpret_cast<char *>(gray.data), static_cast<std::streamsize>(w) * h);
  return in ? gray : cv::Mat();
}

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
      cv::Mat gray = dir.empty() ? cv::Mat() : read_pgm(dir + "/" + name + ".pgm");
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

// The frame of that name, or an empty Mat.
inline cv::Mat cascade_frame(const std::string &name, std::string *why) {
  for (const GrayFrame &f : cascade_frames(why)) {
    if (f.name == name) return f.gray;
  }
  return {};
}

// Every tenth frame of a video (every CUDANMS_VIDEO_STRIDE-th where it is set), gray; every frame
// where CUDANMS_FULL_VIDEOS is set.
inline std::vector<cv::Mat> video_gray_frames(const std::string &name, std::string *why) {
  const int every = std::atoi(env_or("CUDANMS_VIDEO_STRIDE", "10").c_str());
  const int stride = env_or("CUDANMS_FULL_VIDEOS", "").empty() ? std::max(every, 1) : 1;
  std::vector<cv::Mat> out;
  const std::string dir = env_or("CUDANMS_VIDEO_FRAMES", "");
  if (!dir.empty()) {  // PGMs by make-cascade-frames.py --videos: NAME_NNNN.pgm
    for (int index = 0;; index += stride) {
      char file[64];
      std::snprintf(file, sizeof file, "/%s_%04d.pgm", name.c_str(), index);
      cv::Mat gray = read_pgm(dir + file);
      if (gray.empty()) break;
      out.push_back(gray);
    }
  }
#ifdef CUDANMS_DECODES_FRAMES
  if (dir.empty()) {
    const std::string samples =
        env_or("CUDANMS_OPENCV_SAMPLES", "/usr/share/doc/opencv-doc/examples/data");
    cv::VideoCapture capture(samples + "/" + name + ".avi");
    cv::Mat frame;
    for (int index = 0; capture.read(frame); ++index) {
      if (index % stride == 0) out.push_back(to_gray(frame));
    }
  }
#endif
  if (out.empty()) *why = name + ": no frames (opencv-doc's samples, or CUDANMS_VIDEO_FRAMES)";
  return out;
}

}  // namespace cudanms::tools
