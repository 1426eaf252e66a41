#include "bench_peers.h"

#include <algorithm>
#include <numeric>

#ifdef CUDANMS_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#endif

namespace cudanms::tools {

#ifdef CUDANMS_HAVE_OPENCV

// NMSBoxesBatched arrived in OpenCV 4.7.
#define CUDANMS_OPENCV_BATCHED \
  (CV_VERSION_MAJOR > 4 || (CV_VERSION_MAJOR == 4 && CV_VERSION_MINOR >= 7))

namespace {

class OpenCvNms final : public PeerNms {
 public:
  OpenCvNms(const CandidateSet &set, const Params &params)
      : threshold_(params.threshold),
        // NMSBoxes asserts a score threshold >= 0 and keeps scores strictly above it, where
        // cudanms keeps those at or above; the generated scores are never exactly 0.
        score_threshold_(std::max(params.score_threshold, 0.0f)),
        per_class_(!params.class_agnostic),
        scores_(set.scores),
        classes_(set.classes) {
    boxes_.reserve(set.size());
    for (size_t i = 0; i < set.size(); ++i) {
      const float *b = &set.boxes[4 * i];
      // In double, as OpenCV computes the overlap: the widths are exact.
      boxes_.emplace_back(b[0], b[1], double{b[2]} - b[0], double{b[3]} - b[1]);
    }
  }

  Status run(std::vector<uint32_t> *kept) override {
    try {
      nms(kept);
    } catch (const cv::Exception &e) {
      return Status::Error(std::string("OpenCV: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  void nms(std::vector<uint32_t> *kept) {
    kept->clear();
    if (!per_class_) {
      cv::dnn::NMSBoxes(boxes_, scores_, score_threshold_, threshold_, indices_);
      kept->assign(indices_.begin(), indices_.end());
      return;
    }
#if CUDANMS_OPENCV_BATCHED
    cv::dnn::NMSBoxesBatched(boxes_, scores_, classes_, score_threshold_, threshold_, indices_);
    kept->assign(indices_.begin(), indices_.end());
#else
    // What a user of OpenCV 4.6 writes: split by class, one NMSBoxes each, merge by score.
    order_.resize(scores_.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](uint32_t a, uint32_t b) { return classes_[a] < classes_[b]; });
    for (size_t begin = 0, end; begin < order_.size(); begin = end) {
      class_boxes_.clear();
      class_scores_.clear();
      for (end = begin; end < order_.size() && classes_[order_[end]] == classes_[order_[begin]];
           ++end) {
        class_boxes_.push_back(boxes_[order_[end]]);
        class_scores_.push_back(scores_[order_[end]]);
      }
      cv::dnn::NMSBoxes(class_boxes_, class_scores_, score_threshold_, threshold_, indices_);
      for (int i : indices_) kept->push_back(order_[begin + i]);
    }
    std::sort(kept->begin(), kept->end(), [&](uint32_t a, uint32_t b) {
      return scores_[a] != scores_[b] ? scores_[a] > scores_[b] : a < b;
    });
#endif
  }

  float threshold_;
  float score_threshold_;
  bool per_class_;
  std::vector<cv::Rect2d> boxes_;
  std::vector<float> scores_;
  std::vector<int> classes_;
  std::vector<int> indices_;
  // Per-class scratch, kept between runs so that they do not time the allocator.
  std::vector<uint32_t> order_;
  std::vector<cv::Rect2d> class_boxes_;
  std::vector<float> class_scores_;
};

}  // namespace

std::string opencv_version() { return CV_VERSION; }

std::string opencv_call(const Params &params) {
  if (params.class_agnostic) return "cv::dnn::NMSBoxes";
  return CUDANMS_OPENCV_BATCHED ? "cv::dnn::NMSBoxesBatched" : "cv::dnn::NMSBoxes per class";
}

std::unique_ptr<PeerNms> make_opencv_nms(const CandidateSet &candidates, const Params &params,
                                         std::string *why) {
  if (params.method != Method::kGreedy || params.overlap != Overlap::kIoU) {
    *why = "OpenCV has greedy IoU NMS only";
    return nullptr;
  }
  if (candidates.size() > params.max_candidates) {
    *why = "OpenCV has no Dmax: all candidates must fit";
    return nullptr;
  }
  return std::make_unique<OpenCvNms>(candidates, params);
}

#else

std::string opencv_version() { return {}; }

std::string opencv_call(const Params &) { return {}; }

std::unique_ptr<PeerNms> make_opencv_nms(const CandidateSet &, const Params &, std::string *why) {
  *why = "built without OpenCV (pkg-config opencv4 not found)";
  return nullptr;
}

#endif

}  // namespace cudanms::tools
