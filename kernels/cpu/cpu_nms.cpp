// The CPU backend: the reference semantics of cudanms/nms.h, written to be fast enough for a
// fallback. Candidates are gathered once into rank order, so every later loop is sequential, and
// each candidate is tested only against the boxes a grid finds near it.
#include "cpu_nms.h"

#include <algorithm>

#include "box_grid.h"
#include "common/decay.h"
#include "common/overlap.h"
#include "common/points.h"
#include "common/select.h"
#include "cpu_group.h"

namespace cudanms::detail {
namespace {

class CpuContext final : public Context {
 public:
  explicit CpuContext(size_t reserve_candidates) { reserve(reserve_candidates); }

  Backend backend() const override { return Backend::kCpu; }
  std::string device_name() const override { return "cpu"; }

 private:
  Status run_checked(const CandidatesView &candidates, const Params &params,
                     Result *result) override {
    select_candidates(candidates, params, &selected_, &result->counts);
    reserve(selected_.size());
    rank_order(candidates);
    switch (params.method) {
      case Method::kGreedy:
        greedy(params, result);
        break;
      case Method::kMatrix:
        matrix(params, result);
        break;
      case Method::kSoft:
        soft(params, result);
        break;
      case Method::kWeighted:
        weighted(params, result);
        if (candidates.points_per_candidate > 0) {
          merged_points(candidates, result->kept, selected_.data(), claims_.data(), claims_.size(),
                        &result->kept_points);
        }
        break;
      case Method::kGroup:
        group(params, result);
        break;
    }
    keep_neighboured(params, result);
    result->counts.kept = result->kept.size();
    return Status::Ok();
  }

  // The largest first: a size beyond memory fails before anything smaller is touched.
  void reserve(size_t n) {
    boxes_.reserve(n);
    selected_.reserve(n);
    scores_.reserve(n);
    classes_.reserve(n);
    ranked_.reserve(n);
  }

  // Sorts the selected candidates by rank and gathers them into contiguous arrays.
  void rank_order(const CandidatesView &c) {
    ranked_.clear();
    for (uint32_t index : selected_) ranked_.push_back({c.scores[index], index});
    std::sort(ranked_.begin(), ranked_.end(), [](const Ranked &a, const Ranked &b) {
      return a.score > b.score || (a.score == b.score && a.index < b.index);
    });
    boxes_.clear();
    scores_.clear();
    classes_.clear();
    for (size_t r = 0; r < ranked_.size(); ++r) {
      const uint32_t index = ranked_[r].index;
      const float *b = c.boxes + 4 * static_cast<size_t>(index);
      selected_[r] = index;
      boxes_.push_back({b[0], b[1], b[2], b[3]});
      scores_.push_back(c.scores[index]);
      classes_.push_back(c.class_ids ? c.class_ids[index] : 0);
    }
  }

  bool same_class(const Params &params, size_t a, size_t b) const {
    return params.class_agnostic || classes_[a] == classes_[b];
  }

  // Whether the methods may stop at max_detections: not when rule 5 may drop some of those.
  static bool full(const Params &params, size_t kept) {
    return params.min_neighbors == 0 && params.max_detections != 0 && kept >= params.max_detections;
  }

  static bool counts_neighbours(const Params &params) { return params.min_neighbors > 0; }

  // Rules 5 and 6 on the kept candidates the method found, with its counts of their neighbours
  // in result->kept_neighbors when it counted them: every per-kept vector of the result keeps the
  // entries of the kept candidates that stay, at most max_detections of them.
  void keep_neighboured(const Params &params, Result *result) {
    const size_t found = result->kept.size();
    const size_t cap = params.max_detections == 0 ? found : params.max_detections;
    if (params.min_neighbors == 0 && found <= cap) return;
    staying_.clear();
    for (size_t k = 0; k < found && staying_.size() < cap; ++k) {
      if (params.min_neighbors == 0 || result->kept_neighbors[k] >= params.min_neighbors)
        staying_.push_back(k);
    }
    auto compact = [&](auto *values) {
      if (values->empty()) return;
      const size_t stride = values->size() / found;
      for (size_t to = 0; to < staying_.size(); ++to) {
        std::copy_n(values->begin() + staying_[to] * stride, stride, values->begin() + to * stride);
      }
      values->resize(staying_.size() * stride);
    };
    compact(&result->kept);
    compact(&result->kept_boxes);
    compact(&result->kept_scores);
    compact(&result->kept_class_ids);
    compact(&result->kept_points);
    compact(&result->kept_neighbors);
  }

  // result->kept_neighbors from the counts per rank position of the kept ones, when counted.
  void report_neighbours(const Params &params, Result *result) const {
    if (!counts_neighbours(params)) return;
    for (const uint32_t p : kept_positions_) result->kept_neighbors.push_back(neighbours_[p]);
  }

