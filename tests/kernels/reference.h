// A brute-force NMS written from the rules in cudanms/nms.h alone, sharing no code with
// kernels/: full sort instead of a top-K partition, greedy as "each kept box removes every later
// box it overlaps" (torchvision's form) instead of "check each box against the kept list", and
// the paper's rule over all pairs by score instead of by rank, Soft-NMS as OpenCV's
// softNMSBoxes loop (a linear search for the best each round, every other candidate decayed) and
// weighted NMS as MediaPipe's clustering loop, grouping as OpenCV's groupRectangles over all
// pairs (a breadth-first search for the classes), and neighbours (rule 5) counted from their
// definitions after each method. Soft-NMS's gaussian decay shares one thing with the
// library: its exp (common/decay.h), which the rules in cudanms/nms.h name as part of the
// contract; tests check it against std::exp, and Soft-NMS against OpenCV's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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

// OpenCV's cv::groupRectangles over the ranked candidates `order` (rule 4, kGroup): every pair
// tested, the classes found by a breadth-first search, each reported by its best-ranked member.
template <typename SameClass, typename Finish>
Result reference_group(const tools::CandidateSet &set, const Params &p,
                       const std::vector<uint32_t> &order, SameClass same_class, Finish finish,
                       Result *r) {
  struct Rect {
    int64_t x, y, w, h;
  };
  auto round_clamped = [](float v) {
    return static_cast<int64_t>(std::nearbyint(std::min(std::max(v, -16777216.0f), 16777216.0f)));
  };
  const size_t n = order.size();
  std::vector<Rect> rects;
  for (uint32_t i : order) {
    const float *b = &set.boxes[4 * size_t{i}];
    const int64_t x = round_clamped(b[0]), y = round_clamped(b[1]);
    rects.push_back({x, y, round_clamped(b[2]) - x, round_clamped(b[3]) - y});
  }
  auto keep_rect = [&](size_t k, const Rect &c, uint32_t members) {
    const float box[4] = {float(c.x), float(c.y), float(c.x + c.w), float(c.y + c.h)};
    r->kept.push_back(order[k]);
    r->kept_boxes.insert(r->kept_boxes.end(), box, box + 4);
    r->kept_scores.push_back(set.scores[order[k]]);
    r->kept_class_ids.push_back(set.classes[order[k]]);
    r->kept_neighbors.push_back(members - 1);
  };
  if (p.min_neighbors == 0) {
    for (size_t k = 0; k < n; ++k) keep_rect(k, rects[k], 1);
  } else {
    auto similar = [&](const Rect &a, const Rect &b) {
      const double d = p.group_eps * double(std::min(a.w, b.w) + std::min(a.h, b.h)) * 0.5;
      return std::llabs(a.x - b.x) <= d && std::llabs(a.y - b.y) <= d &&
             std::llabs(a.x + a.w - b.x - b.w) <= d && std::llabs(a.y + a.h - b.y - b.h) <= d;
    };
    std::vector<size_t> label(n, SIZE_MAX);
    std::vector<size_t> firsts;  // each class's best-ranked member
    for (size_t k = 0; k < n; ++k) {
      if (label[k] != SIZE_MAX) continue;
      label[k] = k;
      firsts.push_back(k);
      for (std::vector<size_t> todo = {k}; !todo.empty();) {
        const size_t a = todo.back();
        todo.pop_back();
        for (size_t b = 0; b < n; ++b) {
          if (label[b] == SIZE_MAX && same_class(order[a], order[b]) &&
              similar(rects[a], rects[b])) {
            label[b] = k;
            todo.push_back(b);
          }
        }
      }
    }
    std::vector<Rect> mean(n);
    std::vector<uint32_t> members(n, 0);
    for (const size_t k : firsts) {
      int64_t sx = 0, sy = 0, sw = 0, sh = 0;
      for (size_t m = 0; m < n; ++m) {
        if (label[m] != k) continue;
        ++members[k];
        sx += rects[m].x;
        sy += rects[m].y;
        sw += rects[m].w;
        sh += rects[m].h;
      }
      const float scale = 1.f / float(members[k]);
      mean[k] = {
          int64_t(std::nearbyint(float(sx) * scale)), int64_t(std::nearbyint(float(sy) * scale)),
          int64_t(std::nearbyint(float(sw) * scale)), int64_t(std::nearbyint(float(sh) * scale))};
    }
    for (const size_t k : firsts) {
      if (members[k] <= p.min_neighbors) continue;
      bool inside = false;
      for (const size_t j : firsts) {
        if (j == k || members[j] <= p.min_neighbors || !same_class(order[k], order[j])) continue;
        const Rect &r1 = mean[k], &r2 = mean[j];
        const int64_t dx = int64_t(std::nearbyint(double(r2.w) * p.group_eps));
        const int64_t dy = int64_t(std::nearbyint(double(r2.h) * p.group_eps));
        inside = inside || (r1.x >= r2.x - dx && r1.y >= r2.y - dy &&
                            r1.x + r1.w <= r2.x + r2.w + dx && r1.y + r1.h <= r2.y + r2.h + dy &&
                            (members[j] > std::max<uint32_t>(3, members[k]) || members[k] < 3));
      }
      if (!inside) keep_rect(k, mean[k], members[k]);
    }
  }
  const size_t point_floats = 2 * size_t{set.points_per_candidate};
  for (uint32_t i : r->kept) {
    r->kept_points.insert(r->kept_points.end(), set.points.data() + point_floats * i,
                          set.points.data() + point_floats * (i + 1));
  }
  return finish();
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
  // Rule 6 applies after rule 5: with min_neighbors the methods run to the end.
  const size_t cap =
      p.max_detections != 0 && p.min_neighbors == 0 ? p.max_detections : order.size();
  const bool counting = p.min_neighbors > 0 || p.method == Method::kGroup;
  auto finish = [&] {
    if (p.min_neighbors > 0) {
      Result all = r;
      r.kept.clear();
      r.kept_boxes.clear();
      r.kept_scores.clear();
      r.kept_class_ids.clear();
      r.kept_points.clear();
      r.kept_neighbors.clear();
      const size_t per_points = all.kept.empty() ? 0 : all.kept_points.size() / all.kept.size();
      for (size_t k = 0; k < all.kept.size(); ++k) {
        if (all.kept_neighbors[k] < p.min_neighbors) continue;
        r.kept.push_back(all.kept[k]);
        if (!all.kept_boxes.empty()) {
          r.kept_boxes.insert(r.kept_boxes.end(), &all.kept_boxes[4 * k],
                              &all.kept_boxes[4 * k + 4]);
          r.kept_scores.push_back(all.kept_scores[k]);
          r.kept_class_ids.push_back(all.kept_class_ids[k]);
        }
        r.kept_points.insert(r.kept_points.end(), all.kept_points.begin() + per_points * k,
                             all.kept_points.begin() + per_points * (k + 1));
        r.kept_neighbors.push_back(all.kept_neighbors[k]);
      }
    }
    const size_t most = p.max_detections != 0 ? p.max_detections : r.kept.size();
    if (r.kept.size() > most) {
      const size_t per_points = r.kept_points.size() / r.kept.size();
      r.kept.resize(most);
      if (!r.kept_boxes.empty()) {
        r.kept_boxes.resize(4 * most);
        r.kept_scores.resize(most);
        r.kept_class_ids.resize(most);
      }
      r.kept_points.resize(per_points * most);
      if (!r.kept_neighbors.empty()) r.kept_neighbors.resize(most);
    }
    r.counts.kept = r.kept.size();
    return r;
  };

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
      uint32_t neighbours = 0;
      for (size_t k = 0; k < order.size(); ++k) {
        if (selected[k] || current[k] < p.score_threshold || !same_class(order[best], order[k]))
          continue;
        const float o = reference_overlap(p.overlap, box(order[best]), box(order[k]));
        if (o > p.threshold) ++neighbours;
        float decay = 1.0f;
        if (p.soft_decay == SoftDecay::kLinear) {
          if (o > p.threshold) decay = 1.0f - o;
        } else if (!std::isnan(o)) {
          decay = detail::exp_nonpositive(-(o * o) / p.sigma);
        }
        current[k] = current[k] * decay;
      }
      if (counting) r.kept_neighbors.push_back(neighbours);
    }
    keep_own_points();
    return finish();
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
      if (counting) r.kept_neighbors.push_back(uint32_t(remaining.size() - rest.size() - 1));
      for (size_t v = 0; v < point_floats; ++v) {
        r.kept_points.push_back(total > 0.0f ? point_sums[v] / total : points(first)[v]);
      }
      remaining = std::move(rest);
    }
    return finish();
  }
  if (p.method == Method::kGroup) return reference_group(set, p, order, same_class, finish, &r);

  std::vector<bool> removed(order.size(), false);
  for (size_t ii = 0; ii < order.size(); ++ii) {
    const uint32_t i = order[ii];
    if (p.method == Method::kGreedy) {
      if (removed[ii]) continue;
      r.kept.push_back(i);
      uint32_t neighbours = 0;
      for (size_t jj = ii + 1; jj < order.size(); ++jj) {
        const uint32_t j = order[jj];
        if (same_class(i, j) && reference_overlap(p.overlap, box(i), box(j)) > p.threshold) {
          removed[jj] = true;
          ++neighbours;
        }
      }
      if (counting) r.kept_neighbors.push_back(neighbours);
    } else {
      auto suppresses = [&](uint32_t j, uint32_t k) {
        const float *a = box(j);
        return set.scores[j] > set.scores[k] && a[2] > a[0] && a[3] > a[1] && same_class(k, j) &&
               reference_overlap(p.overlap, a, box(k)) >= p.threshold;
      };
      bool suppressed = false;
      for (uint32_t j : order) suppressed = suppressed || suppresses(j, i);
      if (suppressed) continue;
      r.kept.push_back(i);
      if (counting) {
        uint32_t neighbours = 0;
        for (uint32_t k : order) neighbours += suppresses(i, k) ? 1 : 0;
        r.kept_neighbors.push_back(neighbours);
      }
    }
  }
  keep_own_points();
  return finish();
}

}  // namespace cudanms::testing
