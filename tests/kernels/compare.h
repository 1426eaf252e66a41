#pragma once

#include <gtest/gtest.h>

#include <cstring>

#include "cudanms/nms.h"

namespace cudanms::testing {

// Kept sets in the same order and the same counts; one failure names the first difference.
inline ::testing::AssertionResult same_result(const Result &got, const Result &want) {
  const Counts &g = got.counts, &w = want.counts;
  if (g.in != w.in || g.invalid != w.invalid || g.below_score != w.below_score ||
      g.over_capacity != w.over_capacity || g.kept != w.kept) {
    return ::testing::AssertionFailure()
           << "counts differ: in/invalid/below/over/kept got " << g.in << "/" << g.invalid << "/"
           << g.below_score << "/" << g.over_capacity << "/" << g.kept << " want " << w.in << "/"
           << w.invalid << "/" << w.below_score << "/" << w.over_capacity << "/" << w.kept;
  }
  if (got.kept.size() != want.kept.size()) {
    return ::testing::AssertionFailure()
           << "kept " << got.kept.size() << " boxes, want " << want.kept.size();
  }
  for (size_t k = 0; k < got.kept.size(); ++k) {
    if (got.kept[k] != want.kept[k]) {
      return ::testing::AssertionFailure()
             << "kept[" << k << "] = " << got.kept[k] << ", want " << want.kept[k];
    }
  }
  // The values, where the expected result has them (device candidates, kSoft, kWeighted), bit for
  // bit.
  auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  if (!want.kept_scores.empty() || !want.kept_boxes.empty()) {
    if (got.kept_scores.size() != want.kept_scores.size() ||
        got.kept_boxes.size() != want.kept_boxes.size() ||
        got.kept_class_ids != want.kept_class_ids) {
      return ::testing::AssertionFailure()
             << "kept values: " << got.kept_scores.size() << " scores, " << got.kept_boxes.size()
             << " box floats, want " << want.kept_scores.size() << " and " << want.kept_boxes.size()
             << ", or other class ids";
    }
    for (size_t k = 0; k < got.kept_scores.size(); ++k) {
      if (bits(got.kept_scores[k]) != bits(want.kept_scores[k])) {
        return ::testing::AssertionFailure() << "kept_scores[" << k << "] = " << got.kept_scores[k]
                                             << ", want " << want.kept_scores[k];
      }
    }
    for (size_t k = 0; k < got.kept_boxes.size(); ++k) {
      if (bits(got.kept_boxes[k]) != bits(want.kept_boxes[k])) {
        return ::testing::AssertionFailure() << "kept_boxes[" << k << "] = " << got.kept_boxes[k]
                                             << ", want " << want.kept_boxes[k];
      }
    }
  }
  if (got.kept_neighbors != want.kept_neighbors) {
    return ::testing::AssertionFailure() << "kept_neighbors differ: " << got.kept_neighbors.size()
                                         << " counts, want " << want.kept_neighbors.size();
  }
  // The points: none without points in the candidates, else the same bits.
  if (got.kept_points.size() != want.kept_points.size()) {
    return ::testing::AssertionFailure() << "kept " << got.kept_points.size()
                                         << " point coordinates, want " << want.kept_points.size();
  }
  for (size_t k = 0; k < got.kept_points.size(); ++k) {
    if (bits(got.kept_points[k]) != bits(want.kept_points[k])) {
      return ::testing::AssertionFailure() << "kept_points[" << k << "] = " << got.kept_points[k]
                                           << ", want " << want.kept_points[k];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace cudanms::testing
