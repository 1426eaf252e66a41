// The CPU backend against the brute-force reference, and the rules' named corner cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "compare.h"
#include "cudanms/nms.h"
#include "random_sets.h"
#include "reference.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

class CpuNms : public ::testing::Test {
 protected:
  void SetUp() override {
    Status status;
    nms_ = Context::create({Backend::kCpu}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
  }

  Result run(const CandidateSet &set, const Params &params) {
    Result result;
    const Status status = nms_->run(set.view(), params, &result);
    EXPECT_TRUE(status.ok()) << status.message();
    return result;
  }

  std::unique_ptr<Context> nms_;
};

TEST_F(CpuNms, MatchesReferenceOnRandomSets) {
  size_t cases = 0;
  for_each_random_case(run_seed(), 12, 300, [&](const RandomCase &c) {
    ++cases;
    ASSERT_TRUE(same_result(run(c.set, c.params), reference_nms(c.set, c.params))) << c.description;
  });
  EXPECT_GT(cases, 3000u / random_case_stride());
}

// The library's exp (the gaussian decay's) within 2 ulp of the true value over its whole range,
// 1 at 0 and 0 below -87.
TEST(SoftDecay, ExpIsWithinTwoUlp) {
  EXPECT_EQ(detail::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(detail::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(detail::exp_nonpositive(-87.5f), 0.0f);
  EXPECT_EQ(detail::exp_nonpositive(-kInf), 0.0f);
  int worst = 0;
  for (float x = 0.0f; x > -87.0f; x = std::nextafter(x, -kInf) * 1.0001f - 1e-7f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float got = detail::exp_nonpositive(x);
    int32_t a, b;
    std::memcpy(&a, &want, 4);
    std::memcpy(&b, &got, 4);
    worst = std::max(worst, std::abs(a - b));
  }
  EXPECT_LE(worst, 2);
}

// Soft-NMS by hand: b overlaps a with IoU 80 / 120 = 2/3; c is apart.
TEST_F(CpuNms, SoftNmsDecaysOverlappingScores) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f);    // a
  set.add(2, 0, 12, 10, 0.8f);    // b
  set.add(50, 50, 60, 60, 0.3f);  // c
  Params params;
  params.method = Method::kSoft;
  params.soft_decay = SoftDecay::kLinear;
  params.threshold = 0.5f;
  Result r = run(set, params);
  // Linear: b becomes 0.8 * (1 - 2/3) = 0.267, below c.
  ASSERT_EQ(r.kept, (std::vector<uint32_t>{0, 2, 1}));
  EXPECT_FLOAT_EQ(r.kept_scores[0], 0.9f);
  EXPECT_FLOAT_EQ(r.kept_scores[1], 0.3f);
  EXPECT_NEAR(r.kept_scores[2], 0.8f / 3, 1e-6f);
  EXPECT_EQ(r.kept_boxes, (std::vector<float>{0, 0, 10, 10, 50, 50, 60, 60, 2, 0, 12, 10}));
  // Above the threshold of 0.7 nothing decays: the order of the scores.
  params.threshold = 0.7f;
  r = run(set, params);
  EXPECT_EQ(r.kept, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(r.kept_scores[1], 0.8f);
  // Gaussian, sigma 0.5: b becomes 0.8 * exp(-(4/9) / 0.5) = 0.329, above c.
  params.soft_decay = SoftDecay::kGaussian;
  r = run(set, params);
  EXPECT_EQ(r.kept, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_NEAR(r.kept_scores[1], 0.8f * std::exp(-(4.0f / 9) / 0.5f), 1e-6f);
  // The floor: a decayed score below the score threshold drops the candidate.
  params.score_threshold = 0.33f;
  r = run(set, params);
  EXPECT_EQ(r.kept, (std::vector<uint32_t>{0}));
  EXPECT_EQ(r.counts.below_score, 1u);  // c, before any decay
  // max_detections stops the selection.
  params.score_threshold = 0;
  params.max_detections = 2;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 1}));
}

// Weighted by hand: a (score 3) and b (score 1) merge into a's slot; c (its own cluster) stays.
TEST_F(CpuNms, WeightedMergesEachClusterByScore) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 3.0f);
  set.add(4, 0, 14, 10, 1.0f);  // IoU 60 / 140 with a
  set.add(40, 40, 50, 50, 2.0f);
  set.add(42, 40, 52, 50, -1.0f);  // in c's cluster with no weight
  Params params;
  params.method = Method::kWeighted;
  params.threshold = 0.3f;
  params.score_threshold = -kInf;
  const Result r = run(set, params);
  ASSERT_EQ(r.kept, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(r.kept_scores, (std::vector<float>{3.0f, 2.0f}));
  EXPECT_EQ(r.kept_boxes, (std::vector<float>{1, 0, 11, 10, 40, 40, 50, 50}));
  // Above both overlaps, greedy keeps every candidate and nothing merges.
  params.threshold = 0.7f;
  EXPECT_EQ(run(set, params).kept_boxes,
            (std::vector<float>{0, 0, 10, 10, 40, 40, 50, 50, 4, 0, 14, 10, 42, 40, 52, 50}));
}

