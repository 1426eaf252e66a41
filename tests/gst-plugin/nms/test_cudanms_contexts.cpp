// Where the cudanms element's NMS runs (cudanmscontexts.h): a fake CUDA backend failing on demand,
// contexts shared by batch-streams, no usable device, and the real CUDA path on a GPU host.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

// Many streams: one pipeline of `streams` branches appsrc ! cudanms ! appsink, each branch fed
// from a thread of its own, as pipelines/streams runs cameras.
// Every output is its own frame's library result (random methods and rules per stream), computed
// on `backend`; `properties` go to every cudanms.
void expect_streams_match_library(const std::string &properties, int streams, int frames,
                                  uint64_t seed, const char *backend) {
  std::string description;
  for (int k = 0; k < streams; ++k) {
    const std::string n = std::to_string(k);
    description += "appsrc name=src" + n + " format=time caps=" + kCaps + " ! cudanms name=nms" +
                   n + " " + properties + " ! appsink name=sink" + n + " sync=false ";
  }
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  ASSERT_NE(pipeline, nullptr) << (error ? error->message : "");
  ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::vector<RandomCase> cases;
  for_each_random_case(seed, 1, 400, [&](const RandomCase &c) {
    if (c.params.max_candidates >= c.set.size()) cases.push_back(c);  // no capacity warnings
  });
  std::vector<std::thread> threads;
  for (int k = 0; k < streams; ++k) {
    threads.emplace_back([&, k] {
      const std::string n = std::to_string(k);
      GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), ("src" + n).c_str());
      GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), ("sink" + n).c_str());
      GstElement *nms = gst_bin_get_by_name(GST_BIN(pipeline), ("nms" + n).c_str());
      for (int i = 0; i < frames; ++i) {
        const RandomCase &c = cases[(size_t(k) * frames + i) % cases.size()];
        set_params(nms, c.params);
        GstBuffer *buf = packed_buffer(c.set);
        GST_BUFFER_PTS(buf) = i * GST_SECOND / 30;
        ASSERT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), buf), GST_FLOW_OK);
        GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
        ASSERT_NE(sample, nullptr) << "stream " << k << " frame " << i;
        GstBuffer *out = gst_sample_get_buffer(sample);
        const CandidateSet clipped = clipped_to_frame(c.set, kWidth, kHeight);
        EXPECT_TRUE(
            output_matches(out, clipped, library_result(clipped, c.params), kWidth, kHeight))
            << "stream " << k << " frame " << i << ": " << c.description;
        EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, backend);
        gst_sample_unref(sample);
      }
      gst_object_unref(nms);
      gst_object_unref(sink);
      gst_object_unref(src);
    });
  }
  for (std::thread &t : threads) t.join();
  GstBus *bus = gst_element_get_bus(pipeline);
  while (GstMessage *m = gst_bus_pop_filtered(
             bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))) {
    GError *e = nullptr;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) gst_message_parse_error(m, &e, nullptr);
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) gst_message_parse_warning(m, &e, nullptr);
    ADD_FAILURE() << GST_MESSAGE_TYPE_NAME(m) << ": " << (e ? e->message : "?");
    g_clear_error(&e);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

// A "CUDA" context for tests without a GPU: the CPU backend's results, reported as CUDA, and
// failing on demand from the given frame on.
class FakeCudaContext : public Context {
 public:
  static std::atomic<int> fail_from_frame;
  static std::atomic<int> created;
  static std::atomic<int> runs;
  static std::atomic<int> batched;       // frames that ran in batches of more than one
  static std::atomic<int> run_delay_us;  // each frame's run takes at least this long
  // Which context (1 for the first made) ran the last host frame, the last device frame.
  static std::atomic<int> last_host_runner;
  static std::atomic<int> last_device_runner;
  // The stand-in CUcontext of every fake context: device candidates naming it run in place, on
  // "device memory" that is host memory.
  static int device;

