#pragma once

#include <gtest/gtest.h>

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
  return ::testing::AssertionSuccess();
}

}  // namespace cudanms::testing
