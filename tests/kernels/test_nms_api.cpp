// The backend-independent API: parameter checks, names, context creation errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>
#include <string>
#include <vector>

#include "candidate_set.h"
#include "cudanms/nms.h"

namespace cudanms::testing {
namespace {

using tools::CandidateSet;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Params, RejectsWhatHasNoMeaning) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  CandidateSet set;
  set.add(0, 0, 1, 1, 1);
  Result result;
  for (float threshold : {-0.1f, 1.5f, kNaN}) {
    Params params;
    params.threshold = threshold;
    const Status s = nms->run(set.view(), params, &result);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("threshold"), std::string::npos) << s.message();
  }
  Params params;
  params.max_candidates = 0;
  EXPECT_FALSE(nms->run(set.view(), params, &result).ok());
  params = Params();
  params.score_threshold = kNaN;
  EXPECT_FALSE(nms->run(set.view(), params, &result).ok());
  EXPECT_FALSE(nms->run({nullptr, nullptr, nullptr, 3}, Params(), &result).ok());
  EXPECT_FALSE(nms->run(set.view(), Params(), nullptr).ok());
  for (double eps : {-0.1, double(kNaN), std::numeric_limits<double>::infinity()}) {
    params = Params();
    params.method = Method::kGroup;
    params.group_eps = eps;
    const Status s = nms->run(set.view(), params, &result);
    EXPECT_FALSE(s.ok()) << eps;
    EXPECT_NE(s.message().find("group eps"), std::string::npos) << s.message();
  }
  for (float sigma : {0.0f, -1.0f, kNaN, std::numeric_limits<float>::infinity()}) {
    params = Params();
    params.method = Method::kSoft;
    params.sigma = sigma;
    const Status s = nms->run(set.view(), params, &result);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("sigma"), std::string::npos) << s.message();
  }
  params = Params();
  params.class_groups = {{2, 7}, {0, 7}};
  const Status s = nms->run(set.view(), params, &result);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("class 7 is in two class groups"), std::string::npos) << s.message();
}

// The tool's and the element's help texts state these defaults.
TEST(Params, DefaultsAreTheDocumentedOnes) {
  const Params p;
  EXPECT_EQ(p.method, Method::kGreedy);
  EXPECT_EQ(p.overlap, Overlap::kIoU);
  EXPECT_EQ(p.threshold, 0.5f);
  EXPECT_EQ(p.score_threshold, 0.0f);
  EXPECT_EQ(p.max_candidates, 4096u);
  EXPECT_EQ(p.max_detections, 0u);
  EXPECT_FALSE(p.class_agnostic);
  EXPECT_TRUE(p.class_groups.empty());
  EXPECT_EQ(p.soft_decay, SoftDecay::kGaussian);
  EXPECT_EQ(p.sigma, 0.5f);
  EXPECT_EQ(p.min_neighbors, 0u);
  EXPECT_EQ(p.group_eps, 0.2);
}

TEST(Params, ClassGroupsParseAndPrint) {
  std::vector<std::vector<int32_t>> groups;
  ASSERT_TRUE(parse_class_groups(" 2, 7 ;0", &groups));
  EXPECT_EQ(groups, (std::vector<std::vector<int32_t>>{{2, 7}, {0}}));
  EXPECT_EQ(class_groups_to_string(groups), "2,7;0");
  ASSERT_TRUE(parse_class_groups("", &groups));
  EXPECT_TRUE(groups.empty());
  for (const char *bad : {"2,,7", ";", "a", "1;x", "3.5", "99999999999", "2;;3"}) {
    EXPECT_FALSE(parse_class_groups(bad, &groups)) << bad;
  }
}

TEST(Names, RoundTrip) {
  for (Method m :
       {Method::kGreedy, Method::kMatrix, Method::kSoft, Method::kWeighted, Method::kGroup}) {
    Method parsed;
    ASSERT_TRUE(parse_method(to_string(m), &parsed));
    EXPECT_EQ(parsed, m);
  }
  for (SoftDecay d : {SoftDecay::kLinear, SoftDecay::kGaussian}) {
    SoftDecay parsed;
    ASSERT_TRUE(parse_soft_decay(to_string(d), &parsed));
    EXPECT_EQ(parsed, d);
  }
  for (Overlap o : {Overlap::kIoU, Overlap::kIoMin, Overlap::kIoS, Overlap::kDIoU}) {
    Overlap parsed;
    ASSERT_TRUE(parse_overlap(to_string(o), &parsed));
    EXPECT_EQ(parsed, o);
  }
  Backend b;
  EXPECT_TRUE(parse_backend("cuda", &b));
  EXPECT_EQ(b, Backend::kCuda);
  EXPECT_FALSE(parse_backend("tpu", &b));
}

// Runs everywhere, GPU or not: a device that is not there is a status, never an abort.
TEST(Context, MissingDeviceIsAnErrorStatus) {
  Status status;
  ContextOptions options;
  options.backend = Backend::kCuda;
  options.device = 97;
  auto nms = Context::create(options, &status);
  EXPECT_EQ(nms, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(status.message().empty());
}

TEST(Context, CpuNeedsNoDevice) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(nms->backend(), Backend::kCpu);
  EXPECT_EQ(nms->device_name(), "cpu");
}

TEST(Context, PointsWithoutAnArrayOrTooManyAreErrors) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok());
  const float boxes[] = {0, 0, 1, 1};
  const float scores[] = {1};
  const float points[] = {0.5f, 0.5f};
  Result result;
  CandidatesView view{boxes, scores, nullptr, 1, nullptr, 1};
  status = nms->run(view, Params(), &result);
  EXPECT_NE(status.message().find("no points"), std::string::npos) << status.message();
  view.points = points;
  view.points_per_candidate = kMaxPointsPerCandidate + 1;
  status = nms->run(view, Params(), &result);
  EXPECT_NE(status.message().find("points per candidate"), std::string::npos) << status.message();
  view.points_per_candidate = 1;
  ASSERT_TRUE(nms->run(view, Params(), &result).ok());
  EXPECT_EQ(result.kept_points, (std::vector<float>{0.5f, 0.5f}));
}

