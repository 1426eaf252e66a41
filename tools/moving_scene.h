// A seeded scene of objects moving at constant velocities through a frame, with a detector that
// sees each of them with noise, misses some and adds false boxes: the tracker's benchmark input,
// and ground truth for its tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "cudanms/track.h"
#include "mot.h"

namespace cudanms::tools {

struct MovingSceneOptions {
  size_t objects = 100;
  int width = 1920, height = 1080;
  double coverage = 0.25;       // the part of the frame the objects' boxes cover together
  double speed = 0.05;          // pixels a frame, times the object's height
  double noise = 0.03;          // the detector's jitter, times the object's size
  double miss_rate = 0.05;      // objects the detector misses on a frame
  double false_rate = 0.02;     // false boxes a frame, per object
  double low_score_rate = 0.1;  // true boxes whose score falls below 0.5 on a frame
};

class MovingScene {
 public:
  MovingScene(const MovingSceneOptions &options, uint64_t seed);
  // The next frame: the detector's boxes, and the objects' true boxes (ids from 1) in `truth`
  // (may be null) with frame numbers from 1.
  std::vector<Detection> next(std::vector<MotBox> *truth = nullptr);

 private:
  struct Object {
    double cx, cy, w, h, vx, vy;
  };
  MovingSceneOptions options_;
  std::mt19937_64 random_;
  std::vector<Object> objects_;
  int64_t frame_ = 0;
};

}  // namespace cudanms::tools
