// pipelines/streams as a user runs it: N streams of vtest.avi's frames in one process, the summary
// and its JSON; bad input is a usage error.
#include "cudanms/nms.h"
#include "script_support.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

JsonObject *parse_object(JsonParser *parser, const std::string &text) {
  if (!json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) return nullptr;
  JsonNode *root = json_parser_get_root(parser);
  return root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : nullptr;
}

// pipelines/streams with `options` after --preload vtest.avi, 320x240, no progress lines and
// --json DIR/summary.json: its exit status; its stdout in *out, with stderr after a failure.
int run_preloaded(const TempDir &dir, const std::vector<std::string> &options, std::string *out) {
  std::vector<std::string> argv = {script("streams"),
                                   "--preload",
                                   opencv_sample("vtest.avi"),
                                   "--size",
                                   "320x240",
                                   "--progress",
                                   "0",
                                   "--json",
                                   dir.file("summary.json")};
  argv.insert(argv.end(), options.begin(), options.end());
  GSubprocess *run = spawn(argv, dir.file("stdout"), dir.file("stderr"));
  const int status = wait_exit(run, 300);
  g_object_unref(run);
  *out = read_file(dir.file("stdout"));
  if (status != 0) *out += read_file(dir.file("stderr"));
  return status;
}

TEST(Streams, ThreeStreamsOfPreloadedFramesEachDeliverEveryFrame) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  std::string out;
  ASSERT_EQ(run_preloaded(dir, {"--streams", "3", "--frames", "6", "--preload-frames", "4"}, &out),
            0)
      << out;
  EXPECT_NE(out.find("streams 3  frames 18  total "), std::string::npos) << out;
  EXPECT_NE(out.find("NMS share "), std::string::npos) << out;
  EXPECT_NE(out.find("second half of the run: "), std::string::npos) << out;
  EXPECT_NE(out.find("host CPU over the second half of the frames: "), std::string::npos) << out;
  EXPECT_NE(out.find("threads runnable without a CPU over the second half: "), std::string::npos)
      << out;
  EXPECT_NE(out.find("the hypervisor took "), std::string::npos) << out;

  JsonParser *parser = json_parser_new();
  JsonObject *summary = parse_object(parser, read_file(dir.file("summary.json")));
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(json_object_get_int_member(summary, "streams"), 3);
  EXPECT_EQ(json_object_get_int_member(summary, "frames"), 18);
  EXPECT_GT(json_object_get_double_member(summary, "total_fps"), 0.0);
  EXPECT_GT(json_object_get_double_member(summary, "second_half_fps"), 0.0);
  EXPECT_GT(json_object_get_double_member(summary, "detector_p50_us"), 0.0);
  EXPECT_GT(json_object_get_double_member(summary, "nms_p50_us"), 0.0);
  EXPECT_GE(json_object_get_double_member(summary, "chain_p50_us"),
            json_object_get_double_member(summary, "detector_p50_us"));
  // The process's CPU time from the 9th frame out to the 18th: the detector's work at least, and
  // no more cores than the host has.
  EXPECT_GT(json_object_get_double_member(summary, "host_cpu_us_per_frame"), 0.0);
  const double cores = json_object_get_double_member(summary, "host_cpu_cores");
  EXPECT_GT(cores, 0.0);
  EXPECT_LE(cores, g_get_num_processors() + 0.5);
  // Linux counts each thread's time runnable without a CPU (-1: not known).
  EXPECT_GE(json_object_get_double_member(summary, "host_cpu_wait_us_per_frame"), 0.0);
  // The cores a hypervisor took meanwhile: none or some, never fewer (-1: not known; Linux says).
  EXPECT_GE(json_object_get_double_member(summary, "host_steal_cores"), 0.0);
  // NMS's own GPU time, and so its share, exist only where NMS runs on a GPU.
  const double share = json_object_get_double_member(summary, "nms_share_percent");
  EXPECT_GE(share, 0.0);
  EXPECT_LT(share, 100.0);
  g_object_unref(parser);
}

