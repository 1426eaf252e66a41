// The CUDA backend against the CPU backend and the reference: identical kept sets and counts.
// Without a usable CUDA device these tests skip, visibly.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

  // The GPU's result equals the CPU backend's, and was computed on the GPU (frames ranking
  // more than 128 Ki candidates excepted).
  ::testing::AssertionResult same_as_cpu(const CandidateSet &set, const Params &params) {
    Result on_gpu, on_cpu;
    const Status status = gpu_->run(set.view(), params, &on_gpu);
    if (!status.ok()) return ::testing::AssertionFailure() << status.message();
    if (std::min(set.size(), params.max_candidates) <= 128 * 1024 &&
        on_gpu.computed_on != Backend::kCuda) {
      return ::testing::AssertionFailure() << "the frame was computed on the CPU";
    }
    EXPECT_TRUE(cpu_->run(set.view(), params, &on_cpu).ok());
    return same_result(on_gpu, on_cpu);
  }

  // Runs `frames` as one batch on the GPU: each result equals the CPU backend's for its frame
  // run alone, and was computed on the GPU.
  void expect_batch_as_frames_alone(const std::vector<Frame> &frames) {
    std::vector<Result> results;
    ASSERT_TRUE(gpu_->run(frames, &results).ok());
    ASSERT_EQ(results.size(), frames.size());
    for (size_t k = 0; k < frames.size(); ++k) {
      Result alone;
      ASSERT_TRUE(cpu_->run(frames[k].candidates, frames[k].params, &alone).ok());
      EXPECT_TRUE(same_result(results[k], alone))
          << "batch frame " << k << " n=" << frames[k].candidates.count;
      EXPECT_EQ(results[k].computed_on, Backend::kCuda) << "batch frame " << k;
    }
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
  EXPECT_GT(cases, 2000u / random_case_stride());
}

