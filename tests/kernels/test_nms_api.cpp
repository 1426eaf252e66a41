// The backend-independent API: parameter checks, names, context creation errors.
#include <gtest/gtest.h>

#include <limits>

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
}

TEST(Names, RoundTrip) {
  for (Method m : {Method::kGreedy, Method::kMatrix}) {
    Method parsed;
    ASSERT_TRUE(parse_method(to_string(m), &parsed));
    EXPECT_EQ(parsed, m);
  }
  for (Overlap o : {Overlap::kIoU, Overlap::kIoMin, Overlap::kIoS}) {
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

}  // namespace
}  // namespace cudanms::testing