// --repeat: the same chain in fresh processes, each run's rates and their min, max, mean and
// spread, in the output and the JSON; a repeat that is no count is a usage error.
TEST(Streams, RepeatRunsTheChainAgainAndSaysHowMuchItsRateMoves) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  std::string out;
  ASSERT_EQ(
      run_preloaded(
          dir, {"--streams", "2", "--frames", "5", "--preload-frames", "3", "--repeat", "3"}, &out),
      0)
      << out;
  for (const char *line :
       {"== run 1 of 3", "== run 3 of 3", "run 2: total ", ", cudanms p50/p99 ", " us a frame (",
        " cores, runnable without a CPU ", ", the hypervisor took ", "3 runs, total: min ",
        "3 runs, second half: min "})
    EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;
  JsonParser *parser = json_parser_new();
  JsonObject *summary = parse_object(parser, read_file(dir.file("summary.json")));
  ASSERT_NE(summary, nullptr);
  JsonArray *runs = json_object_get_array_member(summary, "runs");
  ASSERT_EQ(json_array_get_length(runs), 3u);
  double lowest = 1e30, highest = 0, sum = 0;
  for (guint i = 0; i < 3; i++) {
    JsonObject *run = json_array_get_object_element(runs, i);
    EXPECT_EQ(json_object_get_int_member(run, "frames"), 10);
    const double fps = json_object_get_double_member(run, "total_fps");
    lowest = std::min(lowest, fps), highest = std::max(highest, fps), sum += fps;
  }
  JsonObject *total = json_object_get_object_member(summary, "total_fps");
  EXPECT_DOUBLE_EQ(json_object_get_double_member(total, "min"), lowest);
  EXPECT_DOUBLE_EQ(json_object_get_double_member(total, "max"), highest);
  EXPECT_NEAR(json_object_get_double_member(total, "mean"), sum / 3, 1e-6 * sum);
  EXPECT_NEAR(json_object_get_double_member(total, "spread"), (highest - lowest) / 2 / (sum / 3),
              1e-9);
  g_object_unref(parser);

  GSubprocess *bad = spawn({script("streams"), "--repeat", "zero", "--preload", "x"},
                           dir.file("bad.out"), dir.file("bad.err"));
  EXPECT_EQ(wait_exit(bad, 30), 2);
  g_object_unref(bad);
  EXPECT_NE(read_file(dir.file("bad.err")).find("--repeat takes a number of runs"),
            std::string::npos);
}

// 200 streams of one set of preloaded frames: a GstMemory counts the maps it is under in 8 bits,
// and 200 streams mapping an I420 frame's three planes at once overflowed it (a CRITICAL, fatal
// in the tests, then wrong maps: issue 43's "4-GPU CRITICAL", 128 streams of host frames). Every
// frame delivered, no CRITICAL.
TEST(Streams, TwoHundredStreamsOfOnePreloadRaiseNoCritical) {
  SKIP_WITHOUT_VTEST();
  ASSERT_STREQ(g_getenv("G_DEBUG"), "fatal-criticals") << "the test setup makes CRITICALs fatal";
  TempDir dir;
  std::string out;
  ASSERT_EQ(
      run_preloaded(dir, {"--streams", "200", "--frames", "10", "--preload-frames", "4"}, &out), 0)
      << out;
  EXPECT_NE(out.find("streams 200  frames 2000  total "), std::string::npos) << out;
}

// --workers per-gpu: a process per GPU, stream i on the (i mod G)-th, numbered as in one process;
// the parent's summary adds theirs up.
TEST(Streams, AWorkerPerGpuRunsEveryStream) {
  SKIP_WITHOUT_VTEST();
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  std::string out;
  ASSERT_EQ(run_preloaded(dir,
                          {"--streams", "5", "--frames", "6", "--preload-frames", "4", "--gpus",
                           "all", "--workers", "per-gpu"},
                          &out),
            0)
      << out;
  printf("%s", out.c_str());
  EXPECT_NE(out.find("workers: a process per GPU"), std::string::npos) << out;
  EXPECT_NE(out.find("streams 5  frames 30  total "), std::string::npos) << out;
  JsonParser *parser = json_parser_new();
  JsonObject *summary = parse_object(parser, read_file(dir.file("summary.json")));
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(json_object_get_int_member(summary, "frames"), 30);
  JsonArray *per_gpu = json_object_get_array_member(summary, "per_gpu");
  const int gpus = std::min(cuda_device_count(), 5);
  ASSERT_EQ(static_cast<int>(json_array_get_length(per_gpu)), gpus);
  for (int j = 0; j < gpus; ++j) {
    JsonObject *g = json_array_get_object_element(per_gpu, static_cast<guint>(j));
    EXPECT_EQ(json_object_get_int_member(g, "streams"), (5 - j + gpus - 1) / gpus) << j;
    EXPECT_GT(json_object_get_double_member(g, "fps"), 0.0) << j;
  }
  g_object_unref(parser);
}

// The chain as many CPU-detector cameras would run it: candidates on the host, every stream's
// cudanms sharing one context (on the CPU backend each keeps its own): every frame delivered.
TEST(Streams, HostCandidatesWithBatchStreamsDeliverEveryFrame) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  std::string out;
  ASSERT_EQ(run_preloaded(dir,
                          {"--streams", "4", "--frames", "5", "--preload-frames", "3",
                           "--host-candidates", "--batch-streams"},
                          &out),
            0)
      << out;
  EXPECT_NE(out.find("streams 4  frames 20  total "), std::string::npos) << out;
  JsonParser *parser = json_parser_new();
  JsonObject *summary = parse_object(parser, read_file(dir.file("summary.json")));
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(json_object_get_int_member(summary, "frames"), 20);
  EXPECT_GT(json_object_get_double_member(summary, "nms_p50_us"), 0.0);
  g_object_unref(parser);
}

