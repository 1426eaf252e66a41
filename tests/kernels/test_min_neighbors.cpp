// Rule 5 of cudanms/nms.h (min_neighbors) and kGroup worked by hand, on the CPU and on CUDA:
// three windows in a chain, A - B - C, each similar to (and overlapping) the next but A not C,
// and a lone window L. IoU(A, B) = IoU(B, C) = 80 / 120 = 0.67, IoU(A, C) = 60 / 140 = 0.43.
#include <gtest/gtest.h>

#include <vector>

#include "candidate_set.h"
#include "compare.h"
#include "cudanms/nms.h"
#include "random_sets.h"
#include "support/seed.h"
#include "support/test_scale.h"

namespace cudanms::testing {
namespace {

using tools::CandidateSet;

CandidateSet chain_and_lone() {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f);        // A
  set.add(2, 0, 12, 10, 0.8f);        // B
  set.add(4, 0, 14, 10, 0.7f);        // C
  set.add(100, 100, 110, 110, 1.0f);  // L, the best score
  return set;
}
enum { A, B, C, L };

struct Case {
  const char *name;
  Method method;
  uint32_t min_neighbors;
  std::vector<uint32_t> kept;
  std::vector<uint32_t> neighbours;
  size_t max_detections = 0;
};

// The worked answers: greedy keeps L, A and C; A overlaps B (0.67) but not C (0.43) by more than
// 0.5. Matrix: B, though suppressed by A, suppresses C, so A and L. Soft (linear): A decays B to
// 0.27, then C is selected with B still above the floor and overlapping it. Weighted: B merges
// into A. Group: the chain is one class of 3, L a class of 1.
std::vector<Case> cases() {
  return {
      {"greedy at 0 counts nothing", Method::kGreedy, 0, {L, A, C}, {}},
      {"greedy drops the lone window and C", Method::kGreedy, 1, {A}, {1}},
      {"greedy at 2 drops all", Method::kGreedy, 2, {}, {}},
      {"greedy caps after dropping", Method::kGreedy, 1, {A}, {1}, 1},
      {"matrix", Method::kMatrix, 1, {A}, {1}},
      {"soft selects C with B as its neighbour", Method::kSoft, 1, {A, C}, {1, 1}},
      {"weighted", Method::kWeighted, 1, {A}, {1}},
      {"group keeps the chain's class", Method::kGroup, 1, {A}, {2}},
      {"group at 2 keeps it too", Method::kGroup, 2, {A}, {2}},
      {"group drops a class of n <= min_neighbors", Method::kGroup, 3, {}, {}},
      {"group at 0 is grouping off", Method::kGroup, 0, {L, A, B, C}, {0, 0, 0, 0}},
  };
}

void check_all(Context &nms) {
  const CandidateSet set = chain_and_lone();
  for (const Case &c : cases()) {
    Params params;
    params.method = c.method;
    params.min_neighbors = c.min_neighbors;
    params.max_detections = c.max_detections;
    params.soft_decay = SoftDecay::kLinear;
    Result result;
    ASSERT_TRUE(nms.run(set.view(), params, &result).ok()) << c.name;
    EXPECT_EQ(result.kept, c.kept) << c.name;
    EXPECT_EQ(result.kept_neighbors, c.neighbours) << c.name;
    EXPECT_EQ(result.counts.kept, c.kept.size()) << c.name;
  }
  // The values: group's class rectangle is the chain's mean, (2, 0, 12, 10); soft's C kept its
  // score (A's overlap of it is under the threshold).
  Params params;
  params.method = Method::kGroup;
  params.min_neighbors = 1;
  Result result;
  ASSERT_TRUE(nms.run(set.view(), params, &result).ok());
  EXPECT_EQ(result.kept_boxes, (std::vector<float>{2, 0, 12, 10}));
  EXPECT_EQ(result.kept_scores, (std::vector<float>{0.9f}));
  params.method = Method::kSoft;
  params.soft_decay = SoftDecay::kLinear;
  ASSERT_TRUE(nms.run(set.view(), params, &result).ok());
  EXPECT_EQ(result.kept_scores, (std::vector<float>{0.9f, 0.7f}));
}

TEST(MinNeighbours, WorkedCasesOnTheCpu) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  check_all(*nms);
}

TEST(MinNeighbours, WorkedCasesOnCuda) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << why;
  Status status;
  auto nms = Context::create({Backend::kCuda}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  check_all(*nms);
}

// Group's classes stay within a class (group) unless class-agnostic: two identical windows of
// two classes are two lone classes.
TEST(MinNeighbours, GroupKeepsClassesApart) {
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.9f, 0);
  set.add(0, 0, 10, 10, 0.8f, 1);
  Params params;
  params.method = Method::kGroup;
  params.min_neighbors = 1;
  for (Backend backend : {Backend::kCpu, Backend::kCuda}) {
    if (backend == Backend::kCuda && !cuda_available()) continue;
    Status status;
    auto nms = Context::create({backend}, &status);
    Result result;
    params.class_agnostic = false;
    ASSERT_TRUE(nms->run(set.view(), params, &result).ok());
    EXPECT_TRUE(result.kept.empty()) << to_string(backend);
    params.class_agnostic = true;
    ASSERT_TRUE(nms->run(set.view(), params, &result).ok());
    EXPECT_EQ(result.kept, (std::vector<uint32_t>{0})) << to_string(backend);
    EXPECT_EQ(result.kept_neighbors, (std::vector<uint32_t>{1})) << to_string(backend);
  }
}

// The large frames' stages (the spatial pair stage past 4 096 ranks, grouping's sweep past 8 192,
// CUB's rank sort past 16 Ki) against the CPU on sliding-window sets, the cascade-like case.
TEST(MinNeighbours, CudaEqualsTheCpuOnLargeFrames) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << why;
  Status status;
  auto cpu = Context::create({Backend::kCpu}, &status);
  auto cuda = Context::create({Backend::kCuda}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  const uint64_t seed = run_seed() + 27;
  // At the sanitizers' small scale: grouping's all pairs and its sweep.
  const std::vector<size_t> sizes = small_test_scale() ? std::vector<size_t>{3000, 9000}
                                                       : std::vector<size_t>{3000, 6000, 9000,
                                                                             20000, 70000};
  for (const size_t n : sizes) {
    const CandidateSet set = tools::sliding_window_candidates(n, seed + n, 2, 1920, 1080);
    for (Method method :
         {Method::kGreedy, Method::kMatrix, Method::kSoft, Method::kWeighted, Method::kGroup}) {
      if (method == Method::kSoft && n > 20000) continue;  // one block's selections: slow
      if (small_test_scale() && method != Method::kGroup) continue;
      for (const uint32_t min_neighbors : {0u, 2u}) {
        Params params;
        params.method = method;
        params.min_neighbors = min_neighbors;
        params.max_candidates = n;
        params.max_detections = min_neighbors == 2 ? 50 : 0;
        Result want, got;
        ASSERT_TRUE(cpu->run(set.view(), params, &want).ok());
        ASSERT_TRUE(cuda->run(set.view(), params, &got).ok());
        EXPECT_TRUE(same_result(got, want)) << n << " " << to_string(method) << " min_neighbors "
                                            << min_neighbors << " seed " << seed;
        if (min_neighbors > 0 || method == Method::kGroup) {
          EXPECT_FALSE(want.kept.empty());
        }
      }
    }
  }
}

}  // namespace
}  // namespace cudanms::testing
