// Soft-NMS against OpenCV's own cv::dnn::softNMSBoxes, the method's reference implementation:
// the same kept candidates with the same scores but for rounding (OpenCV computes the IoU in
// double precision and its exp is libm's), in the same order but where two decayed scores are
// equal to rounding.
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
#include "support/seed.h"

namespace cudanms::testing {
namespace {

TEST(NmsOpenCv, SoftNmsEqualsOpenCvsSoftNmsBoxes) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  std::mt19937_64 rng(run_seed() + 40);
  size_t sets = 0, kept = 0, swapped = 0;
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
          const float threshold = std::uniform_real_distribution<float>(0.2f, 0.7f)(rng);
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
          // so where two decayed scores are that close the order may differ: the same kept
          // candidates with the same scores, and the same score at every position.
          ASSERT_EQ(result.kept.size(), cv_kept.size());
          std::map<uint32_t, float> cv_score_of;
          for (size_t i = 0; i < cv_kept.size(); ++i) cv_score_of[cv_kept[i]] = cv_scores[i];
          auto close = [&](float a, float b) {
            const double error = std::abs(static_cast<double>(a) - b) /
                                 std::max(1e-30, std::abs(static_cast<double>(b)));
            worst = std::max(worst, error);
            return error <= 1e-5;
          };
          for (size_t i = 0; i < cv_kept.size(); ++i) {
            const auto found = cv_score_of.find(result.kept[i]);
            ASSERT_NE(found, cv_score_of.end()) << "kept " << result.kept[i] << ", OpenCV did not";
            EXPECT_TRUE(close(result.kept_scores[i], found->second))
                << "candidate " << found->first;
            EXPECT_TRUE(close(result.kept_scores[i], cv_scores[i])) << "position " << i;
            swapped += result.kept[i] != static_cast<uint32_t>(cv_kept[i]);
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
      "%zu positions hold another candidate of a score within 1e-5; largest relative "
      "score difference %.2g\n",
      sets, kept, swapped, worst);
}

}  // namespace
}  // namespace cudanms::testing