  // Overlap > threshold >= 0 needs an intersection, so the grid of kept boxes finds every
  // candidate's possible suppressors.
  // Counting neighbours, every kept box near a candidate is visited, not only the first.
  void greedy(const Params &params, Result *result) {
    const bool counting = counts_neighbours(params);
    grid_.reset(boxes_);
    start_neighbours(params);
    for (uint32_t i = 0; i < boxes_.size() && !full(params, result->kept.size()); ++i) {
      bool suppressed = false;
      grid_.any_near(boxes_[i], [&](uint32_t k) {
        if (!same_class(params, k, i) ||
            !greedy_suppresses(params.overlap, params.threshold, boxes_[k], boxes_[i])) {
          return false;
        }
        suppressed = true;
        if (counting) ++neighbours_[k];
        return !counting;
      });
      if (!suppressed) {
        grid_.add(i, boxes_[i]);
        result->kept.push_back(selected_[i]);
        kept_positions_.push_back(i);
      }
    }
    report_neighbours(params, result);
  }

  void start_neighbours(const Params &params) {
    kept_positions_.clear();
    neighbours_.assign(counts_neighbours(params) ? boxes_.size() : 0, 0);
  }

  // Overlap >= threshold needs an intersection only when the threshold is above 0; at 0 every
  // higher-scoring non-empty box suppresses, near or far. Only a strictly higher score
  // suppresses, so the candidates of one score (consecutive in rank order) join the grid
  // together once a lower score comes: a pile of equal-score boxes is linear, not quadratic.
  void matrix(const Params &params, Result *result) {
    auto suppresses = [&](uint32_t j, uint32_t i) {
      return same_class(params, j, i) &&
             matrix_suppresses(params.overlap, params.threshold, boxes_[j], scores_[j], boxes_[i],
                               scores_[i]);
    };
    const bool near_only = params.threshold > 0.0f;
    const bool counting = counts_neighbours(params);
    grid_.reset(boxes_);
    start_neighbours(params);
    uint32_t score_group = 0;  // the first candidate of the score of candidate i
    for (uint32_t i = 0; i < boxes_.size() && !full(params, result->kept.size()); ++i) {
      if (scores_[i] != scores_[score_group]) {
        for (; near_only && score_group < i; ++score_group)
          grid_.add(score_group, boxes_[score_group]);
        score_group = i;
      }
      bool suppressed = false;
      auto visit = [&](uint32_t j) {
        if (!suppresses(j, i)) return false;
        suppressed = true;
        if (counting) ++neighbours_[j];
        return !counting;
      };
      if (near_only) {
        grid_.any_near(boxes_[i], visit);
      } else {
        for (uint32_t j = 0; j < score_group && !(suppressed && !counting); ++j) visit(j);
      }
      if (!suppressed) {
        result->kept.push_back(selected_[i]);
        kept_positions_.push_back(i);
      }
    }
    report_neighbours(params, result);
  }

  // Soft-NMS, selecting from a heap of (current score, index) entries: a decay pushes the
  // candidate's new entry and leaves the old one, skipped when it comes up. Only candidates the
  // grid finds near the selected one can decay, but for DIoU's gaussian decay.
  void soft(const Params &params, Result *result) {
    const uint32_t n = static_cast<uint32_t>(boxes_.size());
    current_.assign(scores_.begin(), scores_.end());
    selected_flags_.assign(n, 0);
    heap_.clear();
    for (uint32_t i = 0; i < n; ++i) heap_.push_back({scores_[i], selected_[i], i});
    std::make_heap(heap_.begin(), heap_.end(), SelectedAfter());
    const bool near_only = !decays_boxes_apart(params.soft_decay, params.overlap);
    if (near_only) {
      grid_.reset(boxes_);
      for (uint32_t i = 0; i < n; ++i) grid_.add(i, boxes_[i]);
    }
    while (!heap_.empty() && !full(params, result->kept.size())) {
      std::pop_heap(heap_.begin(), heap_.end(), SelectedAfter());
      const Ranked top = heap_.back();
      heap_.pop_back();
      const uint32_t s = top.position;
      if (selected_flags_[s] || top.score != current_[s]) continue;  // an older entry
      if (top.score < params.score_threshold) break;
      selected_flags_[s] = 1;
      keep(s, boxes_[s], current_[s], result);
      uint32_t neighbours = 0;
      auto decay = [&](uint32_t j) {
        if (selected_flags_[j] || current_[j] < params.score_threshold || !same_class(params, s, j))
          return false;
        const float o = overlap(params.overlap, boxes_[s], boxes_[j]);
        if (o > params.threshold) ++neighbours;
        const float decayed =
            current_[j] * soft_decay(params.soft_decay, o, params.threshold, params.sigma);
        if (decayed != current_[j]) {
          current_[j] = decayed;
          heap_.push_back({decayed, selected_[j], j});
          std::push_heap(heap_.begin(), heap_.end(), SelectedAfter());
        }
        return false;  // visit every one
      };
      if (near_only) {
        grid_.any_near(boxes_[s], decay);
      } else {
        for (uint32_t j = 0; j < n; ++j) decay(j);
      }
      if (counts_neighbours(params)) result->kept_neighbors.push_back(neighbours);
    }
  }