  FakeCudaContext(std::unique_ptr<Context> cpu, int id) : cpu_(std::move(cpu)), id_(id) {}
  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return "cuda:fake"; }
  void *cuda_context() const override { return &device; }
  Status device_count(const DeviceCandidatesView &c, uint32_t *count) const override {
    *count = *c.count;
    return Status::Ok();
  }

 private:
  Status run_device_checked(const DeviceCandidatesView &c, const Params &p, Result *r) override {
    last_device_runner = id_;
    const Status s = cpu_->run({c.boxes, c.scores, c.class_ids, *c.count}, p, r);
    for (uint32_t k : r->kept) {  // the kept values come back with device candidates
      r->kept_boxes.insert(r->kept_boxes.end(), c.boxes + 4 * k, c.boxes + 4 * k + 4);
      r->kept_scores.push_back(c.scores[k]);
      r->kept_class_ids.push_back(c.class_ids ? c.class_ids[k] : 0);
    }
    return s;
  }
  Status run_checked(const CandidatesView &c, const Params &p, Result *r) override {
    last_host_runner = id_;
    const int frame = runs++;
    if (fail_from_frame >= 0 && frame >= fail_from_frame)
      return Status::Error("cudaErrorLaunchFailure (injected)");
    std::this_thread::sleep_for(std::chrono::microseconds(run_delay_us));
    return cpu_->run(c, p, r);
  }
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    if (frames.size() > 1) batched += static_cast<int>(frames.size());
    for (size_t k = 0; k < frames.size(); ++k) {
      const Status s = run_checked(frames[k].candidates, frames[k].params, &(*results)[k]);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }
  std::unique_ptr<Context> cpu_;
  int id_;
};
std::atomic<int> FakeCudaContext::fail_from_frame{-1};
std::atomic<int> FakeCudaContext::last_host_runner{0};
std::atomic<int> FakeCudaContext::last_device_runner{0};
int FakeCudaContext::device = 0;
std::atomic<int> FakeCudaContext::created{0};
std::atomic<int> FakeCudaContext::runs{0};
std::atomic<int> FakeCudaContext::batched{0};
std::atomic<int> FakeCudaContext::run_delay_us{0};

// A buffer whose candidates meta holds `set` as device candidates of the fake contexts'
// "device" (host memory), downloaded by download_set.
GstBuffer *device_buffer(const CandidateSet &set, const guint32 *count) {
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
  dc->cuda_context = &FakeCudaContext::device;
  dc->boxes = set.boxes.data();
  dc->scores = set.scores.data();
  dc->class_ids = set.classes.data();
  dc->count = count;
  dc->capacity = *count;
  dc->download = download_set;
  dc->user_data = const_cast<CandidateSet *>(&set);
  EXPECT_TRUE(
      gst_cuda_nms_candidates_meta_set_device(gst_buffer_add_cuda_nms_candidates_meta(in, 0), dc));
  return in;
}

class FakeCuda : public CudaNmsElement {
 protected:
  void SetUp() override {
    CudaNmsElement::SetUp();
    FakeCudaContext::fail_from_frame = -1;
    FakeCudaContext::created = 0;
    FakeCudaContext::runs = 0;
    FakeCudaContext::batched = 0;
    FakeCudaContext::run_delay_us = 0;
    FakeCudaContext::last_host_runner = 0;
    FakeCudaContext::last_device_runner = 0;
    GstCudaNmsBackendHooks fake = {
        [](std::string *) { return true; },
        [](const ContextOptions &options, Status *status) -> std::unique_ptr<Context> {
          const int id = ++FakeCudaContext::created;
          ContextOptions cpu = options;
          cpu.backend = Backend::kCpu;
          return std::make_unique<FakeCudaContext>(Context::create(cpu, status), id);
        }};
    previous_ = gst_cuda_nms_set_backend_hooks_for_testing(&fake);
  }
  void TearDown() override {
    CudaNmsElement::TearDown();
    gst_cuda_nms_set_backend_hooks_for_testing(&previous_);
  }
  GstCudaNmsBackendHooks previous_;
};

TEST_F(FakeCuda, CudaFailureMidStreamWarnsOnceAndFallsBackToCpu) {
  FakeCudaContext::fail_from_frame = 3;
  start("backend=cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  std::mt19937_64 rng(run_seed() + 111);
  for (int frame = 0; frame < 10; ++frame) {
    const CandidateSet set = tools::sliding_window_candidates(400, rng(), 2, kWidth, kHeight);
    GstBuffer *out = process(packed_buffer(set));
    ASSERT_NE(out, nullptr);
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    EXPECT_TRUE(output_matches(out, clipped, library_result(clipped, Params()), kWidth, kHeight))
        << "frame " << frame;
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, frame < 3 ? "cuda" : "cpu");
    gst_buffer_unref(out);
  }
  std::vector<std::string> texts;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &texts), 1u);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_NE(texts[0].find("injected"), std::string::npos) << texts[0];
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
  guint64 frames;
  g_object_get(element_, "frames", &frames, NULL);
  EXPECT_EQ(frames, 10u);
}

