// Soft-NMS against OpenCV's own cv::dnn::softNMSBoxes, the method's reference implementation:
// the same kept candidates with the same scores but for rounding (OpenCV computes the IoU in
// double precision and its exp is libm's), in the same order but where two current scores are
// equal to rounding. OpenCV rounds an overlap as 1 - (1 - I/U), this library as I/U in single
// precision (nms.h): the two differ in the last bit, so a threshold that one of them places exactly
// on a pair's overlap is redrawn (the rule "more than the threshold" then depends on rounding alone).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <opencv2/dnn.hpp>
#include <random>
#include <set>
#include <vector>

#include "candidate_set.h"
#include "cudanms/nms.h"
#include "reference.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

// cv::dnn's rectOverlap for integer rectangles: its jaccardDistance in double, then 1 - that in
// single precision.
float opencv_overlap(const cv::Rect &a, const cv::Rect &b) {
  const double intersection = (a & b).area();
  const double distance = 1.0 - intersection / (a.area() + b.area() - intersection);
  return 1.f - static_cast<float>(distance);
}

// Whether some pair overlaps by more than the threshold by OpenCV's rounding and not by this
// library's, or the other way round.
bool rounding_decides(const std::vector<cv::Rect> &rects, float threshold) {
  for (size_t i = 0; i < rects.size(); ++i) {
    const cv::Rect &a = rects[i];
    const float box_a[4] = {float(a.x), float(a.y), float(a.x + a.width), float(a.y + a.height)};
    for (size_t j = i + 1; j < rects.size(); ++j) {
      const cv::Rect &b = rects[j];
      const float box_b[4] = {float(b.x), float(b.y), float(b.x + b.width), float(b.y + b.height)};
      if ((opencv_overlap(a, b) > threshold) !=
          (reference_overlap(Overlap::kIoU, box_a, box_b) > threshold)) {
        return true;
      }
    }
  }
  return false;
}

