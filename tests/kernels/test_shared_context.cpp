// SharedContext: several threads' frames through one context or a few, batched while they run.
// Which calls go together is made certain with a context whose runs can be held; every result is
// checked against the CPU backend run on the frame alone.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compare.h"
#include "cudanms/nms.h"
#include "cudanms/shared_context.h"
#include "random_sets.h"
#include "support/seed.h"
#include "synthetic.h"

namespace cudanms::testing {
namespace {

// A CPU context whose runs can be held at a gate; it records how many frames each run took.
class GatedContext : public Context {
 public:
  GatedContext() : cpu_(Context::create({Backend::kCpu}, &status_)) {}
  Backend backend() const override { return Backend::kCpu; }
  std::string device_name() const override { return "cpu (gated)"; }

  void hold() {
    std::lock_guard<std::mutex> guard(lock_);
    held_ = true;
  }
  void release() {
    std::lock_guard<std::mutex> guard(lock_);
    held_ = false;
    changed_.notify_all();
  }
  // Waits (up to a minute) until `count` runs have started.
  bool await_runs(size_t count) {
    std::unique_lock<std::mutex> lock(lock_);
    return changed_.wait_for(lock, std::chrono::minutes(1), [&] { return runs_.size() >= count; });
  }
  std::vector<size_t> runs() const {
    std::lock_guard<std::mutex> guard(lock_);
    return runs_;
  }

 private:
  void enter(size_t frames) {
    std::unique_lock<std::mutex> lock(lock_);
    runs_.push_back(frames);
    changed_.notify_all();
    changed_.wait(lock, [&] { return !held_; });
  }
  Status run_checked(const CandidatesView &c, const Params &p, Result *r) override {
    enter(1);
    return cpu_->run(c, p, r);
  }
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    enter(frames.size());
    for (size_t k = 0; k < frames.size(); ++k) {
      const Status s = cpu_->run(frames[k].candidates, frames[k].params, &(*results)[k]);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

  Status status_;
  std::unique_ptr<Context> cpu_;
  mutable std::mutex lock_;
  std::condition_variable changed_;
  bool held_ = false;
  std::vector<size_t> runs_;
};

// Waits (up to a minute) until `shared` has `count` calls waiting.
bool await_waiting(const SharedContext &shared, size_t count) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (shared.waiting() < count) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

Result alone_on_cpu(const CandidateSet &set, const Params &params) {
  Status status;
  auto cpu = Context::create({Backend::kCpu}, &status);
  Result result;
  EXPECT_TRUE(cpu->run(set.view(), params, &result).ok());
  return result;
}

class SharedContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gated = std::make_unique<GatedContext>();
    gated_ = gated.get();
    shared_ = std::make_unique<SharedContext>(std::move(gated));
    std::mt19937_64 rng(run_seed() + 41);
    for (int k = 0; k < 4; ++k) sets_.push_back(tools::sliding_window_candidates(300, rng(), 3));
  }

  // Frame 0 runs held at the gate; frames 1.. are called meanwhile, each on its own thread, with
  // `params[k]`; once they all wait, the gate opens. Fills statuses_ and results_.
  void call_while_one_runs(const std::vector<Params> &params) {
    statuses_.assign(params.size(), Status());
    results_.assign(params.size(), Result());
    gated_->hold();
    std::vector<std::thread> threads;
    auto call = [&](size_t k) {
      statuses_[k] = shared_->run(sets_[k].view(), params[k], &results_[k]);
    };
    threads.emplace_back(call, 0);
    EXPECT_TRUE(gated_->await_runs(1));
    for (size_t k = 1; k < params.size(); ++k) threads.emplace_back(call, k);
    EXPECT_TRUE(await_waiting(*shared_, params.size() - 1));
    gated_->release();
    for (std::thread &t : threads) t.join();
  }