TEST_F(FakeCuda, BackendAndGpuIdChangesRecreateTheContext) {
  start("backend=cpu");
  std::mt19937_64 rng(run_seed() + 112);
  // More candidates than backend=auto leaves to the CPU.
  const CandidateSet set =
      tools::sliding_window_candidates(kCpuFrameCandidates + 1, rng(), 2, kWidth, kHeight);
  auto backend_of_next = [&] {
    GstBuffer *out = process(packed_buffer(set));
    std::string b = gst_buffer_get_cuda_nms_result_meta(out)->backend;
    gst_buffer_unref(out);
    return b;
  };
  EXPECT_EQ(backend_of_next(), "cpu");
  EXPECT_EQ(FakeCudaContext::created, 0);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);  // reused per frame
  g_object_set(element_, "gpu-id", 1, NULL);
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 2);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "auto");
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 3);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cpu");
  EXPECT_EQ(backend_of_next(), "cpu");
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// backend=auto leaves frames of few host candidates to the CPU twin, where they cost ~1 us
// against a GPU round trip of ~40 us: the same kept set, reported as "cpu". Larger frames, and
// every frame with backend=cuda, run on CUDA.
TEST_F(FakeCuda, AutoRunsSmallFramesOnTheCpuWithTheSameResult) {
  start("backend=auto");
  std::mt19937_64 rng(run_seed() + 115);
  const size_t sizes[] = {1, 6, kCpuFrameCandidates, kCpuFrameCandidates + 1, 400, 6};
  const char *expected[] = {"cpu", "cpu", "cpu", "cuda", "cuda", "cpu"};
  for (size_t f = 0; f < std::size(sizes); ++f) {
    const CandidateSet set = tools::sliding_window_candidates(sizes[f], rng(), 2, kWidth, kHeight);
    const int runs_before = FakeCudaContext::runs;
    GstBuffer *out = process(packed_buffer(set));
    ASSERT_NE(out, nullptr);
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    EXPECT_TRUE(output_matches(out, clipped, library_result(clipped, Params()), kWidth, kHeight))
        << sizes[f] << " candidates";
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, expected[f])
        << sizes[f] << " candidates";
    EXPECT_EQ(FakeCudaContext::runs - runs_before, std::string(expected[f]) == "cuda" ? 1 : 0);
    gst_buffer_unref(out);
  }
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  CandidateSet few;
  few.add(10, 10, 50, 50, 0.9f);
  GstBuffer *out = process(packed_buffer(few));
  EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, "cuda");
  gst_buffer_unref(out);
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// Elements with batch-streams=true share one context: frames that meet there (each run made to
// take 2 ms) go as one batch, and each stream still gets its own frames' results.
TEST_F(FakeCuda, BatchStreamsShareOneContextAndBatchTheirFrames) {
  FakeCudaContext::run_delay_us = 2000;
  expect_streams_match_library("backend=cuda batch-streams=true", 4, 25, run_seed() + 113, "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  EXPECT_GT(FakeCudaContext::batched, 0);
}

TEST_F(FakeCuda, WithoutBatchStreamsEachElementHasItsOwnContext) {
  FakeCudaContext::run_delay_us = 2000;
  expect_streams_match_library("backend=cuda", 3, 10, run_seed() + 114, "cuda");
  EXPECT_EQ(FakeCudaContext::created, 3);
  EXPECT_EQ(FakeCudaContext::batched, 0);
}

// Device candidates (cudacascade's) do not batch: with batch-streams they run in place on a
// context of the element's own, made at the first of them, not in turn with the other streams'
// frames on the shared one; host frames go on to the shared one.
TEST_F(FakeCuda, BatchStreamsRunDeviceCandidatesOnTheElementsOwnContext) {
  std::mt19937_64 rng(run_seed() + 117);
  const CandidateSet set = integer_boxes_in_frame(
      tools::sliding_window_candidates(300, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  const guint32 count = static_cast<guint32>(set.size());
  const Result want = library_result(set, Params());
  auto device_frame = [&] { return device_buffer(set, &count); };
  start("backend=cuda batch-streams=true keep-candidates=true");
  EXPECT_EQ(FakeCudaContext::created, 1);
  for (int round = 0; round < 2; ++round) {
    GstBuffer *out = process(packed_buffer(set));
    EXPECT_TRUE(output_matches(out, set, want, kWidth, kHeight));
    EXPECT_EQ(FakeCudaContext::last_host_runner, 1) << "round " << round;
    gst_buffer_unref(out);
    out = process(device_frame());
    EXPECT_TRUE(output_matches(out, set, want, kWidth, kHeight));
    EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->downloads, 0u);  // in place
    EXPECT_EQ(FakeCudaContext::last_device_runner, 2) << "round " << round;
    EXPECT_EQ(FakeCudaContext::created, 2) << "round " << round;
    gst_buffer_unref(out);
  }
  // Without batch-streams the element's one context takes both.
  g_object_set(element_, "batch-streams", FALSE, NULL);
  gst_buffer_unref(process(device_frame()));
  EXPECT_EQ(FakeCudaContext::created, 3);
  EXPECT_EQ(FakeCudaContext::last_device_runner, 3);
  gst_buffer_unref(process(packed_buffer(set)));
  EXPECT_EQ(FakeCudaContext::last_host_runner, 3);
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// backend=auto counts device candidates first (one word) and downloads a frame of at most
// kCpuFrameCandidates for the CPU twin, which costs the GPU nothing; larger frames stay in place.
// backend=cuda runs every frame in place.
TEST_F(FakeCuda, AutoDownloadsFewDeviceCandidatesForTheCpuAndRunsManyInPlace) {
  std::mt19937_64 rng(run_seed() + 118);
  start("backend=auto keep-candidates=true");
  for (const size_t n : {size_t{1}, kCpuFrameCandidates, kCpuFrameCandidates + 1, size_t{300}}) {
    const CandidateSet set = integer_boxes_in_frame(
        tools::sliding_window_candidates(n, rng(), 3, kWidth, kHeight), kWidth, kHeight);
    const guint32 count = static_cast<guint32>(set.size());
    GstBuffer *out = process(device_buffer(set, &count));
    ASSERT_NE(out, nullptr);
    EXPECT_TRUE(output_matches(out, set, library_result(set, Params()), kWidth, kHeight)) << n;
    const bool few = count <= kCpuFrameCandidates;
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, few ? "cpu" : "cuda") << n;
    EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->downloads, few ? 1u : 0u) << n;
    gst_buffer_unref(out);
  }
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  const CandidateSet set = integer_boxes_in_frame(
      tools::sliding_window_candidates(5, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  const guint32 count = static_cast<guint32>(set.size());
  GstBuffer *out = process(device_buffer(set, &count));
  EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, "cuda");
  EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->downloads, 0u);
  gst_buffer_unref(out);
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// The CPU backend gains nothing from one context: each element keeps its own, in parallel.
TEST_F(FakeCuda, BatchStreamsLeaveTheCpuBackendAlone) {
  expect_streams_match_library("backend=cpu batch-streams=true", 3, 10, run_seed() + 116, "cpu");
  EXPECT_EQ(FakeCudaContext::created, 0);
}

// The registry behind batch-streams: one context per GPU, CUDA context and time-gpu, made once
// and gone with its last holder.
TEST(SharedNmsContexts, OnePerDeviceCudaContextAndTiming) {
  int made = 0;
  const NmsContextFactory factory = [&made](const ContextOptions &, Status *status) {
    ++made;
    ContextOptions cpu;
    cpu.backend = Backend::kCpu;
    return Context::create(cpu, status);
  };
  Status status;
  ContextOptions options;
  int cuda_context = 0;  // a stand-in CUcontext
  auto first = gst_cuda_nms_shared_context(options, &cuda_context, factory, &status);
  ASSERT_NE(first, nullptr) << status.message();
  EXPECT_EQ(gst_cuda_nms_shared_context(options, &cuda_context, factory, &status), first);
  EXPECT_EQ(made, 1);
  ContextOptions timed = options;
  timed.time_device = true;
  ContextOptions other_gpu = options;
  other_gpu.device = 1;
  int other_cuda_context = 0;
  auto a = gst_cuda_nms_shared_context(timed, &cuda_context, factory, &status);
  auto b = gst_cuda_nms_shared_context(other_gpu, &cuda_context, factory, &status);
  auto c = gst_cuda_nms_shared_context(options, &other_cuda_context, factory, &status);
  EXPECT_EQ(made, 4);
  EXPECT_NE(a, first);
  EXPECT_NE(b, first);
  EXPECT_NE(c, first);
  first.reset();  // the last holder: the next asks for a new one
  EXPECT_NE(gst_cuda_nms_shared_context(options, &cuda_context, factory, &status), nullptr);
  EXPECT_EQ(made, 5);
  // A factory that fails: no context, its status, and nothing kept.
  const NmsContextFactory failing = [](const ContextOptions &, Status *s) {
    *s = Status::Error("no device (injected)");
    return std::unique_ptr<Context>();
  };
  ContextOptions fourth = options;
  fourth.device = 3;
  EXPECT_EQ(gst_cuda_nms_shared_context(fourth, nullptr, failing, &status), nullptr);
  EXPECT_EQ(status.message(), "no device (injected)");
  EXPECT_NE(gst_cuda_nms_shared_context(fourth, nullptr, factory, &status), nullptr);
}

// Without a usable device (the real check): auto warns once and runs on the CPU.
TEST_F(CudaNmsElement, AutoWithoutCudaWarnsOnceAndRunsOnCpu) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is usable here";
  start("backend=auto");
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  for (int i = 0; i < 5; ++i) {
    GstBuffer *out = process(packed_buffer(set));
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, "cpu");
    gst_buffer_unref(out);
  }
  std::vector<std::string> texts;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &texts), 1u);
  for (const auto &t : texts) EXPECT_NE(t.find("CPU"), std::string::npos) << t;
}