TEST(NmsOpenCv, SoftNmsEqualsOpenCvsSoftNmsBoxes) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  std::mt19937_64 rng(run_seed() + 40);
  size_t sets = 0, kept = 0, swapped = 0, redrawn = 0, at_the_floor = 0;
  double worst = 0;
  for (SoftDecay decay : {SoftDecay::kLinear, SoftDecay::kGaussian}) {
    for (float sigma : {0.5f, 0.2f}) {
      for (float score_threshold : {0.0f, 0.05f, 0.3f}) {
        for (int k = 0; k < 25; ++k) {
          // Integer boxes (OpenCV's softNMSBoxes takes cv::Rect), clustered so that many
          // overlap, and scores without ties.
          const size_t n = std::uniform_int_distribution<size_t>(1, 300)(rng);
          std::vector<cv::Rect> rects;
          std::vector<float> scores;
          std::set<float> seen;
          tools::CandidateSet set;
          while (set.size() < n) {
            const float score = std::uniform_real_distribution<float>(0, 1)(rng);
            if (!seen.insert(score).second) continue;
            const int x = std::uniform_int_distribution<int>(0, 200)(rng);
            const int y = std::uniform_int_distribution<int>(0, 150)(rng);
            const int w = std::uniform_int_distribution<int>(1, 80)(rng);
            const int h = std::uniform_int_distribution<int>(1, 80)(rng);
            rects.emplace_back(x, y, w, h);
            scores.push_back(score);
            set.add(x, y, x + w, y + h, score);
          }
          float threshold = std::uniform_real_distribution<float>(0.2f, 0.7f)(rng);
          while (rounding_decides(rects, threshold)) {
            threshold = std::uniform_real_distribution<float>(0.2f, 0.7f)(rng);
            ++redrawn;
          }
          const size_t top_k = k % 4 == 0 ? 10 : 0;
          std::vector<float> cv_scores;
          std::vector<int> cv_kept;
          cv::dnn::softNMSBoxes(
              rects, scores, cv_scores, score_threshold, threshold, cv_kept, top_k, sigma,
              decay == SoftDecay::kLinear ? cv::dnn::SoftNMSMethod::SOFTNMS_LINEAR
                                          : cv::dnn::SoftNMSMethod::SOFTNMS_GAUSSIAN);
          Params params;
          params.method = Method::kSoft;
          params.soft_decay = decay;
          params.sigma = sigma;
          params.threshold = threshold;
          params.score_threshold = score_threshold;
          params.max_detections = top_k;
          params.class_agnostic = true;
          Result result;
          ASSERT_TRUE(nms->run(set.view(), params, &result).ok());
          // Scores of OpenCV's arithmetic and of this library's can differ in the last bits,
          // so where two current scores are that close the two may select them in the other
          // order, and then the one selected second is the one decayed by the other, and
          // selected later, where its decayed score falls: the same kept candidates, the same
          // score at every position, and the same candidate at every position but for such
          // swaps of two (the decays in between commute).
          // A candidate whose current score ends within rounding of the floor (scores are at
          // most 1; see close() below) may be selected by one and not by the other; it is then
          // the last selected (every other one is below it), so such a tail is left out of the
          // longer list.
          auto at_floor = [&](float score) {
            return score_threshold > 0 && std::abs(score - score_threshold) <= 1e-5;
          };
          while (result.kept.size() > cv_kept.size() && at_floor(result.kept_scores.back())) {
            result.kept.pop_back();
            result.kept_scores.pop_back();
            ++at_the_floor;
          }
          while (cv_kept.size() > result.kept.size() && at_floor(cv_scores.back())) {
            cv_kept.pop_back();
            cv_scores.pop_back();
            ++at_the_floor;
          }
          ASSERT_EQ(result.kept.size(), cv_kept.size());
          // Each decay's rounding (and OpenCV's overlap, rounded as 1 - (1 - I/U)) adds to a
          // score's error, so a score decayed many times holds more of it than 1e-5 of itself;
          // as a part of the score before any decay it stays under 1e-5.
          auto close = [&](size_t i) {
            const double original = std::max(scores[result.kept[i]], scores[cv_kept[i]]);
            const double error =
                std::abs(static_cast<double>(result.kept_scores[i]) - cv_scores[i]) /
                std::max(1e-30, std::abs(original));
            worst = std::max(worst, error);
            return error <= 1e-5;
          };
          std::map<uint32_t, size_t> position_of, cv_position_of;
          for (size_t i = 0; i < cv_kept.size(); ++i) {
            position_of[result.kept[i]] = i;
            cv_position_of[cv_kept[i]] = i;
          }
          // A swap across the cut of max_detections leaves one of the two in each list only.
          const bool cut = top_k != 0 && cv_kept.size() == top_k;
          for (size_t i = 0; i < cv_kept.size(); ++i) {
            EXPECT_TRUE(close(i)) << "position " << i;
            const uint32_t ours = result.kept[i], theirs = cv_kept[i];
            if (ours == theirs) continue;
            const auto j = cv_position_of.find(ours);
            const bool swap = j != cv_position_of.end()
                                  ? result.kept[j->second] == theirs
                                  : cut && position_of.find(theirs) == position_of.end();
            EXPECT_TRUE(swap) << "position " << i << " holds " << ours << ", OpenCV's "
                              << theirs << ": not a swap of the two";
            swapped += j == cv_position_of.end() || j->second > i;
          }
          if (::testing::Test::HasFailure()) {
            FAIL() << to_string(decay) << " sigma=" << sigma
                   << " score_threshold=" << score_threshold << " threshold=" << threshold
                   << " n=" << n;
          }
          kept += cv_kept.size();
          ++sets;
        }
      }
    }
  }
  std::printf(
      "Soft-NMS: %zu random sets, %zu kept candidates, the same as OpenCV's softNMSBoxes; "
      "%zu pairs selected in the other order, equal to rounding; largest score "
      "difference %.2g of the score before decay; %zu thresholds redrawn where rounding alone decided; %zu "
      "candidates at the floor to rounding kept by one only\n",
      sets, kept, swapped, worst, redrawn, at_the_floor);
}

}  // namespace
}  // namespace cudanms::testing