// BlazeFace through dnndetect on the CPU, batched across the streams, as the GPU benchmark runs
// it: every frame delivered, and each forward took one frame of each of the four streams (each
// stream waits for its own frame, so no batch can run short before its long timeout).
TEST(Streams, DnnDetectRunsTheStreamsFramesInOneForward) {
  SKIP_WITHOUT_VTEST();
  SKIP_WITHOUT_TORCHSCRIPT_BLAZEFACE();
  const char *build = g_getenv("CUDANMS_BUILD");
  if (!g_file_test((std::string(build ? build : "build") + "/gst-plugin/libgstcudanmsdnn.so").c_str(),
                   G_FILE_TEST_EXISTS))
    GTEST_SKIP() << "no dnndetect: built without LibTorch";
  // Without a queue after the detector and with one (--detector-queue; by default 2 after
  // dnndetect): each stream's next frame joins the next batch while cudanms takes this one; still
  // every frame, still four a forward.
  for (const std::string queue : {"", "0", "2"}) {
    SCOPED_TRACE("--detector-queue " + (queue.empty() ? "unset" : queue));
    TempDir dir;
    std::string out;
    std::vector<std::string> options = {
        "--streams", "4", "--frames", "5", "--preload-frames", "3", "--detector",
        "dnndetect backend=cpu batch-size=4 batch-timeout=30000000", "--nms",
        "cudanms method=weighted iou-threshold=0.3"};
    if (!queue.empty()) options.insert(options.end(), {"--detector-queue", queue});
    ASSERT_EQ(run_preloaded(dir, options, &out), 0) << out;
    EXPECT_NE(out.find("streams 4  frames 20  total "), std::string::npos) << out;
    EXPECT_NE(out.find("detector: 4.00 frames per forward"), std::string::npos) << out;
    JsonParser *parser = json_parser_new();
    JsonObject *summary = parse_object(parser, read_file(dir.file("summary.json")));
    ASSERT_NE(summary, nullptr);
    EXPECT_DOUBLE_EQ(json_object_get_double_member(summary, "detector_mean_batch"), 4.0);
    EXPECT_EQ(json_object_get_int_member(summary, "detector_queue"), queue == "0" ? 0 : 2);
    g_object_unref(parser);
  }
}

TEST(Streams, FileSourcesRunToTheirEnd) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  // Two streams from one short file, cut to a few frames by the decoder's segment: a file source
  // ends the stream, and the run ends when every stream has.
  GSubprocess *run = spawn({script("streams"), "--progress", "0", "--json", dir.file("s.json"),
                            opencv_sample("messi5.jpg"), opencv_sample("messi5.jpg")},
                           dir.file("stdout"), dir.file("stderr"));
  const int status = wait_exit(run, 300);
  g_object_unref(run);
  const std::string out = read_file(dir.file("stdout"));
  ASSERT_EQ(status, 0) << out << read_file(dir.file("stderr"));
  EXPECT_NE(out.find("streams 2  frames 2  "), std::string::npos) << out;
}

TEST(Streams, BadInputIsAUsageError) {
  TempDir dir;
  for (const std::vector<std::string> &argv : std::vector<std::vector<std::string>>{
           {script("streams")},
           {script("streams"), "--preload", "/nonexistent.avi", "--streams", "2"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--size", "big"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--streams", "0"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--host-candidates",
            "--detector", "cvdetect"},
           {script("streams"), "--preload-gpu", opencv_sample("vtest.avi")},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--detector-queue", "-1"},
           {script("streams"), "--nvdec", "--preload", opencv_sample("vtest.avi")},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--gpus", "0,0"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--gpus", "99"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--workers", "per-gpu"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--workers", "two"},
           {script("streams"), "--preload", opencv_sample("vtest.avi"), "--gpus", "first"}}) {
    GSubprocess *run = spawn(argv, dir.file("out"), dir.file("err"));
    EXPECT_EQ(wait_exit(run, 120), 2) << argv.back() << ": " << read_file(dir.file("err"));
    g_object_unref(run);
    if (argv.size() > 2 && argv[argv.size() - 2] == "--gpus") {
      const std::string why = "--gpus \"" + argv.back() + "\": all, or indices of the ";
      EXPECT_NE(read_file(dir.file("err")).find(why), std::string::npos)
          << read_file(dir.file("err"));
    }
  }
}

}  // namespace
}  // namespace cudanms::testing