  GatedContext *gated_ = nullptr;
  std::unique_ptr<SharedContext> shared_;
  std::vector<CandidateSet> sets_;
  std::vector<Status> statuses_;
  std::vector<Result> results_;
};

TEST_F(SharedContextTest, ALoneCallRunsAtOnceAsOneFrame) {
  Result result;
  ASSERT_TRUE(shared_->run(sets_[0].view(), Params(), &result).ok());
  EXPECT_TRUE(same_result(result, alone_on_cpu(sets_[0], Params())));
  EXPECT_EQ(gated_->runs(), std::vector<size_t>{1});
  const SharedContext::Stats stats = shared_->stats();
  EXPECT_EQ(stats.frames, 1u);
  EXPECT_EQ(stats.turns, 1u);
  EXPECT_EQ(stats.batched, 0u);
  EXPECT_EQ(shared_->waiting(), 0u);
}

TEST_F(SharedContextTest, CallsThatWaitGoTogetherAsOneBatch) {
  std::vector<Params> params(4);
  params[2].method = Method::kMatrix;
  params[3].class_agnostic = true;
  params[3].max_detections = 3;
  call_while_one_runs(params);
  EXPECT_EQ(gated_->runs(), (std::vector<size_t>{1, 3}));
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(statuses_[k].ok()) << "frame " << k << ": " << statuses_[k].message();
    EXPECT_TRUE(same_result(results_[k], alone_on_cpu(sets_[k], params[k]))) << "frame " << k;
  }
  const SharedContext::Stats stats = shared_->stats();
  EXPECT_EQ(stats.frames, 4u);
  EXPECT_EQ(stats.turns, 2u);
  EXPECT_EQ(stats.largest, 3u);
  EXPECT_EQ(stats.batched, 3u);
}

// A batch fails as a whole on one frame's bad input; the callers of the others still get their
// results, and the bad frame's caller its own error.
TEST_F(SharedContextTest, ABadFrameFailsOnlyItsOwnCall) {
  std::vector<Params> params(4);
  params[2].threshold = 2.0f;
  call_while_one_runs(params);
  EXPECT_EQ(gated_->runs(), (std::vector<size_t>{1, 1, 1}));  // 1 and 3 again, alone
  for (size_t k : {0u, 1u, 3u}) {
    ASSERT_TRUE(statuses_[k].ok()) << "frame " << k << ": " << statuses_[k].message();
    EXPECT_TRUE(same_result(results_[k], alone_on_cpu(sets_[k], params[k]))) << "frame " << k;
  }
  EXPECT_FALSE(statuses_[2].ok());
  EXPECT_NE(statuses_[2].message().find("threshold"), std::string::npos) << statuses_[2].message();
  EXPECT_TRUE(results_[2].kept.empty());
}

// What Context::create returns on failure: a clear error on every call, not a crash.
TEST(SharedContextWithout, AContextIsAnErrorOnEveryCall) {
  SharedContext shared(nullptr);
  EXPECT_EQ(shared.context(), nullptr);
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.5f);
  Result result;
  const Status status = shared.run(set.view(), Params(), &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no context"), std::string::npos) << status.message();
  EXPECT_FALSE(shared.run(DeviceCandidatesView(), Params(), &result).ok());
}

TEST(SharedContextWithout, OneNullContextAmongSeveralIsAnErrorOnEveryCall) {
  Status status;
  std::vector<std::unique_ptr<Context>> contexts;
  contexts.push_back(Context::create({Backend::kCpu}, &status));
  contexts.push_back(nullptr);
  SharedContext shared(std::move(contexts));
  CandidateSet set;
  set.add(0, 0, 10, 10, 0.5f);
  Result result;
  EXPECT_FALSE(shared.run(set.view(), Params(), &result).ok());
  SharedContext none{std::vector<std::unique_ptr<Context>>()};
  EXPECT_EQ(none.context(), nullptr);
  EXPECT_FALSE(none.run(set.view(), Params(), &result).ok());
}