// Points by hand: weighted merges them with the box's weights (a's 3, b's 1, d's none); every
// other method, and a cluster whose weights sum to 0, keeps the kept candidate's own.
TEST_F(CpuNms, PointsFollowTheirBoxes) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 3.0f);
  set.add(4, 0, 14, 10, 1.0f);  // a's cluster
  set.add(40, 40, 50, 50, 2.0f);
  set.add(42, 40, 52, 50, -1.0f);  // c's cluster, weight 0
  set.add(80, 80, 90, 90, -2.0f);
  set.add(81, 80, 91, 90, -3.0f);  // e's cluster: weights sum to 0
  set.points_per_candidate = 2;
  set.points = {2,  4,  8,  4,  6,  8,  12, 8,  44, 44, 48, 44,
                46, 46, 50, 46, 82, 84, 88, 84, 99, 99, 99, 99};
  Params params;
  params.method = Method::kWeighted;
  params.threshold = 0.3f;
  params.score_threshold = -kInf;
  Result r = run(set, params);
  ASSERT_EQ(r.kept, (std::vector<uint32_t>{0, 2, 4}));
  // a: (3 * (2, 4) + 1 * (6, 8)) / 4 = (3, 5); (3 * (8, 4) + 1 * (12, 8)) / 4 = (9, 5).
  EXPECT_EQ(r.kept_points, (std::vector<float>{3, 5, 9, 5, 44, 44, 48, 44, 82, 84, 88, 84}));
  for (Method method : {Method::kGreedy, Method::kMatrix, Method::kSoft}) {
    params.method = method;
    r = run(set, params);
    std::vector<float> own;
    for (uint32_t k : r.kept) own.insert(own.end(), &set.points[4 * k], &set.points[4 * k + 4]);
    EXPECT_EQ(r.kept_points, own) << to_string(method);
  }
  // Without points, none.
  set.points_per_candidate = 0;
  EXPECT_TRUE(run(set, params).kept_points.empty());
}

// A suppressed candidate belongs to the best-ranked kept one that overlaps it, and still merges
// into a kept one within max_detections when it ranks after the cap.
TEST_F(CpuNms, WeightedClustersGoToTheBestKeptSuppressor) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f);   // kept
  set.add(9, 0, 19, 10, 0.8f);   // kept: apart enough from the first
  set.add(5, 0, 15, 10, 0.5f);   // overlaps both by 1/3: the first's
  set.add(10, 0, 20, 10, 0.4f);  // the second's
  Params params;
  params.method = Method::kWeighted;
  params.threshold = 0.3f;
  params.max_detections = 1;
  const Result r = run(set, params);
  ASSERT_EQ(r.kept, (std::vector<uint32_t>{0}));
  const float total = 0.9f + 0.5f;
  EXPECT_EQ(r.kept_boxes[0], (0.0f * 0.9f + 5.0f * 0.5f) / total);
  EXPECT_EQ(r.kept_boxes[2], (10.0f * 0.9f + 15.0f * 0.5f) / total);
}

// Class groups: car (2) and truck (7) suppress one another, person (0) neither.
TEST_F(CpuNms, ClassGroupsSuppressWithinAGroupOnly) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f, 2);
  set.add(0, 0, 10, 10, 0.8f, 7);
  set.add(0, 0, 10, 10, 0.7f, 0);
  set.add(0, 0, 10, 10, 0.6f, 5);
  Params params;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 1, 2, 3}));
  params.class_groups = {{2, 7}};
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 2, 3}));
  params.class_groups = {{2, 7}, {0, 5}};
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 2}));
  params.class_agnostic = true;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));
  // The kept values carry the candidates' own classes, not their groups'.
  params.class_agnostic = false;
  params.class_groups = {{7, 2}};
  params.method = Method::kWeighted;
  EXPECT_EQ(run(set, params).kept_class_ids, (std::vector<int32_t>{2, 0, 5}));
}

