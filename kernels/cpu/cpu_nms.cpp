// The CPU backend: the reference semantics of cudanms/nms.h, written to be fast enough for a
// fallback. Candidates are gathered once into rank order, so every later loop is sequential.
#include "cpu_nms.h"

#include <algorithm>

#include "common/overlap.h"
#include "common/select.h"

namespace cudanms::detail {
namespace {

class CpuContext final : public Context {
 public:
  explicit CpuContext(size_t max_candidates) { reserve(max_candidates); }

  Backend backend() const override { return Backend::kCpu; }
  std::string device_name() const override { return "cpu"; }

 private:
  Status run_checked(const CandidatesView &candidates, const Params &params,
                     Result *result) override {
    select_candidates(candidates, params, &selected_, &result->counts);
    reserve(selected_.size());
    rank_order(candidates);
    if (params.method == Method::kGreedy) {
      greedy(params, result);
    } else {
      matrix(params, result);
    }
    result->counts.kept = result->kept.size();
    return Status::Ok();
  }

  void reserve(size_t n) {
    selected_.reserve(n);
    boxes_.reserve(n);
    scores_.reserve(n);
    classes_.reserve(n);
    kept_positions_.reserve(n);
  }

  // Sorts the selected candidates by rank and gathers them into contiguous arrays.
  void rank_order(const CandidatesView &c) {
    const float *scores = c.scores;
    // selected_ is in ascending index order, so a stable sort by score breaks ties by index.
    std::stable_sort(selected_.begin(), selected_.end(),
                     [scores](uint32_t a, uint32_t b) { return scores[a] > scores[b]; });
    boxes_.clear();
    scores_.clear();
    classes_.clear();
    for (uint32_t index : selected_) {
      const float *b = c.boxes + 4 * static_cast<size_t>(index);
      boxes_.push_back({b[0], b[1], b[2], b[3]});
      scores_.push_back(c.scores[index]);
      classes_.push_back(c.class_ids ? c.class_ids[index] : 0);
    }
  }

  bool same_class(const Params &params, size_t a, size_t b) const {
    return params.class_agnostic || classes_[a] == classes_[b];
  }

  bool full(const Params &params, const Result &result) const {
    return params.max_detections != 0 && result.kept.size() >= params.max_detections;
  }

  void greedy(const Params &params, Result *result) {
    kept_positions_.clear();
    for (size_t i = 0; i < boxes_.size() && !full(params, *result); ++i) {
      bool suppressed = false;
      for (size_t k : kept_positions_) {
        if (same_class(params, k, i) &&
            greedy_suppresses(params.overlap, params.threshold, boxes_[k], boxes_[i])) {
          suppressed = true;
          break;
        }
      }
      if (!suppressed) {
        kept_positions_.push_back(i);
        result->kept.push_back(selected_[i]);
      }
    }
  }

  void matrix(const Params &params, Result *result) {
    for (size_t i = 0; i < boxes_.size() && !full(params, *result); ++i) {
      bool suppressed = false;
      // Only candidates ranked before i can have a strictly higher score.
      for (size_t j = 0; j < i && !suppressed; ++j) {
        suppressed = same_class(params, j, i) &&
                     matrix_suppresses(params.overlap, params.threshold, boxes_[j], scores_[j],
                                       boxes_[i], scores_[i]);
      }
      if (!suppressed) result->kept.push_back(selected_[i]);
    }
  }

  std::vector<uint32_t> selected_;  // candidate indices, in rank order after rank_order()
  std::vector<Box> boxes_;
  std::vector<float> scores_;
  std::vector<int32_t> classes_;
  std::vector<size_t> kept_positions_;
};

}  // namespace

std::unique_ptr<Context> create_cpu_context(const ContextOptions &options) {
  return std::make_unique<CpuContext>(options.max_candidates);
}

}  // namespace cudanms::detail