TEST_F(CudaNms, LargeSlidingWindowFrames) {
  std::mt19937_64 rng(run_seed() + 11);
  for (size_t n : {1000u, 3000u, 10000u, 30000u}) {
    for (Method method : {Method::kGreedy, Method::kMatrix, Method::kSoft, Method::kWeighted}) {
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

// Soft and weighted frames of every stage's sizes, small enough for compute-sanitizer's racecheck
// (tools/run-cuda-sanitizers.sh): the block-wide selections and the merges.
TEST_F(CudaNms, SoftAndWeightedFramesStayExact) {
  std::mt19937_64 rng(run_seed() + 18);
  const std::vector<size_t> sizes = small_test_scale() ? std::vector<size_t>{1, 2, 33, 1025}
                                                       : std::vector<size_t>{1, 2, 33, 1025, 5000};
  for (size_t n : sizes) {
    const CandidateSet set = tools::sliding_window_candidates(n, rng(), 4);
    for (int variant = 0; variant < 4; ++variant) {
      Params params;
      params.method = variant < 2 ? Method::kSoft : Method::kWeighted;
      params.soft_decay = variant == 0 ? SoftDecay::kLinear : SoftDecay::kGaussian;
      params.score_threshold = variant == 1 ? 0.4f : 0.0f;
      params.class_groups = {{0, 3}};
      params.max_detections = variant == 3 ? 7 : 0;
      EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << n << " variant " << variant;
    }
  }
}

// Soft and weighted frames of up to 1 024 candidates run in one kernel (small_frames.cu): every
// block size and its edges, scores that tie after decaying, signed scores (-0.0 too) under a
// negative floor, a cap on the kept ones that cuts the claims, class groups and points.
TEST_F(CudaNms, SmallSoftAndWeightedFramesStayExact) {
  std::mt19937_64 rng(run_seed() + 23);
  const std::vector<size_t> sizes = small_test_scale()
                                        ? std::vector<size_t>{31, 257, 1024}
                                        : std::vector<size_t>{1, 31, 256, 257, 512, 700, 1024};
  for (size_t n : sizes) {
    CandidateSet windows = tools::sliding_window_candidates(n, rng(), 4);
    CandidateSet ties;  // boxes on a coarse grid, four score levels: equal current scores
    CandidateSet signed_scores;
    for (size_t i = 0; i < n; ++i) {
      const float x = uniform_int(rng, 0, 12) * 16.0f, y = uniform_int(rng, 0, 8) * 16.0f;
      const float side = uniform_int(rng, 2, 4) * 16.0f;
      ties.add(x, y, x + side, y + side, uniform_int(rng, 1, 4) * 0.25f, uniform_int(rng, 0, 3));
      const int level = uniform_int(rng, -4, 4);
      signed_scores.add(x, y, x + side, y + side, level == 0 ? -0.0f : level * 0.2f,
                        uniform_int(rng, 0, 3));
    }
    add_points(rng, 3, &ties);
    for (const CandidateSet *set : {&windows, &ties, &signed_scores}) {
      for (int variant = 0; variant < 6; ++variant) {
        Params params;
        params.method = variant < 4 ? Method::kSoft : Method::kWeighted;
        params.soft_decay = variant % 2 == 0 ? SoftDecay::kLinear : SoftDecay::kGaussian;
        params.overlap = variant == 3 ? Overlap::kDIoU : Overlap::kIoU;
        params.score_threshold = set == &signed_scores ? -0.5f : variant == 1 ? 0.3f : 0.0f;
        params.max_detections = variant == 2 || variant == 5 ? 9 : 0;
        params.class_groups = {{0, 3}};
        EXPECT_TRUE(same_as_cpu(*set, params)) << "n=" << n << " variant " << variant;
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

// Inputs built to overflow the predecessor lists, or to chain suppressions so deep that
// sweeps alone would settle a rank or two each: exact, and on the GPU.
TEST_F(CudaNms, AdversarialFramesStayExact) {
  CandidateSet pile;  // every box suppressed by all better ones: long predecessor lists
  for (int i = 0; i < 1500; ++i) pile.add(10, 10, 60, 60, 1.0f - i * 1e-4f);
  CandidateSet chain;  // each box overlaps the next: greedy alternates kept and suppressed
  for (int i = 0; i < 3000; ++i) chain.add(3.0f * i, 0, 3.0f * i + 10, 10, 1.0f - i * 1e-5f);
  CandidateSet long_chain;  // the same past the counting rank, sorted
  for (int i = 0; i < 40000; ++i) {
    long_chain.add(3.0f * i, 0, 3.0f * i + 10, 10, 1.0f - i * 1e-6f);
  }
  CandidateSet wide_chain;  // each box suppressed by the 666 before it: overflowing lists
  for (int i = 0; i < 5000; ++i) {
    wide_chain.add(0.1f * i, 0, 0.1f * i + 200, 10, 1.0f - i * 1e-5f);
  }
  for (const CandidateSet *set : {&pile, &chain, &long_chain, &wide_chain}) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      Params params;
      params.method = method;
      params.max_candidates = set->size();
      EXPECT_TRUE(same_as_cpu(*set, params)) << to_string(method) << " n=" << set->size();
    }
  }
}

// A single frame past 4 096 candidates finds its pairs in spatial order, skipping tiles of boxes
// that cannot meet (spatial_pairs.h), and settles greedy over the whole GPU: every generator,
// overlap rule, threshold (0 included, where matrix tests every pair) and class mode, and boxes
// that IoS alone sees as meeting (its one added pixel) lined up so that tiles end between them,
// and pairs of boxes whose IoU is exactly their areas' ratio.
TEST_F(CudaNms, LargeFramesInSpatialOrderStayExact) {
  std::mt19937_64 rng(run_seed() + 20);
  CandidateSet gap_chain;  // 0.5 px apart: IoS overlaps by 0.5 px, the other rules not at all
  for (int i = 0; i < 7000; ++i) {
    gap_chain.add(10.5f * i, 0, 10.5f * i + 10, 10, 1.0f - i * 1e-5f);
  }
  size_t cases = 0;
  for (const Generator &g : generators()) {
    for (Method method : {Method::kGreedy, Method::kMatrix, Method::kWeighted}) {
      for (Overlap overlap : {Overlap::kIoU, Overlap::kIoMin, Overlap::kIoS, Overlap::kDIoU}) {
        for (float threshold : {0.0f, 0.5f}) {
          for (bool agnostic : {false, true}) {
            const size_t n = uniform_int(rng, 4097, 9000);
            const CandidateSet set = g.name == "uniform" && overlap == Overlap::kIoS
                                         ? gap_chain
                                         : g.make(rng, n, agnostic ? 1 : 3);
            Params params;
            params.method = method;
            params.overlap = overlap;
            params.threshold = threshold;
            params.class_agnostic = agnostic;
            params.max_candidates = set.size();
            ++cases;
            ASSERT_TRUE(same_as_cpu(set, params))
                << g.name << " n=" << set.size() << " " << to_string(method) << " "
                << to_string(overlap) << " threshold=" << threshold
                << (agnostic ? " agnostic" : " per-class");
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 7u * 3 * 4 * 2 * 2);

  // Tiles of boxes whose areas differ too much for IoU to pass the threshold are skipped: boxes
  // from one corner with twice and four times the area, whose IoU is exactly 1/2 and 1/4.
  CandidateSet ratios;
  while (ratios.size() < 7000) {
    const float x = uniform_int(rng, 0, 1800), y = uniform_int(rng, 0, 900);
    const float w = uniform_int(rng, 4, 60), h = uniform_int(rng, 4, 60);
    for (float stretch : {1.0f, 2.0f, 4.0f}) {
      ratios.add(x, y, x + w, y + stretch * h, uniform(rng, 0, 1));
    }
  }
  for (Method method : {Method::kGreedy, Method::kMatrix}) {
    for (Overlap overlap : {Overlap::kIoU, Overlap::kDIoU}) {
      for (float threshold : {0.25f, 0.5f, 0.4999f, 0.2501f}) {
        Params params;
        params.method = method;
        params.overlap = overlap;
        params.threshold = threshold;
        params.max_candidates = ratios.size();
        EXPECT_TRUE(same_as_cpu(ratios, params))
            << to_string(method) << " " << to_string(overlap) << " threshold=" << threshold;
      }
    }
  }

  // The bins' grid spans the eligible centres: two far boxes stretch it over the float range
  // (all the others in one cell, one far box's area infinite), and equal centres shrink it to a
  // point (0 / 0 for every cell).
  CandidateSet far = tools::sliding_window_candidates(7000, rng());
  far.add(-3e38f, -3e38f, -1e38f, -1e38f, 0.5f);
  far.add(2.9e38f, 2.9e38f, 3e38f, 3e38f, 0.5f);
  CandidateSet centred;
  for (int i = 0; i < 7000; ++i) {
    const float half = 1 + i % 50;
    centred.add(100 - half, 100 - half, 100 + half, 100 + half, uniform(rng, 0, 1));
  }
  for (const CandidateSet *set : {&far, &centred}) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      Params params;
      params.method = method;
      params.max_candidates = set->size();
      EXPECT_TRUE(same_as_cpu(*set, params))
          << (set == &far ? "far" : "centred") << " " << to_string(method);
    }
  }
}

// Frames of up to 1 024 candidates run in one launch (small_frames.cu): each staged capacity it
// compiles for, on both sides of its word and capacity bounds, with suppression chains inside a
// 32-rank word and across words, piles of duplicates, ties, Dmax below the count, and frames that
// keep nothing or everything.
TEST_F(CudaNms, SmallFramesInOneLaunchStayExact) {
  std::mt19937_64 rng(run_seed() + 18);
  std::vector<CandidateSet> sets;
  for (size_t n :
       {1u, 2u, 31u, 32u, 33u, 255u, 256u, 257u, 511u, 512u, 513u, 1023u, 1024u, 1025u}) {
    sets.push_back(tools::sliding_window_candidates(n, rng(), 3));
    CandidateSet chain;  // each box overlaps the next: kept and suppressed alternate
    CandidateSet pile;   // one box, n times
    CandidateSet apart;  // nothing overlaps: every box kept
    CandidateSet ties;   // equal scores: the index decides
    for (size_t i = 0; i < n; ++i) {
      chain.add(3.0f * i, 0, 3.0f * i + 10, 10, 1.0f - i * 1e-4f);
      pile.add(10, 10, 60, 60, uniform(rng, 0, 1));
      apart.add(20.0f * i, 0, 20.0f * i + 10, 10, uniform(rng, 0, 1));
      ties.add(uniform_int(rng, 0, 30) * 4.0f, 0, uniform_int(rng, 31, 60) * 4.0f, 40, 0.5f);
    }
    for (CandidateSet *set : {&chain, &pile, &apart, &ties}) sets.push_back(*set);
  }
  for (const CandidateSet &set : sets) {
    for (Method method : {Method::kGreedy, Method::kMatrix}) {
      Params params;
      params.method = method;
      params.max_candidates = set.size();
      EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << set.size() << " " << to_string(method);
      params.max_candidates = set.size() / 3 + 1;
      params.max_detections = 5;
      EXPECT_TRUE(same_as_cpu(set, params)) << "n=" << set.size() << " Dmax " << to_string(method);
    }
  }
  // The same frames as one batch, greedy and matrix mixed: a launch per method.
  std::vector<Frame> frames;
  for (size_t k = 0; k < sets.size(); ++k) {
    if (sets[k].size() > 1024) continue;
    Params params;
    params.method = k % 2 ? Method::kMatrix : Method::kGreedy;
    params.max_candidates = sets[k].size();
    frames.push_back({sets[k].view(), params});
  }
  expect_batch_as_frames_alone(frames);
}

// A batch whose only greedy frame and only matrix frame each rank past 4 096 candidates: each
// runs its pairs in spatial order on its own, in a context that ran no large frame before.
TEST_F(CudaNms, LoneLargeFramesOfABatchRunInSpatialOrder) {
  std::mt19937_64 rng(run_seed() + 21);
  std::vector<CandidateSet> sets;
  for (int k = 0; k < 2; ++k) sets.push_back(tools::sliding_window_candidates(7000, rng(), 3));
  std::vector<Frame> frames;
  for (Method method : {Method::kGreedy, Method::kMatrix}) {
    Params params;
    params.method = method;
    params.max_candidates = 7000;
    frames.push_back({sets[frames.size()].view(), params});
  }
  expect_batch_as_frames_alone(frames);
}

// Host frames of up to 16 Ki candidates replay one graph per staged capacity and parameters:
// counts within one capacity, parameters that differ in one field only, and more shapes than
// the context keeps graphs of, in turn and again, each equal to the CPU's.
TEST_F(CudaNms, GraphsReplayExactlyForEveryCountAndParameters) {
  std::mt19937_64 rng(run_seed() + 15);
  std::vector<std::pair<CandidateSet, Params>> frames;
  for (size_t n : {1u, 255u, 256u, 257u, 300u, 320u, 321u, 1000u, 1024u, 3000u, 4097u, 16384u}) {
    const CandidateSet set = tools::sliding_window_candidates(n, rng(), 3);
    Params params;
    frames.emplace_back(set, params);
    params.threshold = 0.3f;
    frames.emplace_back(set, params);
    params.method = Method::kMatrix;
    params.overlap = Overlap::kIoS;
    frames.emplace_back(set, params);
    params = Params();
    params.class_agnostic = true;
    params.max_detections = 7;
    params.score_threshold = 0.5f;
    params.max_candidates = n / 2 + 1;
    frames.emplace_back(set, params);
  }
  for (int pass = 0; pass < 2; ++pass) {
    std::shuffle(frames.begin(), frames.end(), rng);
    for (const auto &[set, params] : frames) {
      ASSERT_TRUE(same_as_cpu(set, params))
          << "n=" << set.size() << " " << to_string(params.method) << " pass " << pass;
    }
  }
}

// A batch: frames of every size and parameters at once (greedy and matrix mixed, per class and
// class-agnostic, empty frames, one past the batchable size), each equal to the CPU's.
TEST_F(CudaNms, BatchesEqualTheirFramesRunAlone) {
  std::mt19937_64 rng(run_seed() + 16);
  std::vector<CandidateSet> sets;
  std::vector<Params> params;
  // The small test scale leaves out the frames of 1 500 candidates and more (the pile below still
  // takes the batch's multi-kernel path; the sorted ones are LargeSlidingWindowFrames' kernels).
  const std::vector<size_t> sizes =
      small_test_scale() ? std::vector<size_t>{300, 0, 1000, 1, 700, 64}
                         : std::vector<size_t>{300, 0, 1000, 1, 3000, 16384, 20000, 700, 1500, 64};
  for (size_t n : sizes) {
    for (int variant = 0; variant < 5; ++variant) {
      sets.push_back(tools::sliding_window_candidates(n, rng(), 1 + variant * 40));
      Params p;
      p.class_agnostic = variant == 0;
      p.max_candidates = variant == 2 ? n / 3 + 1 : std::max<size_t>(n, 1);
      if (variant == 1) {
        p.method = Method::kMatrix;
        p.overlap = Overlap::kIoS;
        p.threshold = 0.3f;
      }
      if (variant == 2) {
        p.threshold = 0.7f;
        p.score_threshold = 0.3f;
        p.max_detections = 20;
      }
      if (variant == 3) {  // run on their own, between the others
        p.method = Method::kSoft;
        p.class_groups = {{0, 1, 2, 3}, {7, 5}};
      }
      if (variant == 4) {  // with landmarks, merged on the host
        p.method = Method::kWeighted;
        add_points(rng, 5, &sets.back());
      }
      if (variant == 0) add_points(rng, 2, &sets.back());  // gathered in the batch
      params.push_back(p);
    }
  }
  CandidateSet pile;  // overflowing lists inside a batch
  for (int i = 0; i < 2000; ++i) pile.add(10, 10, 60, 60, 1.0f - i * 1e-4f);
  sets.push_back(pile);
  params.emplace_back();
  std::vector<Frame> frames;
  for (size_t k = 0; k < sets.size(); ++k) frames.push_back({sets[k].view(), params[k]});
  for (int pass = 0; pass < 2; ++pass) {  // the second reuses the workspace
    SCOPED_TRACE("pass " + std::to_string(pass));
    expect_batch_as_frames_alone(frames);
  }
}

// The batch the core-speed issue times: 64 frames of 1 000 sliding windows.
TEST_F(CudaNms, SixtyFourFramesInOneBatch) {
  std::mt19937_64 rng(run_seed() + 17);
  std::vector<CandidateSet> sets;
  for (int k = 0; k < 64; ++k) sets.push_back(tools::sliding_window_candidates(1000, rng()));
  Params params;
  params.class_agnostic = true;
  std::vector<Frame> frames;
  for (const CandidateSet &set : sets) frames.push_back({set.view(), params});
  expect_batch_as_frames_alone(frames);
}

// The dense-duplicates inputs of the benchmark: piles of near-identical boxes, exact and on the
// GPU.
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