// DIoU by hand: a = (0,0,10,10), b = (2,0,12,10): IoU 80 / 120 = 0.667; enclosing box 12 x 10,
// c2 = 244; centres 2 apart, rho2 = 4; DIoU = 0.667 - 4 / 244 = 0.650. At 0.66, IoU suppresses b
// and DIoU does not. Apart boxes have a negative DIoU: at threshold 0 the paper's rule
// (overlap >= 0) suppresses them under IoU, never under DIoU.
TEST_F(CpuNms, DiouPenalisesTheCentresDistance) {
  CandidateSet near;
  near.add(0, 0, 10, 10, 0.9f);
  near.add(2, 0, 12, 10, 0.8f);
  const float a[4] = {0, 0, 10, 10}, b[4] = {2, 0, 12, 10};
  EXPECT_NEAR(reference_overlap(Overlap::kIoU, a, b), 80.0 / 120.0, 1e-6);
  EXPECT_NEAR(reference_overlap(Overlap::kDIoU, a, b), 80.0 / 120.0 - 4.0 / 244.0, 1e-6);
  Params params;
  params.threshold = 0.66f;
  EXPECT_EQ(run(near, params).kept.size(), 1u);
  params.overlap = Overlap::kDIoU;
  EXPECT_EQ(run(near, params).kept.size(), 2u);

  CandidateSet apart;
  apart.add(0, 0, 10, 10, 0.9f);
  apart.add(50, 50, 60, 60, 0.8f);
  params = Params();
  params.method = Method::kMatrix;
  params.threshold = 0.0f;
  EXPECT_EQ(run(apart, params).kept.size(), 1u);
  params.overlap = Overlap::kDIoU;
  EXPECT_EQ(run(apart, params).kept.size(), 2u);
  Overlap parsed;
  ASSERT_TRUE(parse_overlap("diou", &parsed));
  EXPECT_EQ(parsed, Overlap::kDIoU);
  EXPECT_STREQ(to_string(Overlap::kDIoU), "diou");
}

TEST_F(CpuNms, PerClassEqualsEachClassAlone) {
  std::mt19937_64 rng(run_seed() + 1);
  for (const Generator &g : generators()) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      const CandidateSet set = g.make(rng, 400, 4);
      Params params;
      params.method = method;
      const Result all = run(set, params);

      // Each class on its own, class-agnostic, mapped back to the full set's indices.
      std::vector<uint32_t> expected;
      for (int32_t cls = 0; cls < 4; ++cls) {
        CandidateSet alone;
        std::vector<uint32_t> index_of;
        for (uint32_t i = 0; i < set.size(); ++i) {
          if (set.classes[i] != cls) continue;
          const float *b = &set.boxes[4 * i];
          alone.add(b[0], b[1], b[2], b[3], set.scores[i], 0);
          index_of.push_back(i);
        }
        Params agnostic = params;
        agnostic.class_agnostic = true;
        for (uint32_t k : run(alone, agnostic).kept) expected.push_back(index_of[k]);
      }
      std::sort(expected.begin(), expected.end(), [&](uint32_t a, uint32_t b) {
        return set.scores[a] > set.scores[b] || (set.scores[a] == set.scores[b] && a < b);
      });
      EXPECT_EQ(all.kept, expected) << g.name << " " << to_string(method);
    }
  }
}

TEST_F(CpuNms, DmaxKeepsTheBestRankedAndCountsTheRest) {
  std::mt19937_64 rng(run_seed() + 2);
  const CandidateSet set = tools::sliding_window_candidates(1000, rng());
  Params params;
  params.max_candidates = 100;
  const Result result = run(set, params);
  EXPECT_EQ(result.counts.over_capacity, 900u);

  // The same as NMS over the 100 best-scoring candidates alone.
  std::vector<uint32_t> order(set.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return set.scores[a] > set.scores[b]; });
  CandidateSet best;
  for (size_t k = 0; k < 100; ++k) {
    const float *b = &set.boxes[4 * order[k]];
    best.add(b[0], b[1], b[2], b[3], set.scores[order[k]], set.classes[order[k]]);
  }
  params.max_candidates = 4096;
  const Result expected = run(best, params);
  ASSERT_EQ(result.kept.size(), expected.kept.size());
  for (size_t k = 0; k < expected.kept.size(); ++k) {
    const uint32_t original = result.kept[k];
    const uint32_t in_best = expected.kept[k];
    EXPECT_EQ(set.scores[original], best.scores[in_best]);
    EXPECT_EQ(set.boxes[4 * original], best.boxes[4 * in_best]);
  }
}

TEST_F(CpuNms, DmaxBreaksScoreTiesByLowerIndex) {
  CandidateSet set;
  for (int i = 0; i < 10; ++i) set.add(10.0f * i, 0, 10.0f * i + 5, 5, 0.5f);
  Params params;
  params.max_candidates = 4;
  const Result result = run(set, params);
  EXPECT_EQ(result.kept, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(result.counts.over_capacity, 6u);
}

TEST_F(CpuNms, ScoreThresholdDropsStrictlyLowerScores) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.2f);
  set.add(20, 0, 30, 10, 0.3f);
  set.add(40, 0, 50, 10, 0.29999f);
  Params params;
  params.score_threshold = 0.3f;
  const Result result = run(set, params);
  EXPECT_EQ(result.kept, (std::vector<uint32_t>{1}));
  EXPECT_EQ(result.counts.below_score, 2u);
}