TEST(Context, RejectsAReserveOverTheCountLimit) {
  Status status;
  ContextOptions options;
  options.reserve_candidates = kMaxCount + 1;
  EXPECT_EQ(Context::create(options, &status), nullptr);
  EXPECT_NE(status.message().find("reserve_candidates"), std::string::npos) << status.message();
}

// 2^32 - 1 candidates need ~160 GiB of workspace: a Status, not std::bad_alloc taking the process
// (nor, where the kernel overcommits, the OOM killer taking it when the memory is touched).
TEST(Context, AReserveBeyondMemoryIsAStatus) {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (physical >= 40.0 * kMaxCount) {  // the CPU workspace's 40 bytes a candidate
    GTEST_SKIP() << "this machine's " << physical / (1 << 30)
                 << " GiB hold the workspace of 2^32 - 1 candidates";
  }
  Status status;
  ContextOptions options;
  options.reserve_candidates = kMaxCount;
  EXPECT_EQ(Context::create(options, &status), nullptr);
  EXPECT_NE(status.message().find("out of host memory"), std::string::npos) << status.message();
}

// The element's max-candidates=4294967295 once aborted: the workspace was sized by Dmax.
TEST(Context, AHugeDmaxCostsWhatTheFrameBrings) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  CandidateSet set;
  for (int i = 0; i < 300; ++i) set.add(i % 40, i / 40, i % 40 + 10, i / 40 + 10, 0.001f * i);
  Params huge;
  huge.max_candidates = kMaxCount;
  Result with_huge, with_default;
  ASSERT_TRUE(nms->run(set.view(), huge, &with_huge).ok());
  ASSERT_TRUE(nms->run(set.view(), Params(), &with_default).ok());
  EXPECT_EQ(with_huge.kept, with_default.kept);
  EXPECT_EQ(with_huge.counts.over_capacity, 0u);
}

// A batch on any backend: one Result per frame, each what run() gives that frame alone; bad
// input in any frame fails the call before any work, naming the frame.
TEST(Context, BatchesGiveEachFrameItsOwnResult) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  CandidateSet a, b;
  for (int i = 0; i < 50; ++i) a.add(i, 0, i + 10, 10, 0.01f * i);
  for (int i = 0; i < 30; ++i) b.add(0, 2 * i, 10, 2 * i + 10, 1.0f - 0.01f * i, i % 2);
  Params loose;
  loose.threshold = 0.9f;
  const std::vector<Frame> frames = {{a.view(), Params()}, {b.view(), loose}, {{}, Params()}};
  std::vector<Result> results;
  ASSERT_TRUE(nms->run(frames, &results).ok());
  ASSERT_EQ(results.size(), 3u);
  for (size_t k = 0; k < frames.size(); ++k) {
    Result alone;
    ASSERT_TRUE(nms->run(frames[k].candidates, frames[k].params, &alone).ok());
    EXPECT_EQ(results[k].kept, alone.kept) << "frame " << k;
    EXPECT_EQ(results[k].counts.in, frames[k].candidates.count);
  }
  EXPECT_TRUE(results[2].kept.empty());

  std::vector<Frame> bad = frames;
  bad[1].params.threshold = kNaN;
  status = nms->run(bad, &results);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("frame 1"), std::string::npos) << status.message();
  EXPECT_TRUE(results.empty());
  bad = frames;
  bad[2].candidates.count = 5;  // no boxes
  EXPECT_FALSE(nms->run(bad, &results).ok());
  EXPECT_FALSE(nms->run(frames, nullptr).ok());
  ASSERT_TRUE(nms->run(std::vector<Frame>(), &results).ok());
  EXPECT_TRUE(results.empty());
}

// A backend that times its batches as a whole, as CUDA does: the batch's GPU time on its first
// frame. Context::run shares it evenly among the frames.
class WholeBatchTimer : public Context {
 public:
  WholeBatchTimer() : cpu_(Context::create({Backend::kCpu}, &status_)) {}
  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return "timed as a whole"; }

 private:
  Status run_checked(const CandidatesView &c, const Params &p, Result *r) override {
    const Status s = cpu_->run(c, p, r);
    r->device_time_us = 40;
    return s;
  }
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    for (size_t k = 0; k < frames.size(); ++k) {
      const Status s = cpu_->run(frames[k].candidates, frames[k].params, &(*results)[k]);
      if (!s.ok()) return s;
    }
    (*results)[0].device_time_us = 90;
    return Status::Ok();
  }
  Status status_;
  std::unique_ptr<Context> cpu_;
};

TEST(Context, ABatchsDeviceTimeIsSharedByItsFrames) {
  WholeBatchTimer nms;
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.5f);
  std::vector<Result> results;
  ASSERT_TRUE(nms.run(std::vector<Frame>(3, {set.view(), Params()}), &results).ok());
  ASSERT_EQ(results.size(), 3u);
  for (const Result &r : results) EXPECT_FLOAT_EQ(r.device_time_us, 30.0f);
  Result alone;
  ASSERT_TRUE(nms.run(set.view(), Params(), &alone).ok());
  EXPECT_FLOAT_EQ(alone.device_time_us, 40.0f);
  ASSERT_TRUE(nms.run(std::vector<Frame>(), &results).ok());
}

}  // namespace
}  // namespace cudanms::testing
