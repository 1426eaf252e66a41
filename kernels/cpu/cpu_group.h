// Method::kGroup on the CPU (cudanms/nms.h, rule 4): OpenCV's rectangle grouping over ranked
// candidates. The similar pairs come from a sweep over x, not from testing every pair, and the
// classes from a union-find whose roots are their best-ranked members.
#pragma once

#include <cstdint>
#include <vector>

#include "common/group.h"

namespace cudanms::detail {

struct GroupedClass {
  uint32_t position;  // its best-ranked member's rank position
  GroupRect rect;
  uint32_t members;
};

class RectGrouper {
 public:
  // The kept classes of the ranked `boxes` (group ids in `classes`, all one with
  // class_agnostic), in rank order. Reuses its vectors between frames.
  void group(const std::vector<Box> &boxes, const std::vector<int32_t> &classes,
             bool class_agnostic, double eps, uint32_t min_neighbors,
             std::vector<GroupedClass> *kept);

 private:
  uint32_t root(uint32_t p);
  void unite(uint32_t a, uint32_t b);

  std::vector<GroupRect> rects_;
  std::vector<uint32_t> by_x_;
  std::vector<uint32_t> parent_;
  std::vector<uint32_t> members_;
  std::vector<int64_t> sums_;  // 4 per rank position: x, y, w, h of the class it roots
  std::vector<GroupedClass> survivors_;
};

}  // namespace cudanms::detail
