// The CUDA backend against the CPU backend and the reference: identical kept sets and counts.
// Without a usable CUDA device these tests skip, visibly.
#include <gtest/gtest.h>

#include <limits>

#include "compare.h"
#include "cudanms/nms.h"
#include "random_sets.h"
#include "reference.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

class CudaNms : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    Status status;
    gpu_ = Context::create({Backend::kCuda}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    cpu_ = Context::create({Backend::kCpu}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
  }

  ::testing::AssertionResult same_as_cpu(const CandidateSet &set, const Params &params) {
    Result on_gpu, on_cpu;
    const Status status = gpu_->run(set.view(), params, &on_gpu);
    if (!status.ok()) return ::testing::AssertionFailure() << status.message();
    EXPECT_TRUE(cpu_->run(set.view(), params, &on_cpu).ok());
    return same_result(on_gpu, on_cpu);
  }

  std::unique_ptr<Context> gpu_;
  std::unique_ptr<Context> cpu_;
};

TEST_F(CudaNms, MatchesCpuAndReferenceOnRandomSets) {
  size_t cases = 0;
  for_each_random_case(run_seed() + 10, 6, 600, [&](const RandomCase &c) {
    ++cases;
    ASSERT_TRUE(same_as_cpu(c.set, c.params)) << c.description;
    Result on_gpu;
    ASSERT_TRUE(gpu_->run(c.set.view(), c.params, &on_gpu).ok());
    ASSERT_TRUE(same_result(on_gpu, reference_nms(c.set, c.params))) << c.description;
  });
  EXPECT_GT(cases, 2000u);
}

TEST_F(CudaNms, LargeSlidingWindowFrames) {
  std::mt19937_64 rng(run_seed() + 11);
  for (size_t n : {1000u, 3000u, 10000u, 30000u}) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      for (bool agnostic : {false, true}) {
        const CandidateSet set = tools::sliding_window_candidates(n, rng(), agnostic ? 1 : 80);
        Params params;
        params.method = method;
        params.class_agnostic = agnostic;
        params.max_candidates = n;
        EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << n << " " << to_string(method);
      }
    }
  }
}

TEST_F(CudaNms, ReusesTheContextAcrossGrowingFrames) {
  std::mt19937_64 rng(run_seed() + 12);
  Params params;
  for (size_t n : {10u, 5000u, 100u, 9000u, 0u, 1u}) {
    params.max_candidates = 4096;  // n above it exercises the top-K and the overflow count
    const CandidateSet set = tools::sliding_window_candidates(n, rng());
    EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << n;
  }
}

TEST_F(CudaNms, TiesKeepIndexOrderOnBothSidesOfTheCountingRankSwitch) {
  std::mt19937_64 rng(run_seed() + 13);
  for (size_t n : {1000u, 4096u, 16384u, 16385u, 20000u}) {
    CandidateSet set;
    for (size_t i = 0; i < n; ++i) {
      const float x = uniform_int(rng, 0, 200) * 8.0f, y = uniform_int(rng, 0, 100) * 8.0f;
      set.add(x, y, x + 40, y + 40, uniform_int(rng, 0, 3) * 0.25f);
    }
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      Params params;
      params.method = method;
      params.max_candidates = 20000;
      EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << n << " " << to_string(method);
    }
  }
}

// Inputs built to overflow the predecessor lists, or to chain suppressions so deep that the
// sweeps run out: the result must still be exact.
TEST_F(CudaNms, AdversarialFramesStayExact) {
  CandidateSet pile;  // every box suppressed by all better ones: long predecessor lists
  for (int i = 0; i < 1500; ++i) pile.add(10, 10, 60, 60, 1.0f - i * 1e-4f);
  CandidateSet chain;  // each box overlaps the next: greedy alternates kept and suppressed
  for (int i = 0; i < 3000; ++i) chain.add(3.0f * i, 0, 3.0f * i + 10, 10, 1.0f - i * 1e-5f);
  for (const CandidateSet *set : {&pile, &chain}) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      Params params;
      params.method = method;
      EXPECT_TRUE(same_as_cpu(*set, params)) << to_string(method);
    }
  }
}

// The dense-duplicates inputs of the benchmark: piles of near-identical boxes past the GPU
// path's predecessor lists stay exact (today by a CPU redo; the core-speed issue's target is a
// GPU path for them).
TEST_F(CudaNms, DenseDuplicatesStayExact) {
  for (const auto &[kind, n] : std::vector<std::pair<std::string, size_t>>{
           {"identical", 20000}, {"groups", 50000}, {"huge", 5000}, {"cluster", 10000}}) {
    CandidateSet set;
    ASSERT_TRUE(tools::dense_candidates(kind, n, run_seed() + n, &set));
    Params params;
    params.class_agnostic = true;
    params.max_candidates = n;
    EXPECT_TRUE(same_as_cpu(set, params)) << kind;
  }
}

TEST_F(CudaNms, InvalidCandidatesAsOnCpu) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CandidateSet set;
  set.add(0, 0, 10, 10, nan);
  set.add(10, 0, 0, 10, 0.9f);
  set.add(5, 5, 5, 5, 0.8f);
  set.add(0, 0, 10, 10, -0.0f);
  set.add(0, 0, 10, 10, 0.0f);
  Params params;
  params.score_threshold = -1.0f;
  EXPECT_TRUE(same_as_cpu(set, params));
}

// Past 128k ranked candidates the settle kernel's statuses do not fit in shared memory: such a
// frame runs on the CPU, with the same result, and the context goes on on the GPU.
TEST_F(CudaNms, AFrameRankingPastSharedMemoryRunsOnTheCpu) {
  std::mt19937_64 rng(run_seed() + 14);
  const CandidateSet big = tools::sliding_window_candidates(140000, rng());
  Params params;
  params.max_candidates = kMaxCount;
  EXPECT_TRUE(same_as_cpu(big, params));
  CandidateSet one;
  one.add(0, 0, 1, 1, 1);
  EXPECT_TRUE(same_as_cpu(one, params));
  params.max_candidates = 4096;  // the top-K of the big frame is ranked on the GPU
  EXPECT_TRUE(same_as_cpu(big, params));
}

}  // namespace
}  // namespace cudanms::testing
