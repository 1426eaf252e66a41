#include "moving_scene.h"

#include <algorithm>
#include <cmath>

namespace cudanms::tools {

MovingScene::MovingScene(const MovingSceneOptions &options, uint64_t seed)
    : options_(options), random_(seed) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Upright boxes (people: w = 0.4 h) whose areas add up to the coverage.
  const double mean_area = options.coverage * options.width * options.height /
                           static_cast<double>(std::max<size_t>(options.objects, 1));
  const double mean_h = std::sqrt(mean_area / 0.4);
  for (size_t i = 0; i < options.objects; ++i) {
    const double h = mean_h * (0.7 + 0.6 * unit(random_));
    const double angle = 2 * M_PI * unit(random_);
    const double speed = options.speed * h * (0.5 + unit(random_));
    objects_.push_back({unit(random_) * options.width, unit(random_) * options.height, 0.4 * h, h,
                        speed * std::cos(angle), speed * std::sin(angle)});
  }
}

std::vector<Detection> MovingScene::next(std::vector<MotBox> *truth) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> gauss(0.0, 1.0);
  frame_++;
  if (truth) truth->clear();
  std::vector<Detection> out;
  for (size_t i = 0; i < objects_.size(); ++i) {
    Object &o = objects_[i];
    // Move, turning back at the frame's edges.
    o.cx += o.vx;
    o.cy += o.vy;
    if (o.cx < 0 || o.cx > options_.width) o.vx = -o.vx;
    if (o.cy < 0 || o.cy > options_.height) o.vy = -o.vy;
    if (truth)
      truth->push_back(
          {frame_, static_cast<int64_t>(i + 1), o.cx - o.w / 2, o.cy - o.h / 2, o.w, o.h, 1.0});
    if (unit(random_) < options_.miss_rate) continue;
    const double n = options_.noise;
    const double cx = o.cx + n * o.w * gauss(random_), cy = o.cy + n * o.h * gauss(random_);
    const double w = o.w * (1 + n * gauss(random_)), h = o.h * (1 + n * gauss(random_));
    const double score = unit(random_) < options_.low_score_rate ? 0.15 + 0.3 * unit(random_)
                                                                 : 0.6 + 0.4 * unit(random_);
    out.push_back({static_cast<float>(cx - w / 2), static_cast<float>(cy - h / 2),
                   static_cast<float>(cx + w / 2), static_cast<float>(cy + h / 2),
                   static_cast<float>(score), 0});
  }
  const auto false_boxes =
      static_cast<size_t>(options_.false_rate * objects_.size() + unit(random_));
  for (size_t k = 0; k < false_boxes && !objects_.empty(); ++k) {
    const Object &like =
        objects_[static_cast<size_t>(unit(random_) * objects_.size()) % objects_.size()];
    const double x = unit(random_) * options_.width, y = unit(random_) * options_.height;
    out.push_back({static_cast<float>(x), static_cast<float>(y), static_cast<float>(x + like.w),
                   static_cast<float>(y + like.h), static_cast<float>(0.2 + 0.5 * unit(random_)),
                   0});
  }
  return out;
}

}  // namespace cudanms::tools