  // Greedy, each kept candidate merged with the candidates it suppresses first (the best-ranked
  // kept one that suppresses a candidate claims it). Once max_detections are kept, later
  // candidates can still belong to their clusters: they are walked to the end.
  void weighted(const Params &params, Result *result) {
    grid_.reset(boxes_);
    merged_.clear();
    kept_positions_.clear();
    neighbours_.clear();  // per kept slot
    claims_.assign(boxes_.size(), UINT32_MAX);
    for (uint32_t i = 0; i < boxes_.size(); ++i) {
      uint32_t claimed_by = UINT32_MAX;  // the kept candidate's slot
      grid_.any_near(boxes_[i], [&](uint32_t slot) {
        const uint32_t k = kept_positions_[slot];
        if (slot < claimed_by && same_class(params, k, i) &&
            greedy_suppresses(params.overlap, params.threshold, boxes_[k], boxes_[i])) {
          claimed_by = slot;
        }
        return false;
      });
      if (claimed_by != UINT32_MAX) {
        claims_[i] = claimed_by;
        merged_[claimed_by].add(boxes_[i], scores_[i]);
        ++neighbours_[claimed_by];
      } else if (!full(params, kept_positions_.size())) {
        grid_.add(static_cast<uint32_t>(kept_positions_.size()), boxes_[i]);
        kept_positions_.push_back(i);
        merged_.emplace_back();
        merged_.back().add(boxes_[i], scores_[i]);
        neighbours_.push_back(0);
      }
    }
    for (size_t slot = 0; slot < kept_positions_.size(); ++slot) {
      const uint32_t k = kept_positions_[slot];
      keep(k, merged_[slot].mean(boxes_[k]), scores_[k], result);
      if (counts_neighbours(params)) result->kept_neighbors.push_back(neighbours_[slot]);
    }
  }

  void group(const Params &params, Result *result) {
    grouper_.group(boxes_, classes_, params.class_agnostic, params.group_eps, params.min_neighbors,
                   &classes_kept_);
    for (const GroupedClass &c : classes_kept_) {
      keep(c.position, group_box(c.rect), scores_[c.position], result);
      result->kept_neighbors.push_back(c.members - 1);
    }
  }

  // Appends rank position p to the result with the values the method gives it.
  void keep(uint32_t p, const Box &box, float score, Result *result) const {
    result->kept.push_back(selected_[p]);
    result->kept_boxes.insert(result->kept_boxes.end(), {box.x1, box.y1, box.x2, box.y2});
    result->kept_scores.push_back(score);
    result->kept_class_ids.push_back(classes_[p]);
  }

  struct Ranked {
    float score;
    uint32_t index;
    uint32_t position = 0;  // soft: the rank position
  };
  // Soft-NMS's selection order as a heap's "less": lower score, then higher index.
  struct SelectedAfter {
    bool operator()(const Ranked &a, const Ranked &b) const {
      return a.score < b.score || (a.score == b.score && a.index > b.index);
    }
  };

  std::vector<uint32_t> selected_;  // candidate indices, in rank order after rank_order()
  std::vector<Box> boxes_;
  std::vector<float> scores_;
  std::vector<int32_t> classes_;
  std::vector<Ranked> ranked_;
  BoxGrid grid_;
  std::vector<Ranked> heap_;              // soft: (current score, index) entries, best on top
  std::vector<float> current_;            // soft: the decayed scores
  std::vector<uint8_t> selected_flags_;   // soft
  std::vector<WeightedBox> merged_;       // weighted: per kept candidate
  std::vector<uint32_t> kept_positions_;  // greedy, matrix, weighted: the kept rank positions
  std::vector<uint32_t> claims_;          // weighted: per rank position, the claiming kept slot
  std::vector<uint32_t> neighbours_;      // rule 5: per rank position (weighted: per kept slot)
  RectGrouper grouper_;
  std::vector<GroupedClass> classes_kept_;
  std::vector<size_t> staying_;  // rules 5 and 6: the kept slots that stay
};

}  // namespace

std::unique_ptr<Context> create_cpu_context(const ContextOptions &options) {
  return std::make_unique<CpuContext>(options.reserve_candidates);
}

}  // namespace cudanms::detail