// backend=cuda without a usable device: an element error at the state change, no crash.
TEST_F(CudaNmsElement, CudaWithoutDeviceFailsTheStateChange) {
  std::string why;
  GstElement *e = gst_element_factory_make("cudanms", nullptr);
  gst_object_ref_sink(e);
  gst_util_set_object_arg(G_OBJECT(e), "backend", "cuda");
  const bool usable = cuda_available(&why);
  if (usable) g_object_set(e, "gpu-id", 1000, NULL);  // a device that is not there
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError *error = nullptr;
  gchar *debug = nullptr;
  gst_message_parse_error(m, &error, &debug);
  EXPECT_NE(std::string(error->message).find("backend=cuda"), std::string::npos) << error->message;
  g_error_free(error);
  g_free(debug);
  gst_message_unref(m);
  gst_element_set_state(e, GST_STATE_NULL);
  gst_bus_set_flushing(bus, TRUE);
  gst_object_unref(bus);
  gst_object_unref(e);
}

// backend=cuda chosen while playing, with no usable device: a flow error, no crash.
TEST_F(CudaNmsElement, SwitchingToCudaWithoutDeviceIsAFlowError) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is usable here";
  start("backend=cpu");
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  EXPECT_EQ(gst_harness_push(h_, packed_buffer(CandidateSet())), GST_FLOW_ERROR);
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 1u);
}

