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

TEST(Context, RejectsAZeroCapacity) {
  Status status;
  ContextOptions options;
  options.max_candidates = 0;
  EXPECT_EQ(Context::create(options, &status), nullptr);
  EXPECT_FALSE(status.ok());
}

}  // namespace
}  // namespace cudanms::testing
