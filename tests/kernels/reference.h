// A brute-force NMS written from the rules in cudanms/nms.h alone, sharing no code with
// kernels/: full sort instead of a top-K partition, greedy as "each kept box removes every later
// box it overlaps" (torchvision's form) instead of "check each box against the kept list", and
// the paper's rule over all pairs by score instead of by rank, Soft-NMS as OpenCV's
// softNMSBoxes loop (a linear search for the best each round, every other candidate decayed) and
// weighted NMS as MediaPipe's clustering loop. Soft-NMS's gaussian decay shares one thing with the
// library: its exp (common/decay.h), which the rules in cudanms/nms.h name as part of the
// contract; tests check it against std::exp, and Soft-NMS against OpenCV's.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "candidate_set.h"
#include "common/decay.h"
#include "cudanms/nms.h"

namespace cudanms::testing {

// Overlap of b by the higher-ranked a, in the documented single-precision order of operations.
inline float reference_overlap(Overlap kind, const float *a, const float *b);

// DIoU: the IoU less the squared distance of the centres over the enclosing box's squared
// diagonal, written from the formula (half-sums of the corners give the centres).
inline float reference_diou(const float *a, const float *b) {
  const float iou = reference_overlap(Overlap::kIoU, a, b);
  const float enclosing_w = std::max(a[2], b[2]) - std::min(a[0], b[0]);
  const float enclosing_h = std::max(a[3], b[3]) - std::min(a[1], b[1]);
  const float diagonal2 = enclosing_w * enclosing_w + enclosing_h * enclosing_h;
  if (!(diagonal2 > 0.0f)) return iou;
  const float twice_dx = (b[0] + b[2]) - (a[0] + a[2]);
  const float twice_dy = (b[1] + b[3]) - (a[1] + a[3]);
  return iou - (twice_dx * twice_dx + twice_dy * twice_dy) * 0.25f / diagonal2;
}

inline float reference_overlap(Overlap kind, const float *a, const float *b) {
  if (kind == Overlap::kDIoU) return reference_diou(a, b);
  const float one = kind == Overlap::kIoS ? 1.0f : 0.0f;
  float iw = std::min(a[2], b[2]) - std::max(a[0], b[0]) + one;
  float ih = std::min(a[3], b[3]) - std::max(a[1], b[1]) + one;
  iw = iw > 0.0f ? iw : 0.0f;
  ih = ih > 0.0f ? ih : 0.0f;
  const float inter = iw * ih;
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
  switch (kind) {
    case Overlap::kIoU: {
      const float uni = area_a + area_b - inter;
      return uni > 0.0f ? inter / uni : 0.0f;
    }
    case Overlap::kIoMin: {
      const float smaller = std::min(area_a, area_b);
      return smaller > 0.0f ? inter / smaller : 0.0f;
    }
    case Overlap::kIoS:
      return inter / ((a[2] - a[0] + 1.0f) * (a[3] - a[1] + 1.0f));
    case Overlap::kDIoU:
      break;  // above
  }
  return 0.0f;
}

inline Result reference_nms(const tools::CandidateSet &set, const Params &p) {
  Result r;
  const size_t n = set.size();
  r.counts.in = n;
  auto box = [&](uint32_t i) { return &set.boxes[4 * i]; };
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < n; ++i) {
    const float *b = box(i);
    const bool finite = std::isfinite(set.scores[i]) && std::isfinite(b[0]) &&
                        std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3]);
    if (!finite || b[2] < b[0] || b[3] < b[1]) {
      ++r.counts.invalid;
    } else if (set.scores[i] < p.score_threshold) {
      ++r.counts.below_score;
    } else {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (set.scores[a] != set.scores[b]) return set.scores[a] > set.scores[b];
    return a < b;
  });
  if (order.size() > p.max_candidates) {
    r.counts.over_capacity = order.size() - p.max_candidates;
    order.resize(p.max_candidates);
  }
  // A class's group: the smallest class of the group that lists it, else itself.
  auto group_of = [&](int32_t c) {
    for (const auto &group : p.class_groups) {
      if (std::find(group.begin(), group.end(), c) != group.end()) {
        return *std::min_element(group.begin(), group.end());
      }
    }
    return c;
  };
  auto same_class = [&](uint32_t a, uint32_t b) {
    return p.class_agnostic || group_of(set.classes[a]) == group_of(set.classes[b]);
  };
  auto keep_with = [&](uint32_t i, const float *b, float score) {
    r.kept.push_back(i);
    r.kept_boxes.insert(r.kept_boxes.end(), b, b + 4);
    r.kept_scores.push_back(score);
    r.kept_class_ids.push_back(set.classes[i]);
  };
  const size_t cap = p.max_detections != 0 ? p.max_detections : order.size();

  const size_t point_floats = 2 * size_t{set.points_per_candidate};
  auto points = [&](uint32_t i) { return set.points.data() + point_floats * i; };
  auto keep_own_points = [&] {
    for (uint32_t i : r.kept) {
      r.kept_points.insert(r.kept_points.end(), points(i), points(i) + point_floats);
    }
  };
  if (p.method == Method::kSoft) {
    std::vector<float> current;
    for (uint32_t i : order) current.push_back(set.scores[i]);
    std::vector<bool> selected(order.size(), false);
    while (r.kept.size() < cap) {
      size_t best = order.size();
      for (size_t k = 0; k < order.size(); ++k) {
        if (selected[k]) continue;
        if (best == order.size() || current[k] > current[best] ||
            (current[k] == current[best] && order[k] < order[best])) {
          best = k;
        }
      }
      if (best == order.size() || current[best] < p.score_threshold) break;
      selected[best] = true;
      keep_with(order[best], box(order[best]), current[best]);
      for (size_t k = 0; k < order.size(); ++k) {
        if (selected[k] || current[k] < p.score_threshold || !same_class(order[best], order[k]))
          continue;
        const float o = reference_overlap(p.overlap, box(order[best]), box(order[k]));
        float decay = 1.0f;
        if (p.soft_decay == SoftDecay::kLinear) {
          if (o > p.threshold) decay = 1.0f - o;
        } else if (!std::isnan(o)) {
          decay = detail::exp_nonpositive(-(o * o) / p.sigma);
        }
        current[k] = current[k] * decay;
      }
    }
    r.counts.kept = r.kept.size();
    keep_own_points();
    return r;
  }

  if (p.method == Method::kWeighted) {
    std::vector<uint32_t> remaining = order;
    while (!remaining.empty() && r.kept.size() < cap) {
      const uint32_t first = remaining[0];
      float total = 0, x1 = 0, y1 = 0, x2 = 0, y2 = 0;
      std::vector<float> point_sums(point_floats, 0.0f);
      std::vector<uint32_t> rest;
      for (size_t k = 0; k < remaining.size(); ++k) {
        const uint32_t j = remaining[k];
        const bool member =
            k == 0 || (same_class(first, j) &&
                       reference_overlap(p.overlap, box(first), box(j)) > p.threshold);
        if (!member) {
          rest.push_back(j);
          continue;
        }
        const float w = set.scores[j] > 0.0f ? set.scores[j] : 0.0f;
        total = total + w;
        x1 = x1 + box(j)[0] * w;
        y1 = y1 + box(j)[1] * w;
        x2 = x2 + box(j)[2] * w;
        y2 = y2 + box(j)[3] * w;
        for (size_t v = 0; v < point_floats; ++v) point_sums[v] = point_sums[v] + points(j)[v] * w;
      }
      const float mean[4] = {x1 / total, y1 / total, x2 / total, y2 / total};
      keep_with(first, total > 0.0f ? mean : box(first), set.scores[first]);
      for (size_t v = 0; v < point_floats; ++v) {
        r.kept_points.push_back(total > 0.0f ? point_sums[v] / total : points(first)[v]);
      }
      remaining = std::move(rest);
    }
    r.counts.kept = r.kept.size();
    return r;
  }

  std::vector<bool> removed(order.size(), false);
  for (size_t ii = 0; ii < order.size(); ++ii) {
    const uint32_t i = order[ii];
    if (p.method == Method::kGreedy) {
      if (removed[ii]) continue;
      r.kept.push_back(i);
      for (size_t jj = ii + 1; jj < order.size(); ++jj) {
        const uint32_t j = order[jj];
        if (same_class(i, j) && reference_overlap(p.overlap, box(i), box(j)) > p.threshold) {
          removed[jj] = true;
        }
      }
    } else {
      bool suppressed = false;
      for (uint32_t j : order) {
        const float *a = box(j);
        suppressed = suppressed ||
                     (set.scores[j] > set.scores[i] && a[2] > a[0] && a[3] > a[1] &&
                      same_class(i, j) && reference_overlap(p.overlap, a, box(i)) >= p.threshold);
      }
      if (!suppressed) r.kept.push_back(i);
    }
  }
  if (p.max_detections != 0 && r.kept.size() > p.max_detections) {
    r.kept.resize(p.max_detections);
  }
  r.counts.kept = r.kept.size();
  keep_own_points();
  return r;
}

}  // namespace cudanms::testing
