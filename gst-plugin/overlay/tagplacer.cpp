#include "tagplacer.h"

#include <algorithm>

namespace {

constexpr int kSteps = 6;  // how far up and down to look, in tag heights

}  // namespace

bool TagPlacer::free(const cv::Rect &r) const {
  if (r.x < 0 || r.y < 0 || r.x + r.width > frame_.width || r.y + r.height > frame_.height)
    return false;
  return std::none_of(taken_.begin(), taken_.end(),
                      [&](const cv::Rect &t) { return (t & r).area() > 0; });
}

cv::Rect TagPlacer::place(const cv::Rect &box, cv::Size size) {
  /* Left-aligned with the box, moved in from the frame's right edge. */
  const int x = std::max(0, std::min(box.x, frame_.width - size.width));
  const int above = box.y - size.height, inside = std::max(0, box.y), below = box.y + box.height;
  std::vector<int> rows = {above, inside, below};
  for (int k = 1; k <= kSteps; k++) {
    rows.push_back(above - k * size.height);
    rows.push_back(below + k * size.height);
  }
  cv::Rect chosen(x, above < 0 ? inside : above, size.width, size.height);
  for (int y : rows) {
    const cv::Rect r(x, y, size.width, size.height);
    if (free(r)) {
      chosen = r;
      break;
    }
  }
  taken_.push_back(chosen);
  return chosen;
}