// With two contexts a call waits only while both run: the second of two calls runs at once on
// the other context, and the calls that come while both run go together on the first freed.
TEST(SharedContextOfTwo, CallsWaitOnlyWhileBothRun) {
  auto first = std::make_unique<GatedContext>(), second = std::make_unique<GatedContext>();
  GatedContext *a = first.get(), *b = second.get();
  std::vector<std::unique_ptr<Context>> contexts;
  contexts.push_back(std::move(first));
  contexts.push_back(std::move(second));
  SharedContext shared(std::move(contexts));
  EXPECT_EQ(shared.contexts(), 2u);
  std::mt19937_64 rng(run_seed() + 44);
  std::vector<CandidateSet> sets;
  std::vector<Params> params(4);
  params[3].method = Method::kMatrix;
  for (int k = 0; k < 4; ++k) sets.push_back(tools::sliding_window_candidates(300, rng(), 3));
  std::vector<Status> statuses(4);
  std::vector<Result> results(4);
  auto call = [&](size_t k) { statuses[k] = shared.run(sets[k].view(), params[k], &results[k]); };
  a->hold();
  b->hold();
  std::vector<std::thread> threads;
  threads.emplace_back(call, 0);
  EXPECT_TRUE(a->await_runs(1));
  threads.emplace_back(call, 1);
  EXPECT_TRUE(b->await_runs(1)) << "the second call did not run at once on the other context";
  EXPECT_EQ(shared.waiting(), 0u);
  threads.emplace_back(call, 2);
  threads.emplace_back(call, 3);
  EXPECT_TRUE(await_waiting(shared, 2));
  a->release();
  EXPECT_TRUE(a->await_runs(2));
  EXPECT_EQ(a->runs(), (std::vector<size_t>{1, 2}));
  b->release();
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(a->runs(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(b->runs(), (std::vector<size_t>{1}));
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(statuses[k].ok()) << "frame " << k << ": " << statuses[k].message();
    EXPECT_TRUE(same_result(results[k], alone_on_cpu(sets[k], params[k]))) << "frame " << k;
  }
  const SharedContext::Stats stats = shared.stats();
  EXPECT_EQ(stats.frames, 4u);
  EXPECT_EQ(stats.turns, 3u);
  EXPECT_EQ(stats.largest, 2u);
  EXPECT_EQ(stats.batched, 2u);
}

TEST_F(SharedContextTest, ErrorsAreTheContextsOwn) {
  EXPECT_FALSE(shared_->run(sets_[0].view(), Params(), nullptr).ok());
  DeviceCandidatesView device;
  Result result;
  const Status status = shared_->run(device, Params(), &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cuda backend"), std::string::npos) << status.message();
  // The context still serves calls after errors.
  EXPECT_TRUE(shared_->run(sets_[0].view(), Params(), &result).ok());
  EXPECT_TRUE(same_result(result, alone_on_cpu(sets_[0], Params())));
}

// Threads calling at once, every method and rule, through `count` contexts: each result is its
// frame's alone, whatever batches formed.
void expect_threads_get_their_own_results(Backend backend, size_t count, uint64_t seed) {
  Status status;
  std::vector<std::unique_ptr<Context>> contexts;
  for (size_t k = 0; k < count; ++k) {
    contexts.push_back(Context::create({backend}, &status));
    ASSERT_TRUE(status.ok()) << status.message();
  }
  SharedContext shared(std::move(contexts));
  std::vector<RandomCase> cases;
  for_each_random_case(seed, 1, 600, [&](const RandomCase &c) { cases.push_back(c); });
  std::vector<Result> want(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) want[k] = alone_on_cpu(cases[k].set, cases[k].params);
  constexpr size_t kThreads = 8;
  std::vector<Result> got(cases.size());
  std::vector<Status> statuses(cases.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = t; k < cases.size(); k += kThreads) {
        statuses[k] = shared.run(cases[k].set.view(), cases[k].params, &got[k]);
      }
    });
  }
  for (std::thread &t : threads) t.join();
  for (size_t k = 0; k < cases.size(); ++k) {
    ASSERT_TRUE(statuses[k].ok()) << cases[k].description << ": " << statuses[k].message();
    EXPECT_TRUE(same_result(got[k], want[k])) << cases[k].description;
    EXPECT_EQ(got[k].computed_on, backend) << cases[k].description;
  }
  const SharedContext::Stats stats = shared.stats();
  EXPECT_EQ(stats.frames, cases.size());
  std::cout << cases.size() << " frames from " << kThreads << " threads through " << count
            << " context(s) in " << stats.turns << " turns, " << stats.batched
            << " of them in batches, at most " << stats.largest << " a turn\n";
}

TEST(SharedContextThreads, EveryCallerGetsItsFramesResultOnTheCpu) {
  expect_threads_get_their_own_results(Backend::kCpu, 1, run_seed() + 42);
}

TEST(SharedContextThreads, EveryCallerGetsItsFramesResultThroughThreeCpuContexts) {
  expect_threads_get_their_own_results(Backend::kCpu, 3, run_seed() + 45);
}

TEST(CudaSharedContext, EveryCallerGetsItsFramesResult) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  expect_threads_get_their_own_results(Backend::kCuda, 1, run_seed() + 43);
  expect_threads_get_their_own_results(Backend::kCuda, 3, run_seed() + 46);
}

}  // namespace
}  // namespace cudanms::testing