// The real CUDA path: only on a host with a usable device.
TEST_F(CudaNmsElement, CudaPathMatchesLibrary) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  start("backend=cuda");
  size_t cases = 0;
  for_each_random_case(run_seed() + 112, 1, 300, [&](const RandomCase &c) {
    ++cases;
    set_params(element_, c.params);
    GstBuffer *out = process(packed_buffer(c.set));
    ASSERT_NE(out, nullptr);
    GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
    ASSERT_NE(r, nullptr);
    ASSERT_STREQ(r->backend, "cuda") << c.description;  // it ran on the GPU, no fallback
    const CandidateSet clipped = clipped_to_frame(c.set, kWidth, kHeight);
    ASSERT_TRUE(output_matches(out, clipped, library_result(clipped, c.params), kWidth, kHeight))
        << c.description;
    gst_buffer_unref(out);
  });
  EXPECT_GT(cases, 400u / random_case_stride());
  // Random cases cap Dmax below n now and then, which rightly warns; nothing may say CUDA failed.
  std::vector<std::string> warnings;
  pop_messages(GST_MESSAGE_WARNING, &warnings);
  for (const std::string &w : warnings) EXPECT_EQ(w.find("CUDA"), std::string::npos) << w;
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

// Eight streams with batch-streams=true on the GPU: one context, frames batched as they meet,
// every output its own frame's library result.
TEST_F(CudaNmsElement, CudaBatchStreamsMatchLibrary) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  expect_streams_match_library("backend=cuda batch-streams=true", 8, 60, run_seed() + 115, "cuda");
}

}  // namespace
}  // namespace cudanms::testing
