// Method::kGroup on the CPU (cpu_group.h).
#include "cpu_group.h"

#include <algorithm>

namespace cudanms::detail {

uint32_t RectGrouper::root(uint32_t p) {
  while (parent_[p] != p) {
    parent_[p] = parent_[parent_[p]];  // path halving
    p = parent_[p];
  }
  return p;
}

// The better-ranked root becomes the root of both: a class's root is its best-ranked member.
void RectGrouper::unite(uint32_t a, uint32_t b) {
  a = root(a);
  b = root(b);
  if (a != b) parent_[std::max(a, b)] = std::min(a, b);
}

void RectGrouper::group(const std::vector<Box> &boxes, const std::vector<int32_t> &classes,
                        bool class_agnostic, double eps, uint32_t min_neighbors,
                        std::vector<GroupedClass> *kept) {
  const auto n = static_cast<uint32_t>(boxes.size());
  kept->clear();
  rects_.resize(n);
  for (uint32_t p = 0; p < n; ++p) rects_[p] = group_rect(boxes[p]);
  if (min_neighbors == 0) {  // OpenCV's grouping off: every window a class of its own
    for (uint32_t p = 0; p < n; ++p) kept->push_back({p, rects_[p], 1});
    return;
  }
  auto same_class = [&](uint32_t a, uint32_t b) {
    return class_agnostic || classes[a] == classes[b];
  };
  by_x_.resize(n);
  for (uint32_t p = 0; p < n; ++p) by_x_[p] = p;
  std::sort(by_x_.begin(), by_x_.end(),
            [&](uint32_t a, uint32_t b) { return rects_[a].x < rects_[b].x; });
  parent_.resize(n);
  for (uint32_t p = 0; p < n; ++p) parent_[p] = p;
  for (uint32_t i = 0; i < n; ++i) {
    const GroupRect &a = rects_[by_x_[i]];
    const double reach = group_reach(a, eps);
    for (uint32_t j = i + 1; j < n && rects_[by_x_[j]].x - a.x <= reach; ++j) {
      if (same_class(by_x_[i], by_x_[j]) && group_similar(a, rects_[by_x_[j]], eps)) {
        unite(by_x_[i], by_x_[j]);
      }
    }
  }
  members_.assign(n, 0);
  sums_.assign(4 * size_t{n}, 0);
  for (uint32_t p = 0; p < n; ++p) {
    const uint32_t r = root(p);
    ++members_[r];
    sums_[4 * r] += rects_[p].x;
    sums_[4 * r + 1] += rects_[p].y;
    sums_[4 * r + 2] += rects_[p].w;
    sums_[4 * r + 3] += rects_[p].h;
  }
  survivors_.clear();
  for (uint32_t r = 0; r < n; ++r) {
    if (parent_[r] != r || members_[r] <= min_neighbors) continue;
    const int64_t *s = &sums_[4 * r];
    survivors_.push_back({r, group_mean(s[0], s[1], s[2], s[3], members_[r]), members_[r]});
  }
  for (const GroupedClass &c1 : survivors_) {
    const bool held = std::any_of(survivors_.begin(), survivors_.end(), [&](const auto &c2) {
      return c2.position != c1.position && same_class(c1.position, c2.position) &&
             group_holds(c2.rect, c2.members, c1.rect, c1.members, eps);
    });
    if (!held) kept->push_back(c1);
  }
}

}  // namespace cudanms::detail
