// Binary PGM (P5, 8-bit) frames: the cascade tests and benchmark read the frames
// tools/gpu-host/make-cascade-frames.py writes on hosts whose OpenCV cannot decode video.
#pragma once

#include <fstream>
#include <opencv2/core.hpp>
#include <string>

namespace cudanms::tools {

// The image, or an empty Mat when the file is missing or not a binary 8-bit PGM.
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

}  // namespace cudanms::tools
