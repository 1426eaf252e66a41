// Candidates owned by the tools and tests, in the layout cudanms::CandidatesView reads.
#pragma once

#include <cstdint>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms::tools {

struct CandidateSet {
  std::vector<float> boxes;  // x1, y1, x2, y2 per candidate
  std::vector<float> scores;
  std::vector<int32_t> classes;
  std::vector<float> points;  // points_per_candidate x {x, y} per candidate, or empty
  uint32_t points_per_candidate = 0;

  void add(float x1, float y1, float x2, float y2, float score, int32_t class_id = 0) {
    boxes.push_back(x1);
    boxes.push_back(y1);
    boxes.push_back(x2);
    boxes.push_back(y2);
    scores.push_back(score);
    classes.push_back(class_id);
  }
  size_t size() const { return scores.size(); }
  CandidatesView view() const {
    return {boxes.data(),
            scores.data(),
            classes.data(),
            size(),
            points_per_candidate > 0 ? points.data() : nullptr,
            points_per_candidate};
  }
};

}  // namespace cudanms::tools
