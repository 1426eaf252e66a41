// Device candidates: the pool's bounds, the download, and NMS run in place on device memory
// giving what NMS on the same candidates in host memory gives (kept set, counts, kept values).
// Without a usable CUDA device these tests skip, visibly; the checks that need no device run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "compare.h"
#include "cudanms/device_candidates.h"
#include "cudanms/nms.h"
#include "random_sets.h"
#include "support/seed.h"

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace cudanms::testing {
namespace {

TEST(DeviceCandidates, ACpuContextRefusesThemWithAStatus) {
  Status status;
  auto cpu = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(status.ok());
  alignas(16) float box[4] = {0, 0, 1, 1};
  float score = 1;
  uint32_t count = 1;
  DeviceCandidatesView view{box, &score, nullptr, &count, 1, nullptr, nullptr};
  Result result;
  status = cpu->run(view, Params(), &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cuda backend"), std::string::npos) << status.message();
}

TEST(DeviceCandidates, MalformedViewsAreStatuses) {
  Status status;
  auto cpu = Context::create({Backend::kCpu}, &status);
  Result result;
  DeviceCandidatesView no_count;
  no_count.capacity = 4;
  EXPECT_FALSE(cpu->run(no_count, Params(), &result).ok());
  alignas(16) float boxes[8] = {};
  float scores[2] = {};
  uint32_t count = 1;
  DeviceCandidatesView misaligned{boxes + 1, scores, nullptr, &count, 1, nullptr, nullptr};
  status = cpu->run(misaligned, Params(), &result);
  EXPECT_NE(status.message().find("aligned"), std::string::npos) << status.message();
}

#ifdef CUDANMS_HAVE_CUDA

// A producer's stream kept busy by a 256 MB memset before each frame: a consumer that did not
// wait for the frame's event would read it half written.
struct SlowProducer {
  static constexpr size_t kBytes = 256u << 20;
  cudaStream_t stream = nullptr;
  void *big = nullptr;
  SlowProducer() {
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) stream = nullptr;
    if (cudaMalloc(&big, kBytes) != cudaSuccess) big = nullptr;
  }
  ~SlowProducer() {
    cudaFree(big);
    if (stream) cudaStreamDestroy(stream);
  }
  bool ok() const { return stream && big; }
  cudaError_t stall(int round) { return cudaMemsetAsync(big, round, kBytes, stream); }
};

class CudaDeviceCandidates : public ::testing::Test {
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

  std::shared_ptr<DeviceCandidatesPool> pool(size_t capacity, size_t buffers = 4) {
    Status status;
    DeviceCandidatesPoolOptions options;
    options.capacity = capacity;
    options.max_buffers = buffers;
    auto p = DeviceCandidatesPool::create(options, &status);
    EXPECT_TRUE(status.ok()) << status.message();
    return p;
  }

  // The set into the buffer as a producer would leave it, sealed or with the event recorded;
  // slots past the count hold candidates that would win every comparison, so that reading past
  // the count shows.
  static void fill(const CandidateSet &set, DeviceCandidates *c, uint32_t count,
                   bool seal = false) {
    std::vector<float> boxes(4 * c->capacity(), 10.0f), scores(c->capacity(), 1e30f);
    std::vector<int32_t> classes(c->capacity(), 0);
    for (size_t i = 0; i < 4 * c->capacity(); i += 4) boxes[i + 2] = boxes[i + 3] = 500.0f;
    std::copy(set.boxes.begin(), set.boxes.end(), boxes.begin());
    std::copy(set.scores.begin(), set.scores.end(), scores.begin());
    std::copy(set.classes.begin(), set.classes.end(), classes.begin());
    ASSERT_EQ(cudaMemcpy(c->boxes(), boxes.data(), boxes.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(c->scores(), scores.data(), scores.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(
        cudaMemcpy(c->class_ids(), classes.data(), classes.size() * 4, cudaMemcpyHostToDevice),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpy(c->count(), &count, 4, cudaMemcpyHostToDevice), cudaSuccess);
    if (seal) {
      const Status sealed = c->seal(nullptr);
      ASSERT_TRUE(sealed.ok()) << sealed.message();
    } else {
      ASSERT_EQ(cudaEventRecord(static_cast<cudaEvent_t>(c->ready()), 0), cudaSuccess);
    }
  }

  // The set and its count into the buffer on `stream`, queued behind what the stream holds.
  static void write_on(cudaStream_t stream, const CandidateSet &set, uint32_t count,
                       DeviceCandidates *c) {
    ASSERT_EQ(cudaMemcpyAsync(c->boxes(), set.boxes.data(), set.boxes.size() * 4,
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(c->scores(), set.scores.data(), set.scores.size() * 4,
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(c->class_ids(), set.classes.data(), set.classes.size() * 4,
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    // From pageable memory: the copy has its bytes when it returns, as `count` goes.
    ASSERT_EQ(cudaMemcpyAsync(c->count(), &count, 4, cudaMemcpyHostToDevice, stream), cudaSuccess);
  }

  // Device NMS on `set` equals host NMS on it, kept values included.
  ::testing::AssertionResult same_as_host(const CandidateSet &set, const Params &params,
                                          DeviceCandidates *c) {
    fill(set, c, static_cast<uint32_t>(set.size()));
    Result on_device, on_host;
    Status status = gpu_->run(c->view(), params, &on_device);
    if (!status.ok()) return ::testing::AssertionFailure() << status.message();
    CandidatesView host = set.view();  // device candidates have no points
    host.points = nullptr;
    host.points_per_candidate = 0;
    EXPECT_TRUE(cpu_->run(host, params, &on_host).ok());
    auto same = same_result(on_device, on_host);  // values included, where the host has them
    if (!same || !on_host.kept_scores.empty()) return same;
    const size_t kept = on_host.kept.size();
    if (on_device.kept_boxes.size() != 4 * kept || on_device.kept_scores.size() != kept ||
        on_device.kept_class_ids.size() != kept) {
      return ::testing::AssertionFailure() << "kept values missing";
    }
    for (size_t k = 0; k < kept; ++k) {
      const uint32_t p = on_host.kept[k];
      if (std::memcmp(&on_device.kept_boxes[4 * k], &set.boxes[4 * p], 16) != 0 ||
          std::memcmp(&on_device.kept_scores[k], &set.scores[p], 4) != 0 ||
          on_device.kept_class_ids[k] != set.classes[p]) {
        return ::testing::AssertionFailure() << "kept values of candidate " << p << " differ";
      }
    }
    return ::testing::AssertionSuccess();
  }

  std::unique_ptr<Context> gpu_;
  std::unique_ptr<Context> cpu_;
};

TEST_F(CudaDeviceCandidates, ThePoolHandsOutAtMostItsBuffersAndTakesThemBack) {
  auto p = pool(100, 2);
  ASSERT_TRUE(p);
  Status status;
  auto a = p->acquire(&status);
  auto b = p->acquire(&status);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->boxes(), b->boxes());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->boxes()) % 16, 0u);
  EXPECT_FALSE(p->acquire(&status));
  EXPECT_TRUE(status.ok()) << "all in use is not an error";
  EXPECT_EQ(p->buffers(), 2u);
  EXPECT_GE(p->bytes(), 2 * 100 * 24u);
  float *first = a->boxes();
  a.reset();
  auto again = p->acquire(&status);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->boxes(), first) << "a returned buffer is reused, not reallocated";
  EXPECT_EQ(p->buffers(), 2u);
  // Buffers outlive the pool's last owner.
  p.reset();
  fill(CandidateSet{}, b.get(), 0);
  HostCandidates host;
  EXPECT_TRUE(b->download(&host).ok());
}

TEST_F(CudaDeviceCandidates, PoolsOfNothingAreStatuses) {
  Status status;
  DeviceCandidatesPoolOptions options;
  options.capacity = 0;
  EXPECT_FALSE(DeviceCandidatesPool::create(options, &status));
  EXPECT_FALSE(status.ok());
  options.capacity = 10;
  options.max_buffers = 0;
  EXPECT_FALSE(DeviceCandidatesPool::create(options, &status));
  options.max_buffers = 1;
  options.device = 1 << 20;
  EXPECT_FALSE(DeviceCandidatesPool::create(options, &status));
  EXPECT_NE(status.message().find("does not exist"), std::string::npos) << status.message();
}

// Up to 64 candidates come back with the count in one copy (sealed: in host-mapped memory
// already), more in a second: both are what the producer wrote, and nothing past the count
// (fill() leaves other candidates there).
TEST_F(CudaDeviceCandidates, ADownloadIsWhatTheProducerWrote) {
  auto p = pool(300);
  std::mt19937_64 rng(run_seed() + 40);
  for (const bool seal : {false, true}) {
    Status status;
    auto c = p->acquire(&status);
    for (const size_t n : {0, 1, 63, 64, 65, 257, 300, 5}) {
      const CandidateSet set = generators()[0].make(rng, n, 5);
      fill(set, c.get(), static_cast<uint32_t>(n), seal);
      EXPECT_EQ(c->host_count() != nullptr, seal);
      EXPECT_EQ(c->view().host_count, c->host_count());
      uint32_t counted = 1234;
      ASSERT_TRUE(device_count(c->view(), &counted).ok());
      EXPECT_EQ(counted, n) << "sealed " << seal;
      HostCandidates host;
      ASSERT_TRUE(c->download(&host).ok()) << n;
      EXPECT_EQ(host.boxes, set.boxes) << n << ", sealed " << seal;
      EXPECT_EQ(host.scores, set.scores) << n << ", sealed " << seal;
      EXPECT_EQ(host.class_ids, set.classes) << n << ", sealed " << seal;
      HostCandidates plain;  // the free function, without the pool's staging
      ASSERT_TRUE(download(c->view(), &plain).ok()) << n;
      EXPECT_EQ(plain.boxes, set.boxes) << n;
    }
  }
}

// A batch's buffers sealed at once (a detector's 32 frames, here 40: two launches) are each what
// its own seal() makes of it: its count and first candidates in host-mapped memory, downloaded as
// its producer wrote them.
TEST_F(CudaDeviceCandidates, SealAllSealsEveryBufferOfABatch) {
  constexpr int kBuffers = 40;
  auto p = pool(100, kBuffers);
  std::mt19937_64 rng(run_seed() + 41);
  std::vector<std::shared_ptr<DeviceCandidates>> held;
  std::vector<DeviceCandidates *> buffers;
  std::vector<CandidateSet> sets;
  for (int i = 0; i < kBuffers; i++) {
    Status status;
    held.push_back(p->acquire(&status));
    ASSERT_TRUE(held.back()) << status.message();
    buffers.push_back(held.back().get());
    sets.push_back(generators()[0].make(rng, static_cast<size_t>(i % 3 == 0 ? 0 : i + 30), 5));
    fill(sets.back(), buffers.back(), static_cast<uint32_t>(sets.back().scores.size()));
    ASSERT_EQ(buffers.back()->host_count(), nullptr);
  }
  const Status sealed = seal_all(buffers.data(), kBuffers, nullptr);
  ASSERT_TRUE(sealed.ok()) << sealed.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < kBuffers; i++) {
    SCOPED_TRACE("buffer " + std::to_string(i));
    ASSERT_NE(buffers[i]->host_count(), nullptr);
    EXPECT_EQ(*buffers[i]->host_count(), sets[i].scores.size());
    HostCandidates host;
    ASSERT_TRUE(buffers[i]->download(&host).ok());
    EXPECT_EQ(host.boxes, sets[i].boxes);
    EXPECT_EQ(host.scores, sets[i].scores);
    EXPECT_EQ(host.class_ids, sets[i].classes);
  }
  EXPECT_TRUE(seal_all(nullptr, 0, nullptr).ok());
}

// A sealed buffer's summary belongs to its acquisition: back in the pool it is unsealed, and the
// next producer's frame, with its event recorded but not sealed, is read from the device.
TEST_F(CudaDeviceCandidates, ABufferBackInThePoolIsUnsealed) {
  auto p = pool(100, 1);
  std::mt19937_64 rng(run_seed() + 46);
  Status status;
  auto c = p->acquire(&status);
  const CandidateSet first = generators()[0].make(rng, 10, 2);
  fill(first, c.get(), 10, /*seal=*/true);
  ASSERT_NE(c->host_count(), nullptr);
  const float *memory = c->boxes();
  c.reset();
  c = p->acquire(&status);
  ASSERT_EQ(c->boxes(), memory) << "the same buffer";
  EXPECT_EQ(c->host_count(), nullptr);
  const CandidateSet second = generators()[0].make(rng, 7, 2);
  fill(second, c.get(), 7);
  uint32_t counted = 0;
  ASSERT_TRUE(device_count(c->view(), &counted).ok());
  EXPECT_EQ(counted, 7u);
  HostCandidates host;
  ASSERT_TRUE(c->download(&host).ok());
  EXPECT_EQ(host.scores, second.scores);
}

TEST_F(CudaDeviceCandidates, NmsInPlaceEqualsNmsOnHostCopiesOnRandomSets) {
  auto p = pool(600);
  Status status;
  auto c = p->acquire(&status);
  size_t cases = 0;
  for_each_random_case(run_seed() + 41, 2, 600, [&](const RandomCase &rc) {
    ++cases;
    ASSERT_TRUE(same_as_host(rc.set, rc.params, c.get())) << rc.description;
  });
  EXPECT_GT(cases, 700u / random_case_stride());
}

TEST_F(CudaDeviceCandidates, LargeFramesTakeTheSortPathAndStayEqual) {
  std::mt19937_64 rng(run_seed() + 42);
  auto p = pool(40000);
  Status status;
  auto c = p->acquire(&status);
  for (size_t n : {20000u, 40000u}) {
    for (bool agnostic : {false, true}) {
      CandidateSet set = tools::sliding_window_candidates(n, rng(), agnostic ? 1 : 80);
      Params params;
      params.class_agnostic = agnostic;
      params.max_candidates = n / 2;
      EXPECT_TRUE(same_as_host(set, params, c.get())) << "n=" << n;
      // Four scores: the counting rank's ties within and across its tiles of keys decide.
      for (float &score : set.scores) score = std::ceil(score * 4.0f) / 4.0f;
      EXPECT_TRUE(same_as_host(set, params, c.get())) << "n=" << n << ", four scores";
    }
  }
}

TEST_F(CudaDeviceCandidates, PastWhatTheGpuRanksTheCpuRedoesADownload) {
  std::mt19937_64 rng(run_seed() + 43);
  const size_t n = 140 * 1024;
  auto p = pool(n, 1);
  Status status;
  auto c = p->acquire(&status);
  const CandidateSet set = tools::sliding_window_candidates(n, rng(), 3);
  Params params;
  params.max_candidates = n;
  EXPECT_TRUE(same_as_host(set, params, c.get()));
}

TEST_F(CudaDeviceCandidates, ACountAboveTheCapacityIsAnErrorAndZeroIsEmpty) {
  auto p = pool(16);
  Status status;
  auto c = p->acquire(&status);
  std::mt19937_64 rng(run_seed() + 44);
  const CandidateSet set = generators()[0].make(rng, 16, 1);
  fill(set, c.get(), 17);
  Result result;
  status = gpu_->run(c->view(), Params(), &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("17"), std::string::npos) << status.message();
  HostCandidates host;
  EXPECT_FALSE(c->download(&host).ok());

  fill(set, c.get(), 0);
  ASSERT_TRUE(gpu_->run(c->view(), Params(), &result).ok());
  EXPECT_EQ(result.counts.in, 0u);
  EXPECT_TRUE(result.kept.empty());
  // The context is still usable after the refused frame.
  EXPECT_TRUE(same_as_host(set, Params(), c.get()));
}

// A producer seals on its own stream behind a large memset: the summary a consumer reads after
// the event is the frame's final candidates, never the memset's or the last round's.
TEST_F(CudaDeviceCandidates, ASealFollowsTheProducersWorkOnItsStream) {
  auto p = pool(200);
  Status status;
  auto c = p->acquire(&status);
  std::mt19937_64 rng(run_seed() + 47);
  SlowProducer producer;
  ASSERT_TRUE(producer.ok());
  for (int round = 0; round < 3; ++round) {
    const uint32_t count = 40 + round;
    const CandidateSet set = generators()[0].make(rng, count, 3);
    ASSERT_EQ(producer.stall(round), cudaSuccess);
    write_on(producer.stream, set, count, c.get());
    ASSERT_TRUE(c->seal(producer.stream).ok());
    uint32_t counted = 0;
    ASSERT_TRUE(device_count(c->view(), &counted).ok());
    EXPECT_EQ(counted, count) << "round " << round;
    HostCandidates host;
    ASSERT_TRUE(c->download(&host).ok());
    EXPECT_EQ(host.boxes, set.boxes) << "round " << round;
    EXPECT_EQ(host.scores, set.scores) << "round " << round;
    EXPECT_EQ(host.class_ids, set.classes) << "round " << round;
  }
}

TEST_F(CudaDeviceCandidates, TheProducersEventOrdersTheWorkWithoutAHostWait) {
  // The producer writes on its own stream, its candidates queued behind a large memset: NMS, on
  // its own stream, must wait for the event and see the final contents.
  auto p = pool(2000);
  Status status;
  auto c = p->acquire(&status);
  std::mt19937_64 rng(run_seed() + 45);
  const CandidateSet set = tools::sliding_window_candidates(2000, rng(), 4);
  SlowProducer producer;
  ASSERT_TRUE(producer.ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(cudaMemsetAsync(c->count(), 0, 4, producer.stream), cudaSuccess);
    ASSERT_EQ(producer.stall(round), cudaSuccess);
    write_on(producer.stream, set, 2000, c.get());
    ASSERT_EQ(cudaEventRecord(static_cast<cudaEvent_t>(c->ready()), producer.stream), cudaSuccess);
    Result on_device, on_host;
    ASSERT_TRUE(gpu_->run(c->view(), Params(), &on_device).ok());
    ASSERT_TRUE(cpu_->run(set.view(), Params(), &on_host).ok());
    EXPECT_TRUE(same_result(on_device, on_host)) << "round " << round;
  }
}

#else

TEST(CudaDeviceCandidates, NeedsACudaBuild) { GTEST_SKIP() << "cudanms was built without CUDA"; }

#endif  // CUDANMS_HAVE_CUDA

}  // namespace
}  // namespace cudanms::testing