TEST_F(CpuNms, InvalidCandidatesAreDroppedAndCounted) {
  CandidateSet set;
  set.add(0, 0, 10, 10, kNaN);        // 0: NaN score
  set.add(0, 0, kInf, 10, 0.9f);      // 1: infinite coordinate
  set.add(-kInf, 0, 10, 10, 0.9f);    // 2
  set.add(0, kNaN, 10, 10, 0.9f);     // 3: NaN coordinate
  set.add(10, 0, 0, 10, 0.9f);        // 4: x2 < x1
  set.add(0, 10, 10, 0, 0.9f);        // 5: y2 < y1
  set.add(0, 0, 10, 10, kInf);        // 6: infinite score
  set.add(100, 100, 100, 100, 0.8f);  // 7: a point: valid
  set.add(200, 200, 210, 210, 0.7f);  // 8: valid
  for (Method method : {Method::kGreedy, Method::kMatrix}) {
    Params params;
    params.method = method;
    const Result result = run(set, params);
    EXPECT_EQ(result.kept, (std::vector<uint32_t>{7, 8}));
    EXPECT_EQ(result.counts.invalid, 7u);
    EXPECT_EQ(result.counts.kept, 2u);
  }
}

TEST_F(CpuNms, EmptyAndSingle) {
  CandidateSet empty;
  const Result none = run(empty, Params());
  EXPECT_TRUE(none.kept.empty());
  EXPECT_EQ(none.counts.in, 0u);

  CandidateSet one;
  one.add(1, 2, 3, 4, 0.0f);
  EXPECT_EQ(run(one, Params()).kept, (std::vector<uint32_t>{0}));
}

TEST_F(CpuNms, IdenticalBoxesWithEqualScores) {
  CandidateSet set;
  for (int i = 0; i < 5; ++i) set.add(0, 0, 10, 10, 0.5f);
  Params params;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));  // greedy: the lowest index
  params.method = Method::kMatrix;
  // The paper's rule: only a strictly higher score suppresses, so equal scores all survive.
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
}

TEST_F(CpuNms, NegativeZeroScoreTiesWithZero) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.0f);
  set.add(0, 0, 10, 10, -0.0f);
  set.add(0, 0, 10, 10, -0.0f);
  Params params;
  params.score_threshold = -1.0f;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));
}

TEST_F(CpuNms, GreedyIsStrictAndMatrixInclusiveAtTheThreshold) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f);
  set.add(0, 0, 10, 5, 0.8f);  // IoU exactly 0.5
  Params params;
  params.threshold = 0.5f;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 1}));
  params.method = Method::kMatrix;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));
}

TEST_F(CpuNms, SuppressedBoxStillSuppressesInMatrixOnly) {
  CandidateSet set;  // a chain: 0 overlaps 1, 1 overlaps 2, 0 does not overlap 2
  set.add(0, 0, 10, 10, 0.9f);
  set.add(4, 0, 14, 10, 0.8f);
  set.add(8, 0, 18, 10, 0.7f);
  Params params;
  params.threshold = 0.3f;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 2}));
  params.method = Method::kMatrix;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));
}

TEST_F(CpuNms, IosUsesThePapersPlusOneWindows) {
  // Square windows {x, y, side}: (0,0,9) and (5,0,9): intersection 5x10 over the first's 10x10.
  CandidateSet set;
  set.add(0, 0, 9, 9, 0.9f);
  set.add(5, 0, 14, 9, 0.8f);
  Params params;
  params.method = Method::kMatrix;
  params.overlap = Overlap::kIoS;
  params.threshold = 0.5f;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0}));  // 0.5 >= 0.5
  params.threshold = 0.51f;
  EXPECT_EQ(run(set, params).kept, (std::vector<uint32_t>{0, 1}));
}

TEST_F(CpuNms, MaxDetectionsKeepsTheBest) {
  CandidateSet set;
  for (int i = 0; i < 10; ++i) set.add(20.0f * i, 0, 20.0f * i + 10, 10, 0.1f * i);
  Params params;
  params.max_detections = 3;
  const Result result = run(set, params);
  EXPECT_EQ(result.kept, (std::vector<uint32_t>{9, 8, 7}));
  EXPECT_EQ(result.counts.kept, 3u);
}

TEST_F(CpuNms, FarMoreCandidatesThanDmax) {
  std::mt19937_64 rng(run_seed() + 3);
  const CandidateSet set = tools::sliding_window_candidates(50000, rng());
  Params params;
  params.max_candidates = 64;
  const Result result = run(set, params);
  EXPECT_EQ(result.counts.over_capacity, 50000u - 64u);
  EXPECT_TRUE(same_result(result, reference_nms(set, params)));
}

}  // namespace
}  // namespace cudanms::testing
