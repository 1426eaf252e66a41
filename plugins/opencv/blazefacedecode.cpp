#include "blazefacedecode.h"

#include <algorithm>
#include <cmath>

namespace cudanms::blazeface {

const std::vector<Anchor> &front_anchors() {
  static const std::vector<Anchor> anchors = [] {
    /* (stride, anchors per cell): strides 8, 16, 16, 16 with two anchors per layer (aspect
     * ratio 1 and the interpolated scale), consecutive layers of one stride merged. */
    const int layers[][2] = {{8, 2}, {16, 6}};
    std::vector<Anchor> all;
    for (const auto &[stride, per_cell] : layers) {
      const int cells = kInputSize / stride;
      for (int y = 0; y < cells; y++) {
        for (int x = 0; x < cells; x++) {
          const Anchor a{(x + 0.5f) / cells, (y + 0.5f) / cells};
          all.insert(all.end(), per_cell, a);
        }
      }
    }
    return all;
  }();
  return anchors;
}

Letterbox Letterbox::fit(int frame_width, int frame_height, int input_size) {
  Letterbox l;
  l.frame_width = frame_width;
  l.frame_height = frame_height;
  const double scale =
      std::min(double(input_size) / frame_width, double(input_size) / frame_height);
  l.scaled_width = std::clamp(static_cast<int>(std::lround(frame_width * scale)), 1, input_size);
  l.scaled_height = std::clamp(static_cast<int>(std::lround(frame_height * scale)), 1, input_size);
  l.pad_x = (input_size - l.scaled_width) / 2;
  l.pad_y = (input_size - l.scaled_height) / 2;
  return l;
}

float Letterbox::frame_x(float u, int input_size) const {
  return static_cast<float>((double(u) * input_size - pad_x) * frame_width / scaled_width);
}

float Letterbox::frame_y(float v, int input_size) const {
  return static_cast<float>((double(v) * input_size - pad_y) * frame_height / scaled_height);
}

void Candidates::clear() {
  boxes.clear();
  scores.clear();
  keypoints.clear();
}

void decode(const float *logits, const float *regressors, const Anchor *anchors, size_t count,
            float score_threshold, const Letterbox &letterbox, Candidates *out) {
  const float scale = static_cast<float>(kInputSize);
  for (size_t i = 0; i < count; i++) {
    /* NaN logits compare false with everything and are not emitted. */
    const float logit = std::clamp(logits[i], -100.0f, 100.0f);
    const float score = 1.0f / (1.0f + std::exp(-logit));
    if (!(score >= score_threshold)) continue;
    const float *r = regressors + i * kRegressors;
    const Anchor &a = anchors[i];
    const float xc = a.x_center + r[0] / scale, yc = a.y_center + r[1] / scale;
    const float half_w = r[2] / scale / 2, half_h = r[3] / scale / 2;
    out->boxes.insert(out->boxes.end(),
                      {letterbox.frame_x(xc - half_w), letterbox.frame_y(yc - half_h),
                       letterbox.frame_x(xc + half_w), letterbox.frame_y(yc + half_h)});
    out->scores.push_back(score);
    for (int k = 0; k < kKeypoints; k++) {
      out->keypoints.push_back(letterbox.frame_x(a.x_center + r[4 + 2 * k] / scale));
      out->keypoints.push_back(letterbox.frame_y(a.y_center + r[5 + 2 * k] / scale));
    }
  }
}

}  // namespace cudanms::blazeface
