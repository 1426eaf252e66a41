// The camera service end to end, as a site runs it: loopback cameras (pipelines/rtsp-server
// serving vtest.avi at 10 frames/s) that the tests kill (SIGKILL), stop (SIGSTOP) and restart,
// the service (pipelines/service --config), its JSON lines, MP4 segments, HTTP endpoint (read
// with the Prometheus client's parser) and MQTT status (Debian's mosquitto). Everything on
// 127.0.0.1; every wait bounded. Skips without opencv-doc's vtest.avi.
#include <glib/gstdio.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "cudanms/nms.h"
#include "service/service_support.h"
#include "support/mp4_clip.h"
#include "support/mqtt_broker.h"

namespace cudanms::testing {
namespace {

// The settings these tests run with: a reconnect back-off of 1 s doubling to 4 s, a watchdog
// of 3 s, and a detector that keeps up with three 384x288 cameras on two cores.
constexpr double kReconnectMax = 4, kStallTimeout = 3;

std::string camera_group(const std::string &name, const std::string &url,
                         const std::string &extra = "") {
  return "\n[camera." + name + "]\nurl = " + url + "\n" + extra;
}

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    if (!g_file_test(opencv_sample("vtest.avi").c_str(), G_FILE_TEST_IS_REGULAR))
      GTEST_SKIP() << "vtest.avi is missing: install the Debian package opencv-doc";
  }

  // The [service] group: these tests' settings, with `keys` added or replacing them.
  std::string service_group(const std::map<std::string, std::string> &keys = {}) const {
    std::map<std::string, std::string> all = {{"metrics-address", "127.0.0.1:0"},
                                              {"detector", "cvdetect model=hog-people"},
                                              {"json", dir_.path + "/{camera}.jsonl"},
                                              {"reconnect-initial", "1"},
                                              {"reconnect-max", "4"},
                                              {"stall-timeout", "3"}};
    for (const auto &[key, value] : keys) all[key] = value;
    std::string text = "[service]\n";
    for (const auto &[key, value] : all) text += key + " = " + value + "\n";
    return text;
  }

  // Waits until /health says 200: every enabled camera streams.
  static bool all_streaming(ServiceRun &service, double seconds) {
    return eventually(seconds, [&] {
      int status = 0;
      service.state_of("", &status);
      return status == 200;
    });
  }

  // pipelines/service --check-config FILE must exit 2: the errors it printed, sorted.
  std::vector<std::string> check_config_errors(const std::string &file) {
    GSubprocess *check = spawn({script("service"), "--check-config", file}, dir_.file("check.out"),
                               dir_.file("check.err"));
    EXPECT_EQ(wait_exit(check, 30), 2);
    g_object_unref(check);
    std::vector<std::string> errors = lines_of(dir_.file("check.err"));
    std::sort(errors.begin(), errors.end());
    return errors;
  }

  static bool has_prometheus_client() {
    const gchar *argv[] = {python(), "-c", "import prometheus_client", nullptr};
    gint status = 1;
    return g_spawn_sync(nullptr, const_cast<gchar **>(argv), nullptr,
                        static_cast<GSpawnFlags>(G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                                                 G_SPAWN_STDERR_TO_DEV_NULL),
                        nullptr, nullptr, nullptr, nullptr, &status, nullptr) &&
           status == 0;
  }

  TempDir dir_;
};

// Kill one camera's server, bring it back, stop it (SIGSTOP) and let it go on (SIGCONT): that
// camera alone goes down and comes back; the others keep their frame rate all along.
TEST_F(Service, ACameraFailsAloneAndComesBackByItself) {
  LoopbackCamera a(dir_, "a"), b(dir_, "b"), c(dir_, "c");
  ASSERT_TRUE(a.start() && b.start() && c.start());
  ServiceRun service(dir_);
  ASSERT_TRUE(service.start(service_group() + camera_group("a", a.url()) +
                            camera_group("b", b.url()) + camera_group("c", c.url())));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();

  std::map<std::string, double> before = rates_over(service, {"a", "b", "c"}, 6);
  EXPECT_GE(before["b"], kStreamingRate) << "the cameras send 10 frames/s";

  // Killed: a's server is gone mid-stream.
  a.kill();
  ASSERT_TRUE(eventually(5, [&] { return service.state_of("a") == "reconnecting"; }))
      << service.log();
  int status = 0;
  service.state_of("a", &status);
  EXPECT_EQ(status, 503);
  std::map<std::string, double> during = rates_over(service, {"b", "c"}, 6);
  printf("b, c: %.2f, %.2f frames/s before a's server was killed, %.2f, %.2f after\n", before["b"],
         before["c"], during["b"], during["c"]);
  for (const char *camera : {"b", "c"})
    EXPECT_GE(during[camera], kRateKept * before[camera])
        << camera << " slowed while a was down: " << before[camera] << " -> " << during[camera];
  JsonObject *metrics = service.scrape("/metrics");
  ASSERT_NE(metrics, nullptr);
  EXPECT_GE(ServiceRun::value(metrics, "cudanms_camera_reconnects_total", "a"), 2);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_reconnects_total", "b"), 0);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_up", "a"), 0);

  // Back on the same port: a's frames resume within the longest back-off and 3 s.
  size_t frames = service.frames("a");
  ASSERT_TRUE(a.start());
  double since = now_s();
  ASSERT_TRUE(eventually(kReconnectMax + 3, [&] { return service.frames("a") > frames; }))
      << service.log();
  printf("a's frames again %.1f s after its server came back\n", now_s() - since);
  ASSERT_TRUE(all_streaming(service, 5)) << service.log();

  // Stopped: connected, silent. The watchdog fails it within stall-timeout (its tick is 0.5 s).
  a.stop();
  since = now_s();
  ASSERT_TRUE(eventually(kStallTimeout + 2, [&] {
    return service.log().find("camera a: streaming -> reconnecting: stalled") != std::string::npos;
  })) << service.log();
  EXPECT_LE(now_s() - since, kStallTimeout + 1);
  printf("the watchdog failed a %.1f s after its server stopped\n", now_s() - since);
  during = rates_over(service, {"b", "c"}, 6);  // a's attempts meet the stopped server meanwhile
  for (const char *camera : {"b", "c"})
    EXPECT_GE(during[camera], kRateKept * before[camera]) << camera;

  // SIGCONT: a streams again within the back-off, on one connection (twice the frames would
  // mean two), and stays up.
  frames = service.frames("a");
  const size_t log_length = service.log().size();
  a.resume();
  since = now_s();
  ASSERT_TRUE(eventually(kReconnectMax + kStallTimeout + 3, [&] {
    return service.frames("a") > frames;
  })) << service.log();
  printf("a's frames again %.1f s after SIGCONT\n", now_s() - since);
  ASSERT_TRUE(eventually(5, [&] { return service.state_of("a") == "streaming"; }));
  // One connection streams: well under twice its rate before (two would send twice the frames;
  // before itself may read as low as 8 under ASan), and no less than a streaming camera's rate.
  // Not "as much as before": under ASan on CI's 2 cores the resumed camera ran slower for
  // seconds, its server just woken (8.57 and 8.60 frames/s in two runs, 10.16 and 10.49 before);
  // the plain build keeps about 10.
  g_usleep(G_USEC_PER_SEC);
  const std::map<std::string, double> after = rates_over(service, {"a"}, 5);
  printf("a: %.2f frames/s before, %.2f after SIGCONT\n", before["a"], after.at("a"));
  EXPECT_LT(after.at("a"), 1.5 * before["a"]) << "a streams on two connections after SIGCONT";
  EXPECT_GE(after.at("a"), kStreamingRate) << "a's frame rate after SIGCONT";
  const std::string later = service.log().substr(log_length);
  EXPECT_EQ(later.find("camera a: streaming -> reconnecting"), std::string::npos) << later;
  EXPECT_EQ(later.find("camera b:"), std::string::npos) << later;
  EXPECT_EQ(later.find("camera c:"), std::string::npos) << later;
}

// A camera's own source description may name an element "source", as describe() names a URL
// camera's uridecodebin: the service connects uridecodebin's signals to uridecodebin only.
TEST_F(Service, ASourceDescriptionMayNameAnElementSource) {
  ServiceRun service(dir_);
  ASSERT_TRUE(service.start(service_group() +
                            "\n[camera.test]\nsource = videotestsrc name=source is-live=true ! "
                            "video/x-raw,width=320,height=240,framerate=10/1\n"));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  EXPECT_EQ(service.log().find("is invalid for instance"), std::string::npos) << service.log();
}

// Two GPUs (pretended: CI has none), cameras a and c placed on GPU 0, b on GPU 1; after 20
// frames GPU 1 "fails" under b (gpufault posts the cudanms-gpu-failed message). b alone restarts:
// on GPU 0 with gpu-failure = move, on the CPU with gpu-failure = cpu; a and c are not touched.
TEST_F(Service, AFailedGpuMovesOnlyItsCameras) {
  LoopbackCamera a(dir_, "a"), b(dir_, "b"), c(dir_, "c");
  ASSERT_TRUE(a.start() && b.start() && c.start());
  g_setenv("CUDANMS_TEST_GPU_COUNT", "2", TRUE);
  for (const char *policy : {"move", "cpu"}) {
    g_remove(dir_.file("service.err").c_str());  // the last run's log names its port
    ServiceRun service(dir_);
    ASSERT_TRUE(service.start(
        service_group({{"detector", "cvdetect model=hog-people ! gpufault fail-on-gpu=1 after=20"},
                       {"gpu-failure", policy}}) +
        camera_group("a", a.url()) + camera_group("b", b.url()) + camera_group("c", c.url())));
    ASSERT_TRUE(all_streaming(service, 30)) << service.log();
    ASSERT_TRUE(eventually(20, [&] {
      return service.log().find("GPU 1 failed (camera b: ") != std::string::npos;
    })) << service.log();
    const size_t frames_a = service.frames("a"), frames_c = service.frames("c");
    const double b_placed_on = std::string(policy) == "move" ? 0 : -1;
    auto b_restarted = [&] {
      JsonObject *m = service.scrape("/metrics");
      return m && ServiceRun::value(m, "cudanms_camera_up", "b") == 1 &&
             ServiceRun::value(m, "cudanms_camera_gpu", "b") == b_placed_on;
    };
    ASSERT_TRUE(eventually(15, b_restarted)) << policy << "\n" << service.log();
    JsonObject *metrics = service.scrape("/metrics");
    ASSERT_NE(metrics, nullptr);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", "a"), 0) << policy;
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", "c"), 0) << policy;
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_gpu_failed,gpu=1", ""), 1) << policy;
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_gpu_failed,gpu=0", ""), 0) << policy;
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_gpu_cameras,gpu=0", ""),
              std::string(policy) == "move" ? 3 : 2)
        << policy;
    EXPECT_GT(ServiceRun::value(metrics, "cudanms_gpu_chain_seconds_total,gpu=0", ""),
              ServiceRun::value(metrics, "cudanms_gpu_nms_seconds_total,gpu=0", ""))
        << policy;
    // a and c streamed on all along, on one connection each.
    EXPECT_TRUE(eventually(
        5, [&] { return service.frames("a") > frames_a && service.frames("c") > frames_c; }));
    const std::string log = service.log();
    for (const char *camera : {"a", "c"}) {
      EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_reconnects_total", camera), 0);
      EXPECT_EQ(log.find(std::string("camera ") + camera + ": streaming ->"), std::string::npos)
          << log;
    }
    EXPECT_NE(log.find("camera b: streaming -> stopped: GPU 1 failed"), std::string::npos) << log;
  }
  g_unsetenv("CUDANMS_TEST_GPU_COUNT");
}

// Two GPUs (pretended), a worker process each (workers = per-gpu, their default). SIGKILL to GPU
// 1's worker: its camera streams again within the first back-off (1 s) and 2 s, while GPU 0's
// cameras stream on, their worker untouched; a reload reaches both workers; SIGTERM finalises
// every camera's outputs.
TEST_F(Service, AKilledWorkerComesBackAndTheOtherGpusCamerasDoNotNotice) {
  constexpr double kFirstBackoff = 1;
  const std::string source =
      "source = videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=10/1\n";
  auto cameras = [&](const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names) text += "\n[camera." + name + "]\n" + source;
    return text;
  };
  g_setenv("CUDANMS_TEST_GPU_COUNT", "2", TRUE);
  ServiceRun service(dir_);
  ASSERT_TRUE(service.start(service_group() + cameras({"a", "b", "c"})));
  g_unsetenv("CUDANMS_TEST_GPU_COUNT");  // the service's children inherited it
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  ASSERT_NE(service.log().find("a worker process per GPU"), std::string::npos) << service.log();
  JsonObject *metrics = service.scrape("/metrics");
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", "a"), 0);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", "b"), 1);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", "c"), 0);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_worker_up,worker=1", ""), 1);
  EXPECT_GT(ServiceRun::value(metrics, "process_resident_memory_bytes,worker=0", ""), 0);
  EXPECT_GT(ServiceRun::value(metrics, "process_resident_memory_bytes,worker=supervisor", ""), 0);
  auto worker_pid = [&](const char *gpu) -> GPid {
    JsonObject *health = service.scrape("/health");
    if (!health) return 0;
    JsonObject *workers =
        json_object_get_object_member(json_object_get_object_member(health, "health"), "workers");
    return static_cast<GPid>(
        json_object_get_int_member(json_object_get_object_member(workers, gpu), "pid"));
  };
  const GPid gpu0 = worker_pid("0"), gpu1 = worker_pid("1");
  ASSERT_GT(gpu0, 0);
  ASSERT_GT(gpu1, 0);
  const std::map<std::string, double> before = rates_over(service, {"a", "c"}, 4);

  const size_t log_length = service.log().size();
  ASSERT_EQ(kill(gpu1, SIGKILL), 0);
  const double killed = now_s();
  g_usleep(100 * 1000);
  const size_t frames_b = service.frames("b");
  const std::map<std::string, double> during = rates_over(service, {"a", "c"}, 1.5);
  ASSERT_TRUE(eventually(kFirstBackoff + 2 - (now_s() - killed), [&] {
    return service.frames("b") > frames_b;
  })) << service.log();
  printf(
      "b's frames again %.2f s after its worker was killed; a, c: %.1f, %.1f frames/s before, "
      "%.1f, %.1f meanwhile\n",
      now_s() - killed, before.at("a"), before.at("c"), during.at("a"), during.at("c"));
  for (const char *camera : {"a", "c"})
    EXPECT_GE(during.at(camera), 0.9 * before.at(camera)) << camera << " slowed";
  ASSERT_TRUE(all_streaming(service, 5)) << service.log();
  EXPECT_EQ(worker_pid("0"), gpu0) << "GPU 0's worker was restarted too";
  metrics = service.scrape("/metrics");
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_worker_restarts_total,worker=1", ""), 1);
  EXPECT_EQ(ServiceRun::value(metrics, "cudanms_worker_restarts_total,worker=0", ""), 0);
  for (const char *camera : {"a", "c"})
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_reconnects_total", camera), 0) << camera;
  std::string later = service.log().substr(log_length);
  EXPECT_NE(later.find("worker of GPU 1 (pid " + std::to_string(gpu1) + ") killed by signal 9"),
            std::string::npos)
      << later;
  EXPECT_EQ(later.find("camera a:"), std::string::npos) << later;
  EXPECT_EQ(later.find("camera c:"), std::string::npos) << later;

  // A reload: c removed, d added (on the GPU with the fewest cameras); a and b not touched.
  const size_t reload_at = service.log().size();
  service.write_config(service_group() + cameras({"a", "b", "d"}));
  service.signal(SIGHUP);
  ASSERT_TRUE(eventually(15, [&] { return service.frames("d") > 5; })) << service.log();
  EXPECT_EQ(service.state_of("c"), "absent");
  later = service.log().substr(reload_at);
  EXPECT_NE(later.find("camera c: streaming -> stopped: removed from the config"),
            std::string::npos)
      << later;
  EXPECT_EQ(later.find("camera a:"), std::string::npos) << later;
  EXPECT_EQ(later.find("camera b:"), std::string::npos) << later;

  // SIGTERM: every worker finalises its cameras, then the supervisor exits 0.
  service.signal(SIGTERM);
  EXPECT_EQ(service.wait_exit(20), 0) << service.log();
  for (const char *camera : {"a", "b", "d"}) {
    CameraLines lines;
    service.parse_lines(camera, &lines);
    ASSERT_TRUE(lines.error.empty()) << lines.error;
    ASSERT_FALSE(lines.states.empty()) << camera;
    EXPECT_STREQ(json_object_get_string_member(lines.states.back(), "state"), "stopped") << camera;
  }
}

// Down when the service starts: retried (and counted) while the other streams; then it comes
// back at one size, and after a restart at another: frames and boxes follow each size.
TEST_F(Service, ACameraDownAtStartIsRetriedAndMayComeBackAtAnotherSize) {
  LoopbackCamera u(dir_, "u"), v(dir_, "v");
  ASSERT_TRUE(v.start());
  const int port = free_port();
  ServiceRun service(dir_);
  ASSERT_TRUE(service.start(
      service_group() + camera_group("u", "rtsp://127.0.0.1:" + std::to_string(port) + "/stream") +
      camera_group("v", v.url())));
  ASSERT_TRUE(eventually(10, [&] {
    JsonObject *m = service.scrape("/metrics");
    return m && ServiceRun::value(m, "cudanms_camera_reconnects_total", "u") >= 2;
  })) << service.log();
  EXPECT_EQ(service.state_of("u"), "reconnecting");
  EXPECT_EQ(service.state_of("v"), "streaming");
  EXPECT_GT(service.frames("v"), 20u);
  EXPECT_EQ(service.frames("u"), 0u);

  ASSERT_TRUE(u.start("384x288", port));
  ASSERT_TRUE(eventually(kReconnectMax + 3, [&] { return service.frames("u") > 10; }))
      << service.log();
  u.kill();
  ASSERT_TRUE(u.start("640x480", port));
  ASSERT_TRUE(eventually(kReconnectMax + kStallTimeout + 3, [&] {
    CameraLines lines;
    service.parse_lines("u", &lines);
    size_t big = 0;
    for (JsonObject *f : lines.frames) big += json_object_get_int_member(f, "width") == 640;
    return big >= 20;
  })) << service.log();

  CameraLines lines;
  service.parse_lines("u", &lines);
  ASSERT_EQ(lines.error, "");
  size_t boxes[2] = {0, 0};
  for (JsonObject *f : lines.frames) {
    const gint64 w = json_object_get_int_member(f, "width");
    const gint64 h = json_object_get_int_member(f, "height");
    ASSERT_TRUE((w == 384 && h == 288) || (w == 640 && h == 480)) << w << "x" << h;
    JsonArray *array = json_object_get_array_member(f, "boxes");
    for (guint i = 0; i < json_array_get_length(array); ++i) {
      JsonObject *box = json_array_get_object_element(array, i);
      const double x = json_object_get_double_member(box, "x");
      const double y = json_object_get_double_member(box, "y");
      EXPECT_GE(x, 0);
      EXPECT_GE(y, 0);
      EXPECT_LE(x + json_object_get_double_member(box, "w"), w + 1e-3);
      EXPECT_LE(y + json_object_get_double_member(box, "h"), h + 1e-3);
      boxes[w == 640]++;
    }
  }
  EXPECT_GT(boxes[1], 0u) << "no person found in the 640x480 frames";
  // The gaps are in the file: the state lines say when u was away, and why.
  bool reconnecting = false;
  for (JsonObject *s : lines.states)
    reconnecting |= g_str_equal(json_object_get_string_member(s, "state"), "reconnecting");
  EXPECT_TRUE(reconnecting);
}

// SIGHUP: a removed camera stops (its last line says so), a changed one restarts, an added one
// starts, and the camera left as it was never pauses. A config with errors changes nothing.
TEST_F(Service, AReloadTouchesOnlyTheCamerasItChanges) {
  LoopbackCamera a(dir_, "a"), b(dir_, "b"), c(dir_, "c"), d(dir_, "d");
  ASSERT_TRUE(a.start() && b.start() && c.start() && d.start());
  ServiceRun service(dir_);
  const std::string common = service_group() + camera_group("a", a.url());
  ASSERT_TRUE(service.start(common + camera_group("b", b.url()) + camera_group("c", c.url())));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  CameraLines a_before;
  service.parse_lines("a", &a_before);

  // a's frames, sampled every 50 ms from 2 s before the reload to 5 s after it.
  size_t last = service.frames("a");
  double last_change = now_s(), longest_pause = 0;
  auto sample_a = [&](double seconds) {
    const double end = now_s() + seconds;
    while (now_s() < end) {
      const size_t n = service.frames("a");
      if (n != last) {
        longest_pause = std::max(longest_pause, now_s() - last_change);
        last = n;
        last_change = now_s();
      }
      g_usleep(50 * 1000);
    }
  };
  sample_a(2);
  service.write_config(common + camera_group("c", c.url(), "iou-threshold = 0.45\n") +
                       camera_group("d", d.url()));
  service.signal(SIGHUP);
  sample_a(5);
  EXPECT_LT(longest_pause, 1.0) << "a paused during the reload";
  EXPECT_NE(service.log().find(
                "SIGHUP: 1 added, 1 removed, 1 restarted, 0 with new lines or zones, 1 untouched"),
            std::string::npos)
      << service.log();

  CameraLines a_after, b_lines, c_lines;
  service.parse_lines("a", &a_after);
  EXPECT_EQ(a_after.states.size(), a_before.states.size()) << "a changed state in the reload";
  service.parse_lines("b", &b_lines);
  ASSERT_FALSE(b_lines.states.empty());
  JsonObject *b_last = b_lines.states.back();
  EXPECT_STREQ(json_object_get_string_member(b_last, "state"), "stopped");
  EXPECT_STREQ(json_object_get_string_member(b_last, "reason"), "removed from the config");
  service.parse_lines("c", &c_lines);
  bool restarted = false;
  for (JsonObject *s : c_lines.states)
    restarted |=
        g_str_equal(json_object_get_string_member(s, "reason"), "its settings changed: restarting");
  EXPECT_TRUE(restarted);
  const size_t b_frames = service.frames("b"), c_frames = service.frames("c");
  ASSERT_TRUE(all_streaming(service, 10)) << service.log();
  EXPECT_EQ(service.state_of("b"), "absent");
  EXPECT_EQ(service.state_of("d"), "streaming");
  g_usleep(1000 * 1000);
  EXPECT_EQ(service.frames("b"), b_frames);
  EXPECT_GT(service.frames("c"), c_frames);

  // A config with an error: every camera runs on untouched.
  service.write_config(common + camera_group("c", c.url(), "iou-threshold = 2\n"));
  service.signal(SIGHUP);
  ASSERT_TRUE(eventually(5, [&] {
    return service.log().find("has 1 errors: nothing changed") != std::string::npos;
  })) << service.log();
  EXPECT_NE(service.log().find("cameras.conf:camera.c:iou-threshold: is out of range"),
            std::string::npos);
  EXPECT_EQ(service.state_of("d"), "streaming");
}

// What /metrics says (through the Prometheus client's parser) equals what the outputs hold; a
// stop (SIGTERM) finalises every output: each MP4 segment plays, each JSON line parses, each
// camera's retained MQTT status ends "offline"; exit 0 within a few seconds.
TEST_F(Service, MetricsEqualTheOutputsAndAStopFinalisesThem) {
  if (!has_prometheus_client())
    GTEST_SKIP() << "no prometheus_client for python3 (Debian package python3-prometheus-client)";
  std::map<std::string, std::string> keys = {
      {"stall-timeout", "60"}, {"record-dir", dir_.path + "/rec"}, {"record-segment", "2"}};
  std::unique_ptr<Broker> broker;
  std::unique_ptr<Subscriber> subscriber;
#ifdef CUDANMS_HAVE_MQTT
  if (!mosquitto_binary().empty() && !mosquitto_sub_binary().empty()) {
    broker = std::make_unique<Broker>(free_port());
    ASSERT_TRUE(broker->start());
    subscriber = std::make_unique<Subscriber>(broker->port(), "site/#", true);
    ASSERT_TRUE(subscriber->connected());
    keys["mqtt-address"] = broker->address();
    keys["mqtt-prefix"] = "site";
  }
#endif
  LoopbackCamera a(dir_, "a"), b(dir_, "b");
  ASSERT_TRUE(a.start() && b.start());
  const std::string recordings = dir_.path + "/rec";
  ServiceRun service(dir_);
  // A long stall-timeout: the servers are stopped below to freeze the counts, not to fail.
  ASSERT_TRUE(
      service.start(service_group(keys) + camera_group("a", a.url()) + camera_group("b", b.url())));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  g_usleep(5 * 1000 * 1000);
  a.stop();
  b.stop();
  g_usleep(1500 * 1000);  // what was on its way arrives

  JsonObject *metrics = service.scrape("/metrics");
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(json_object_get_int_member(metrics, "status"), 200);
  for (const char *camera : {"a", "b"}) {
    CameraLines lines;
    service.parse_lines(camera, &lines);
    ASSERT_EQ(lines.error, "");
    double kept = 0, candidates = 0;
    for (JsonObject *f : lines.frames) {
      kept += json_object_get_int_member(f, "kept");
      candidates += json_object_get_int_member(f, "candidates");
    }
    const double frames = lines.frames.size();
    EXPECT_GT(frames, 40) << camera;
    EXPECT_GT(kept, 0) << camera;
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_frames_total", camera), frames);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_kept_boxes_total", camera), kept);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_candidates_total", camera), candidates);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_nms_latency_seconds_count", camera),
              frames);
    EXPECT_GT(
        ServiceRun::value(metrics, "cudanms_camera_nms_latency_seconds,quantile=0.99", camera), 0);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_state,state=streaming", camera), 1);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_state,state=failed", camera), 0);
    EXPECT_GT(ServiceRun::value(metrics, "cudanms_camera_last_frame_age_seconds", camera), 1);
    // Placed on the first GPU where there is one (the two cameras: GPU 0 and 1 where there are
    // two), else on the CPU; detector and NMS time measured either way.
    const int gpus = cudanms::cuda_device_count();
    const int placed_on = gpus == 0 ? -1 : (std::string(camera) == "b" && gpus > 1 ? 1 : 0);
    EXPECT_EQ(ServiceRun::value(metrics, "cudanms_camera_gpu", camera), placed_on);
    EXPECT_GT(ServiceRun::value(metrics, "cudanms_camera_load", camera), 0);
    // The detector's and NMS's time together: more than NMS's alone.
    EXPECT_GT(ServiceRun::value(metrics, "cudanms_camera_chain_seconds_total", camera),
              ServiceRun::value(metrics, "cudanms_camera_nms_latency_seconds_sum", camera));
    if (broker) {
      // QoS 0: published once written to the socket; the broker is up, so every frame was.
      EXPECT_TRUE(eventually(3, [&] {
        JsonObject *m = service.scrape("/metrics");
        return m &&
               ServiceRun::value(m, "cudanms_camera_messages_published_total", camera) == frames;
      })) << camera;
    }
  }
  EXPECT_GT(ServiceRun::value(metrics, "cudanms_uptime_seconds", ""), 5);
  EXPECT_GT(ServiceRun::value(metrics, "process_resident_memory_bytes", ""), 1e6);
  EXPECT_GT(ServiceRun::value(metrics, "cudanms_process_heap_bytes", ""), 1e5);
  EXPECT_GE(ServiceRun::value(metrics, "cudanms_process_threads", ""), 2);  // main, streaming
  EXPECT_GE(ServiceRun::value(metrics, "process_open_fds", ""), 4);         // stdio, HTTP socket

  a.resume();
  b.resume();
  const double stop_sent = now_s();
  service.signal(SIGTERM);
  EXPECT_EQ(service.wait_exit(15), 0) << service.log();
  printf("stopped, every output finalised, in %.2f s\n", now_s() - stop_sent);
  EXPECT_LT(now_s() - stop_sent, 5) << "the stop took too long";

  for (const char *camera : {"a", "b"}) {
    CameraLines lines;
    service.parse_lines(camera, &lines);
    ASSERT_EQ(lines.error, "") << camera;
    ASSERT_FALSE(lines.states.empty());
    EXPECT_STREQ(json_object_get_string_member(lines.states.back(), "state"), "stopped");
    EXPECT_STREQ(json_object_get_string_member(lines.states.back(), "reason"), "the service stops");
    size_t segments = 0;
    GDir *dir = g_dir_open(recordings.c_str(), 0, nullptr);
    ASSERT_NE(dir, nullptr);
    while (const gchar *name = g_dir_read_name(dir)) {
      if (!g_str_has_prefix(name, (std::string(camera) + "-").c_str())) continue;
      const std::string path = recordings + "/" + name;
      segments++;
      EXPECT_GT(mp4_frames(path), 0) << path << " does not play to its end";
      const gchar *argv[] = {"gst-discoverer-1.0", path.c_str(), nullptr};
      gint status = 1;
      g_spawn_sync(nullptr, const_cast<gchar **>(argv), nullptr,
                   static_cast<GSpawnFlags>(G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                                            G_SPAWN_STDERR_TO_DEV_NULL),
                   nullptr, nullptr, nullptr, nullptr, &status, nullptr);
      EXPECT_TRUE(g_spawn_check_wait_status(status, nullptr)) << "gst-discoverer-1.0 " << path;
    }
    g_dir_close(dir);
    EXPECT_GE(segments, 2u) << camera << ": 2 s segments over more than 6 s";
  }
  if (broker) {
    // The retained status says it last: the cameras and the service went offline.
    ASSERT_TRUE(eventually(5, [&] {
      const std::vector<std::string> m = subscriber->messages();
      std::map<std::string, std::string> last;
      for (const std::string &line : m) last[line.substr(0, line.find(' '))] = line;
      return last["site/a/status"] == "site/a/status offline" &&
             last["site/b/status"] == "site/b/status offline" &&
             last["site/status"] == "site/status offline";
    }));
    const std::vector<std::string> m = subscriber->messages();
    EXPECT_NE(std::find(m.begin(), m.end(), "site/a/status online"), m.end());
    EXPECT_NE(std::find(m.begin(), m.end(), "site/status online"), m.end());
  }
}

#ifdef CUDANMS_HAVE_MQTT
// SIGKILL leaves no time for goodbyes: the broker publishes each connection's last will, so that
// subscribers still learn that every camera and the service are offline.
TEST_F(Service, AKilledServiceIsMarkedOfflineByTheBroker) {
  if (mosquitto_binary().empty() || mosquitto_sub_binary().empty())
    GTEST_SKIP() << "no mosquitto or mosquitto_sub (Debian packages mosquitto, mosquitto-clients)";
  Broker broker(free_port());
  ASSERT_TRUE(broker.start());
  LoopbackCamera a(dir_, "a");
  ASSERT_TRUE(a.start());
  ServiceRun service(dir_);
  ASSERT_TRUE(
      service.start(service_group({{"mqtt-address", broker.address()}, {"mqtt-prefix", "site"}}) +
                    camera_group("a", a.url())));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  {
    // A subscriber that comes later reads the retained states.
    Subscriber late(broker.port(), "site/#", true);
    ASSERT_TRUE(late.connected());
    ASSERT_TRUE(eventually(5, [&] { return late.messages().size() >= 2; }));
    const std::vector<std::string> m = late.messages();
    EXPECT_NE(std::find(m.begin(), m.end(), "site/a/status online"), m.end());
    EXPECT_NE(std::find(m.begin(), m.end(), "site/status online"), m.end());
  }
  service.signal(SIGKILL);
  service.wait_exit(5);
  Subscriber after(broker.port(), "site/+/status", true);
  Subscriber service_status(broker.port(), "site/status", true);
  EXPECT_TRUE(eventually(10, [&] {
    const std::vector<std::string> m = after.messages(), s = service_status.messages();
    return std::find(m.begin(), m.end(), "site/a/status offline") != m.end() &&
           std::find(s.begin(), s.end(), "site/status offline") != s.end();
  }));
}

// A second SIGTERM does not wait: here the broker is away, so the first would give the queued
// messages their flush timeout.
TEST_F(Service, ASecondSignalExitsAtOnce) {
  LoopbackCamera a(dir_, "a");
  ASSERT_TRUE(a.start());
  ServiceRun service(dir_);
  ASSERT_TRUE(
      service.start(service_group({{"mqtt-address", "127.0.0.1:" + std::to_string(free_port())}}) +
                    camera_group("a", a.url())));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  service.signal(SIGTERM);
  g_usleep(300 * 1000);
  const double second = now_s();
  service.signal(SIGTERM);
  EXPECT_EQ(service.wait_exit(5), 128 + SIGTERM) << service.log();
  EXPECT_LT(now_s() - second, 1.0);
  EXPECT_NE(service.log().find("again: exiting now"), std::string::npos) << service.log();
}
#endif

// What a counting camera's outputs say, after it stopped sending: line-crossed events in its JSON
// lines, the line's in + out on its last frame, the highest track id.
struct Counted {
  size_t events = 0;
  gint64 line_total = 0, labelled_total = 0, highest_id = 0;  // labelled: the door's by label
  size_t frames = 0;
};

// A line's crossings by label, added up.
gint64 labelled_total(JsonObject *line) {
  JsonObject *labels = json_object_get_object_member(line, "labels");
  gint64 total = 0;
  GList *names = json_object_get_members(labels);
  for (GList *l = names; l; l = l->next) {
    JsonObject *n = json_object_get_object_member(labels, static_cast<const char *>(l->data));
    total += json_object_get_int_member(n, "in") + json_object_get_int_member(n, "out");
  }
  g_list_free(names);
  return total;
}

Counted counted(const ServiceRun &service, const std::string &camera) {
  CameraLines lines;
  service.parse_lines(camera, &lines);
  Counted c;
  c.frames = lines.frames.size();
  for (JsonObject *f : lines.frames) {
    JsonArray *events = json_object_get_array_member(f, "events");
    for (guint i = 0; events && i < json_array_get_length(events); i++)
      c.events += g_str_equal(
          json_object_get_string_member(json_array_get_object_element(events, i), "kind"),
          "line-crossed");
    JsonArray *boxes = json_object_get_array_member(f, "boxes");
    for (guint i = 0; i < json_array_get_length(boxes); i++)
      c.highest_id =
          std::max(c.highest_id, json_object_get_int_member_with_default(
                                     json_array_get_object_element(boxes, i), "track_id", 0));
    if (JsonObject *counts = json_object_get_object_member(f, "counts")) {
      JsonObject *door =
          json_object_get_object_member(json_object_get_object_member(counts, "lines"), "door");
      c.line_total =
          json_object_get_int_member(door, "in") + json_object_get_int_member(door, "out");
      c.labelled_total = labelled_total(door);
    }
  }
  return c;
}

// After `camera` stopped sending with `before` and came back: within `timeout_s` 20 frames more,
// the first of them counting on from before's count, tracked boxes on them and every id a new one.
void expect_counts_go_on(const ServiceRun &service, const std::string &camera,
                         const Counted &before, double timeout_s) {
  ASSERT_TRUE(eventually(timeout_s, [&] {
    return counted(service, camera).frames > before.frames + 20;
  })) << service.log();
  CameraLines after;
  service.parse_lines(camera, &after);
  JsonObject *first = after.frames[before.frames];
  JsonObject *door = json_object_get_object_member(
      json_object_get_object_member(json_object_get_object_member(first, "counts"), "lines"),
      "door");
  EXPECT_GE(json_object_get_int_member(door, "in") + json_object_get_int_member(door, "out"),
            before.line_total);
  EXPECT_GE(labelled_total(door), before.labelled_total) << "the counts by label went back";
  EXPECT_EQ(before.labelled_total, before.line_total) << "every crossing has its label";
  size_t tracked = 0;
  for (size_t i = before.frames; i < after.frames.size(); i++) {
    JsonArray *boxes = json_object_get_array_member(after.frames[i], "boxes");
    for (guint k = 0; k < json_array_get_length(boxes); k++) {
      const gint64 id = json_object_get_int_member_with_default(
          json_array_get_object_element(boxes, k), "track_id", 0);
      if (id != 0) {
        ASSERT_GT(id, before.highest_id) << "an id given again after the reconnection";
        tracked++;
      }
    }
  }
  printf("%zu frames and %zu tracked boxes after the camera came back, ids above %" G_GINT64_FORMAT
         "\n",
         after.frames.size() - before.frames, tracked, before.highest_id);
  EXPECT_GT(tracked, 0u) << "no tracked box after the camera came back";
}

// The crossings of `camera`'s JSON lines, by track id, are those /api/events gives (within 5 s:
// the history is written by a thread of its own); *in_lines: them.
void expect_history_has_the_crossings(ServiceRun &service, const std::string &camera,
                                      std::vector<gint64> *in_lines) {
  std::vector<gint64> kept;
  CameraLines all;
  service.parse_lines(camera, &all);
  for (JsonObject *f : all.frames) {
    JsonArray *events = json_object_get_array_member(f, "events");
    for (guint i = 0; events && i < json_array_get_length(events); i++) {
      JsonObject *e = json_array_get_object_element(events, i);
      if (g_str_equal(json_object_get_string_member(e, "kind"), "line-crossed"))
        in_lines->push_back(json_object_get_int_member(e, "track_id"));
    }
  }
  const std::string page = "/api/events?camera=" + camera + "&kind=line-crossed&limit=1000";
  ASSERT_TRUE(eventually(5,
                         [&] {
                           JsonObject *answer = service.scrape(page.c_str());
                           if (!answer || json_object_get_int_member(answer, "status") != 200)
                             return false;
                           JsonArray *events = json_object_get_array_member(
                               json_object_get_object_member(answer, "health"), "events");
                           kept.clear();
                           for (guint i = 0; i < json_array_get_length(events); i++)
                             kept.push_back(json_object_get_int_member(
                                 json_array_get_object_element(events, i), "track"));
                           return kept.size() >= in_lines->size();
                         }))
      << "the history has " << kept.size() << " of " << in_lines->size() << " crossings";
  std::vector<gint64> expected = *in_lines;
  std::sort(expected.begin(), expected.end());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, expected);
}

// A camera counting people over a line, as a site runs it: its crossings on /metrics equal its
// JSON lines' events; after its camera is killed, or stopped, and comes back the counts and the
// ids go on; a reload with one more line takes it while the camera runs, and the first line's count
// goes on.
TEST_F(Service, CountsSurviveAReconnectionAndANewLine) {
  // At full size: HOG finds vtest.avi's people from 64 x 128 px up.
  LoopbackCamera a(dir_, "a", "768x576");
  ASSERT_TRUE(a.start());
  ServiceRun service(dir_);
  // vtest.avi's people walk across the middle of the frame.
  const std::string door = "lines = door:384,0,384,576\n";
  const std::map<std::string, std::string> history = {{"history", dir_.file("history.sqlite")},
                                                      {"snapshots", dir_.file("events")},
                                                      {"clips", "true"},
                                                      {"clip-pre-capture", "2"},
                                                      {"clip-post-capture", "1"}};
  ASSERT_TRUE(service.start(service_group(history) + camera_group("a", a.url(), door)));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  ASSERT_TRUE(eventually(60, [&] { return counted(service, "a").events >= 2; }))
      << "no crossing in 60 s\n"
      << service.log();

  a.kill();
  ASSERT_TRUE(eventually(5, [&] { return service.state_of("a") == "reconnecting"; }));
  g_usleep(500 * 1000);
  const Counted before = counted(service, "a");
  EXPECT_EQ(before.line_total, static_cast<gint64>(before.events));
  JsonObject *metrics = service.scrape("/metrics");
  ASSERT_NE(metrics, nullptr);
  double crossings = 0;
  JsonObjectIter iter;
  const gchar *name;
  JsonNode *node;
  json_object_iter_init(&iter, json_object_get_object_member(metrics, "metrics"));
  while (json_object_iter_next(&iter, &name, &node))
    if (g_str_has_prefix(name, "cudanms_line_crossings_total,direction=") &&
        strstr(name, ",line=door"))
      crossings += ServiceRun::value(metrics, name, "a");
  EXPECT_EQ(crossings, static_cast<double>(before.events));

  // Back: the first frames count on from where the camera stopped, with new ids.
  ASSERT_TRUE(a.start());
  ASSERT_NO_FATAL_FAILURE(expect_counts_go_on(service, "a", before, kReconnectMax + 5));

  // Stopped (SIGSTOP): connected and silent until the watchdog fails it; after SIGCONT the
  // counts and the ids go on as after the kill.
  const size_t log_length = service.log().size();
  a.stop();
  ASSERT_TRUE(eventually(kStallTimeout + 2, [&] {
    return service.log().find("camera a: streaming -> reconnecting: stalled", log_length) !=
           std::string::npos;
  })) << service.log();
  const Counted stalled = counted(service, "a");
  a.resume();
  ASSERT_NO_FATAL_FAILURE(
      expect_counts_go_on(service, "a", stalled, kReconnectMax + kStallTimeout + 5));

  // A reload with one more line: no restart, both lines from the next frames, door's count on.
  const Counted reloaded = counted(service, "a");
  service.write_config(
      service_group(history) +
      camera_group("a", a.url(), "lines = door:384,0,384,576;top:0,200,768,200\n"));
  service.signal(SIGHUP);
  ASSERT_TRUE(eventually(5, [&] {
    return service.log().find("0 restarted, 1 with new lines or zones") != std::string::npos;
  })) << service.log();
  ASSERT_TRUE(eventually(10, [&] { return counted(service, "a").frames > reloaded.frames + 10; }));
  CameraLines last;
  service.parse_lines("a", &last);
  JsonObject *lines = json_object_get_object_member(
      json_object_get_object_member(last.frames.back(), "counts"), "lines");
  EXPECT_TRUE(json_object_has_member(lines, "top"));
  JsonObject *door_now = json_object_get_object_member(lines, "door");
  EXPECT_GE(
      json_object_get_int_member(door_now, "in") + json_object_get_int_member(door_now, "out"),
      reloaded.line_total);
  EXPECT_EQ(service.log().find("camera a: streaming -> stopped"), std::string::npos);

  // Every crossing of the JSON lines is in the history, searched as an operator would.
  std::vector<gint64> in_lines;
  ASSERT_NO_FATAL_FAILURE(expect_history_has_the_crossings(service, "a", &in_lines));
  JsonObject *scraped = service.scrape("/metrics");
  ASSERT_NE(scraped, nullptr);
  EXPECT_GE(ServiceRun::value(scraped, "cudanms_history_events_written_total", ""),
            static_cast<double>(in_lines.size()));
  EXPECT_EQ(ServiceRun::value(scraped, "cudanms_history_events_dropped_total", ""), 0.0);
  JsonObject *bad = service.scrape("/api/events?since=yesterday");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(json_object_get_int_member(bad, "status"), 400);

  // Each crossing with its picture: the frame 640 wide, its file under the snapshots' folder.
  std::vector<std::string> pictures;
  ASSERT_TRUE(eventually(5,
                         [&] {
                           JsonObject *answer =
                               service.scrape("/api/events?camera=a&kind=line-crossed&limit=1000");
                           JsonArray *events = json_object_get_array_member(
                               json_object_get_object_member(answer, "health"), "events");
                           pictures.clear();
                           for (guint i = 0; i < json_array_get_length(events); i++) {
                             JsonNode *url = json_object_get_member(
                                 json_array_get_object_element(events, i), "snapshot");
                             if (url && !JSON_NODE_HOLDS_NULL(url))
                               pictures.push_back(json_node_get_string(url));
                           }
                           return pictures.size() == in_lines.size();
                         }))
      << pictures.size() << " of " << in_lines.size() << " crossings have a picture";
  JsonObject *picture = service.scrape(pictures.front().c_str());
  ASSERT_NE(picture, nullptr);
  EXPECT_EQ(json_object_get_int_member(picture, "status"), 200);
  JsonObject *jpeg = json_object_get_object_member(picture, "jpeg");
  ASSERT_NE(jpeg, nullptr);
  EXPECT_EQ(json_object_get_int_member(jpeg, "width"), 640);
  EXPECT_EQ(json_object_get_int_member(jpeg, "height"), 480);
  GDir *folder = g_dir_open(dir_.file("events/a").c_str(), 0, nullptr);
  ASSERT_NE(folder, nullptr) << "no pictures' folder for camera a";
  size_t files = 0;
  while (const gchar *name = g_dir_read_name(folder)) files += g_str_has_suffix(name, ".jpg");
  g_dir_close(folder);
  EXPECT_GE(files, 1u);
  EXPECT_LE(files, in_lines.size());  // one a frame: crossings of one frame share it

  // Crossings with their clips, cut from the camera's own H.264: served whole and by ranges (a
  // browser seeks), each playing whole. (Crossings before a connection's first keyframe have
  // none.)
  auto clip_urls = [&] {
    std::set<std::string> urls;
    JsonObject *answer = service.scrape("/api/events?camera=a&kind=line-crossed&limit=1000");
    if (!answer) return urls;
    JsonArray *events =
        json_object_get_array_member(json_object_get_object_member(answer, "health"), "events");
    for (guint i = 0; i < json_array_get_length(events); i++) {
      JsonNode *url = json_object_get_member(json_array_get_object_element(events, i), "clip");
      if (url && !JSON_NODE_HOLDS_NULL(url)) urls.insert(json_node_get_string(url));
    }
    return urls;
  };
  const std::set<std::string> clips = clip_urls();
  ASSERT_FALSE(clips.empty()) << "no crossing has a clip";
  for (const std::string &url : clips) {
    JsonObject *clip = nullptr;
    ASSERT_TRUE(eventually(10,
                           [&] {  // muxed once the post-capture has passed
                             clip = service.scrape(url.c_str());
                             return clip && json_object_get_int_member(clip, "status") == 200;
                           }))
        << url << " not served";
    JsonObject *mp4 = json_object_get_object_member(clip, "mp4");
    ASSERT_NE(mp4, nullptr) << url << " is not video/mp4";
    JsonObject *range = json_object_get_object_member(mp4, "range");
    EXPECT_EQ(json_object_get_int_member(range, "status"), 206) << url;
    EXPECT_EQ(json_object_get_int_member(range, "bytes"), 100) << url;
    EXPECT_EQ(std::string(json_object_get_string_member(range, "content_range")),
              "bytes 100-199/" + std::to_string(json_object_get_int_member(mp4, "bytes")))
        << url;
  }
  // The folder as it is now: the camera goes on, and a clip of a crossing since the scrape may
  // be recording still (not one of `clips`), but none is left unfinished.
  std::vector<std::string> names;
  folder = g_dir_open(dir_.file("events/a").c_str(), 0, nullptr);
  while (const gchar *name = g_dir_read_name(folder)) names.push_back(name);
  g_dir_close(folder);
  size_t played = 0;
  for (const std::string &name : names) {
    const std::string path = dir_.file(("events/a/" + name).c_str());
    if (g_str_has_suffix(name.c_str(), ".part")) {
      EXPECT_TRUE(eventually(10, [&] { return !g_file_test(path.c_str(), G_FILE_TEST_EXISTS); }))
          << name << " left unfinished";
      continue;
    }
    if (!g_str_has_suffix(name.c_str(), ".mp4")) continue;
    DecodedClip clip;
    EXPECT_TRUE(decode_clip(path, &clip)) << name;
    EXPECT_TRUE(clip.starts_on_keyframe) << name;
    EXPECT_GE(clip.seconds(), 0.9) << name << ": shorter than its post-capture";
    played++;
  }
  EXPECT_GE(played, 1u);
  // Events close together share one; the camera went on, so count its events as they are now.
  EXPECT_LE(played, clip_urls().size());
}

// The detector a site counts people and cars with, as a config names it: NanoDet-g (the set-up's
// model) on a camera of vtest.avi, counted over a line; every box a person or a car, named so. A
// camera whose classes name no COCO class fails alone, saying which.
TEST_F(Service, CountsNanoDetsPeopleAndCars) {
  const std::string plugin =
      std::string(g_getenv("CUDANMS_BUILD")) + "/gst-plugin/libgstcudanmsdnn.so";
  gchar *model = g_build_filename(g_get_user_cache_dir(), "cudanms", "human-models-3.0.4",
                                  "nanodet.torchscript.pt", nullptr);
  const bool have = g_file_test(plugin.c_str(), G_FILE_TEST_IS_REGULAR) &&
                    g_file_test(model, G_FILE_TEST_IS_REGULAR);
  g_free(model);
  if (!have) GTEST_SKIP() << "no dnndetect (LibTorch) or no converted NanoDet (the set-up's)";
  LoopbackCamera a(dir_, "a", "768x576"), b(dir_, "b");
  ASSERT_TRUE(a.start() && b.start());
  ServiceRun service(dir_);
  ASSERT_TRUE(service.start(
      service_group(
          {{"detector", "dnndetect model=nanodet classes=person,car score-threshold=0.35"},
           {"iou-threshold", "0.6"}}) +
      camera_group("a", a.url(), "lines = door:384,0,384,576\n") +
      camera_group("b", b.url(), "detector = dnndetect model=nanodet classes=person,persn\n")));
  ASSERT_TRUE(eventually(30, [&] { return service.state_of("a") == "streaming"; }))
      << service.log();
  ASSERT_TRUE(eventually(30, [&] {
    return service.log().find("unknown class \"persn\"") != std::string::npos;
  })) << service.log();
  EXPECT_NE(service.state_of("b"), "streaming");
  ASSERT_TRUE(eventually(60, [&] { return counted(service, "a").events >= 2; }))
      << "no crossing in 60 s\n"
      << service.log();
  CameraLines lines;
  service.parse_lines("a", &lines);
  std::map<std::string, size_t> labels;
  for (JsonObject *f : lines.frames) {
    JsonArray *boxes = json_object_get_array_member(f, "boxes");
    for (guint i = 0; i < json_array_get_length(boxes); i++)
      labels[json_object_get_string_member(json_array_get_object_element(boxes, i), "label")]++;
  }
  EXPECT_GT(labels["person"], lines.frames.size()) << "vtest.avi has people in every frame";
  for (const auto &[label, n] : labels)
    EXPECT_TRUE(label == "person" || label == "car") << n << " boxes labelled " << label;
}

// A worker killed while its camera counts (two pretended GPUs): the restarted worker goes on from
// the counts it kept (counting_file.h), with ids above every id given before.
TEST_F(Service, AKilledWorkersCameraCountsOn) {
  LoopbackCamera a(dir_, "a", "768x576");
  ASSERT_TRUE(a.start());
  g_setenv("CUDANMS_TEST_GPU_COUNT", "2", TRUE);
  ServiceRun service(dir_);
  const bool started = service.start(service_group({{"history", dir_.file("history.sqlite")}}) +
                                     camera_group("a", a.url(), "lines = door:384,0,384,576\n"));
  g_unsetenv("CUDANMS_TEST_GPU_COUNT");
  ASSERT_TRUE(started);
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  ASSERT_TRUE(eventually(60, [&] { return counted(service, "a").events >= 1; }))
      << "no crossing in 60 s\n"
      << service.log();
  JsonObject *health = service.scrape("/health");
  ASSERT_NE(health, nullptr);
  const gint64 pid = json_object_get_int_member(
      json_object_get_object_member(
          json_object_get_object_member(json_object_get_object_member(health, "health"), "workers"),
          "0"),
      "pid");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(static_cast<pid_t>(pid), SIGKILL), 0);
  g_usleep(300 * 1000);
  const Counted before = counted(service, "a");
  // The restart's 1 s, then the new worker connects its camera as a reconnection does (within
  // kReconnectMax on the other tests' terms): an instrumented worker starting on CI's two busy
  // cores once missed 1 + 5 s (2a74323), its camera streaming but short of 20 frames.
  ASSERT_NO_FATAL_FAILURE(expect_counts_go_on(service, "a", before, 1 + kReconnectMax + 5));
  EXPECT_NE(service.log().find("worker of GPU 0 (pid " + std::to_string(pid) + ") killed"),
            std::string::npos)
      << service.log();
  // The workers wrote the history, the killed one and its successor; the supervisor reads it.
  std::vector<gint64> crossings;
  ASSERT_NO_FATAL_FAILURE(expect_history_has_the_crossings(service, "a", &crossings));
}

// The process's heap, threads and open descriptors, each the least of five scrapes: frames in
// flight come and go, what leaks stays.
struct Footprint {
  double heap = INFINITY, threads = INFINITY, fds = INFINITY;
};
Footprint footprint(ServiceRun &service) {
  Footprint least;
  for (int i = 0; i < 5; ++i) {
    JsonObject *m = service.scrape("/metrics");
    if (!m) continue;
    least.heap = std::fmin(least.heap, ServiceRun::value(m, "cudanms_process_heap_bytes", ""));
    least.threads = std::fmin(least.threads, ServiceRun::value(m, "cudanms_process_threads", ""));
    least.fds = std::fmin(least.fds, ServiceRun::value(m, "process_open_fds", ""));
    g_usleep(200 * 1000);
  }
  return least;
}

// An H.264 clip of `frames` frames at 30/s: a camera whose stream ends every few frames.
void write_clip(const std::string &path, int frames) {
  const std::string launch = "videotestsrc num-buffers=" + std::to_string(frames) +
                             " pattern=ball ! video/x-raw,width=320,height=240,framerate=30/1 ! "
                             "x264enc ! mp4mux ! filesink location=\"" +
                             path + "\"";
  GstElement *pipeline = gst_parse_launch(launch.c_str(), nullptr);
  ASSERT_NE(pipeline, nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  EXPECT_TRUE(end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS);
  if (end) gst_message_unref(end);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

// Leak reports of LeakSanitizer (the service built with AddressSanitizer, tools/sanitize.sh)
// whose objects number at least `objects`: what leaked once a connection, or once a frame. GLib's
// and GStreamer's one-time allocations are fewer.
std::vector<std::string> repeated_leaks(const std::string &dir, const std::string &prefix,
                                        long objects) {
  std::vector<std::string> found;
  GDir *d = g_dir_open(dir.c_str(), 0, nullptr);
  while (const gchar *name = d ? g_dir_read_name(d) : nullptr) {
    if (!g_str_has_prefix(name, prefix.c_str())) continue;
    const std::string report = read_file(dir + "/" + name);
    for (size_t at = report.find(" leak of "); at != std::string::npos;
         at = report.find(" leak of ", at + 1)) {
      const size_t in = report.find(" in ", at);
      if (in == std::string::npos || std::atol(report.c_str() + in + 4) < objects) continue;
      found.push_back(report.substr(report.rfind('\n', at) + 1, 1500));
    }
  }
  if (d) g_dir_close(d);
  return found;
}

// A camera whose stream ends after three frames reconnects 200 times, beside an RTSP camera
// (rtspsrc, its jitterbuffer, the decoder, the recording) whose clip ends after six, and an RTSP
// camera whose every connection is refused (a port bound, not listening). With the
// cameras stopped (a reload that disables them), the heap, the threads and the descriptors after
// the 200th reconnection are those after the 50th: nothing is kept once a connection (the GPU
// path on a CUDA host, where cudanms and its pools are on the GPU). Under AddressSanitizer,
// LeakSanitizer checks the service at its exit: nothing leaked once a connection either.
TEST_F(Service, TwoHundredReconnectionsLeakNothing) {
  const std::string clip = dir_.file("six-frames.mp4");
  ASSERT_NO_FATAL_FAILURE(write_clip(clip, 6));
  LoopbackCamera short_camera(dir_, "short", "320x240", clip);
  ASSERT_TRUE(short_camera.start());
  // The cascade: on a CUDA host its windows stay on the GPU from the detector to cudanms.
  const char *data = g_getenv("CUDANMS_OPENCV_DATA");
  const std::string cascade = std::string(data ? data : "/usr/share/opencv4") +
                              "/haarcascades/haarcascade_frontalface_default.xml";
  const std::string ends_detector =
      g_file_test(cascade.c_str(), G_FILE_TEST_IS_REGULAR)
          ? "detector = cudacascade model=" + cascade + " min-size=40x40\n"
          : "";
  int closed_port = 0;
  GSocket *closed = loopback_socket(false, &closed_port);
  ASSERT_NE(closed, nullptr);
  const std::string refused_url = "rtsp://127.0.0.1:" + std::to_string(closed_port) + "/stream";
  auto config = [&](bool enabled) {
    const std::string on = enabled ? "true" : "false";
    return service_group({{"reconnect-initial", "0.01"}, {"reconnect-max", "0.01"}}) +
           "\n[camera.ends]\nenabled = " + on + "\n" + ends_detector +
           "source = videotestsrc num-buffers=3 ! "
           "video/x-raw,width=320,height=240,framerate=30/1\nlines = door:160,0,160,240\n" +
           // UDP: rtspsrc 1.22 over TCP races its own teardown when the server closes the
           // connection at that moment (a gst_event_set_seqnum CRITICAL), as this camera's would
           // hundreds of times; UDP also has sockets a connection could leak.
           camera_group("short", short_camera.url(),
                        "enabled = " + on + "\nrecord-dir = " + dir_.path + "\nprotocols = udp\n") +
           // Recording: a connection that never had a frame has no segment to wait for.
           // Every 100 ms: a sanitized build's teardowns keep up (at every 10 ms they queued).
           camera_group("refused", refused_url,
                        "enabled = " + on + "\nrecord-dir = " + dir_.path +
                            "\nreconnect-initial = 0.1\nreconnect-max = 0.1\n");
  };
  const char *asan = g_getenv("ASAN_OPTIONS");
  const bool sanitized = asan != nullptr;
  const std::string saved = asan ? asan : "";
  if (sanitized) {
    // The service's own options: leaks checked at its exit and written beside the log.
    // intercept_tls_get_addr=0: GCC 12's sanitizer guesses the extent of each module's dynamic
    // TLS block from glibc's internals and sometimes records garbage (seen: "DTLS 14 at
    // 0x552-0x400001654"); the leak check's tracer then reads it and dies of SIGSEGV ("Tracer
    // caught signal 11"), at random with the process's layout. Without the interception the
    // check skips dynamic TLS blocks; a pointer kept only there is at most one report a thread,
    // not one a connection, which is what this test looks for.
    g_setenv("ASAN_OPTIONS",
             (saved +
              ":detect_leaks=1:intercept_tls_get_addr=0:exitcode=0:log_path=" + dir_.file("lsan"))
                 .c_str(),
             TRUE);
  }
  ServiceRun service(dir_);
  const bool started = service.start(config(true));
  if (sanitized) g_setenv("ASAN_OPTIONS", saved.c_str(), TRUE);
  ASSERT_TRUE(started);

  // Reconnections so far, over the cameras' restarts.
  double ends = 0, short_reconnects = 0, refused = 0;
  auto count_reconnects = [&] {
    JsonObject *m = service.scrape("/metrics");
    if (!m) return;
    auto reconnects = [&](const char *camera) {
      return ServiceRun::value(m, "cudanms_camera_reconnects_total", camera);
    };
    ends = std::fmax(ends, reconnects("ends"));
    short_reconnects = std::fmax(short_reconnects, reconnects("short"));
    refused = std::fmax(refused, reconnects("refused"));
  };
  // Both cameras stopped by a reload, the process settled: what it holds between connections.
  auto stopped_footprint = [&] {
    service.write_config(config(false));
    service.signal(SIGHUP);
    EXPECT_TRUE(eventually(30, [&] {
      return service.state_of("ends") == "stopped" && service.state_of("short") == "stopped" &&
             service.state_of("refused") == "stopped";
    })) << service.log();
    // Connections stop on threads of their own: settled when two looks a second apart agree.
    Footprint last = footprint(service), now;
    for (int look = 0; look < 30; ++look) {
      g_usleep(G_USEC_PER_SEC);
      now = footprint(service);
      if (now.threads == last.threads && now.fds == last.fds) break;
      last = now;
    }
    return now;
  };
  ASSERT_TRUE(eventually(120, [&] {
    count_reconnects();
    return ends >= 50;
  })) << service.log();
  const Footprint at_50 = stopped_footprint();
  // Started again: each camera's count begins anew.
  const double ends_before = ends, short_before = short_reconnects, refused_before = refused;
  ends = short_reconnects = refused = 0;
  service.write_config(config(true));
  service.signal(SIGHUP);
  ASSERT_TRUE(eventually(300, [&] {
    count_reconnects();
    return ends_before + ends >= 200;
  })) << service.log();
  const Footprint at_200 = stopped_footprint();
  g_object_unref(closed);
  short_reconnects += short_before;
  refused += refused_before;
  EXPECT_GE(short_reconnects, 15) << service.log();
  EXPECT_GE(refused, 50) << service.log();
  std::printf(
      "stopped after 50 and after 200 reconnections (the RTSP cameras': %.0f, %.0f of "
      "them refused): heap %.0f -> %.0f bytes, threads %.0f -> %.0f, descriptors %.0f -> "
      "%.0f\n",
      short_reconnects, refused, at_50.heap, at_200.heap, at_50.threads, at_200.threads, at_50.fds,
      at_200.fds);
  // 350 kB a reconnection leaked on the GPU path (issue 43): 150 of them would be 52 MB.
  EXPECT_LT(at_200.heap - at_50.heap, 2e6) << at_50.heap << " -> " << at_200.heap;
  EXPECT_LE(at_200.threads, at_50.threads + 2);
  EXPECT_LE(at_200.fds, at_50.fds);
  if (at_200.threads > at_50.threads + 2 || at_200.fds > at_50.fds)
    ADD_FAILURE() << "a connection's teardown did not finish; the service's threads:\n"
                  << service.thread_stacks() << "\n"
                  << service.log();

  service.signal(SIGTERM);
  const int exit_status = service.wait_exit(60);
  EXPECT_EQ(exit_status, 0) << service.log();
  if (sanitized && exit_status != 0) {
    // What killed it: the sanitizer's report goes to the log files, not to its stderr.
    GDir *d = g_dir_open(dir_.path.c_str(), 0, nullptr);
    while (const gchar *name = d ? g_dir_read_name(d) : nullptr)
      if (g_str_has_prefix(name, "lsan"))
        ADD_FAILURE() << name << ":\n" << read_file(dir_.file(name)).substr(0, 6000);
    if (d) g_dir_close(d);
  }
  if (sanitized) {
    for (const std::string &leak : repeated_leaks(dir_.path, "lsan", 50))
      ADD_FAILURE() << "leaked once a connection or a frame:\n" << leak;
  }
}

// What a camera holds: a recording whose encoder has stalled (a 10 s sleep before x264enc) fills
// the recording's queue, 60 frames of 320x240 I420 (115 200 bytes each) and no more, and
// /metrics says so (then the intake's queue, which drops the oldest, and the watchdog).
TEST_F(Service, ACamerasQueuedFramesAreOnMetrics) {
  ServiceRun service(dir_);
  ASSERT_TRUE(
      service.start(service_group({{"record-dir", dir_.path},
                                   {"record-encoder", "identity sleep-time=10000000 ! x264enc"}}) +
                    "\n[camera.slow]\nsource = videotestsrc is-live=true ! "
                    "video/x-raw,width=320,height=240,framerate=30/1,format=I420\n"));
  ASSERT_TRUE(all_streaming(service, 30)) << service.log();
  constexpr double kFrame = 320 * 240 * 3 / 2, kRecordingQueue = 60;
  double queued = 0;
  EXPECT_TRUE(eventually(20, [&] {
    JsonObject *m = service.scrape("/metrics");
    queued = m ? ServiceRun::value(m, "cudanms_camera_queued_bytes", "slow") : 0;
    return queued >= kRecordingQueue * kFrame;
  })) << queued;
  // The intake's queue holds at most 2 frames more.
  EXPECT_LE(queued, (kRecordingQueue + 3) * kFrame);
}

// --check-config: exit 2 and one line an error, FILE:GROUP:KEY: reason; the example config of
// the README is good.
TEST_F(Service, CheckConfigExitsTwoWithEveryError) {
  const std::string bad = dir_.file("bad.conf");
  ASSERT_TRUE(g_file_set_contents(bad.c_str(),
                                  "[camera.a]\nurl = rtsp://127.0.0.1:1/a\nmethod = best\n"
                                  "labels-file = /dev/zero\n[camera.a]\nsize = 3\n",
                                  -1, nullptr));
  std::vector<std::string> errors = check_config_errors(bad);
  std::vector<std::string> expected = {
      bad + ":camera.a: given twice (lines 1 and 5)",
      bad +
          ":camera.a:labels-file: cannot read \"/dev/zero\": is not a regular file (a device, "
          "FIFO or socket is never read)",
      bad + ":camera.a:method: must be one of greedy, matrix, soft, weighted, group, not \"best\"",
      bad + ":camera.a:size: unknown key"};
  EXPECT_EQ(errors, expected);

  const std::string example =
      std::string(g_getenv("CUDANMS_SOURCE_ROOT")) + "/pipelines/cameras.conf";
  GSubprocess *check = spawn({script("service"), "--check-config", example}, dir_.file("check.out"),
                             dir_.file("check.err"));
  EXPECT_EQ(wait_exit(check, 30), 0) << read_file(dir_.file("check.err"));
  g_object_unref(check);
  EXPECT_NE(read_file(dir_.file("check.out")).find("good: 3 cameras (2 enabled)"),
            std::string::npos);
}

// Counting settings that cannot work, each named FILE:GROUP:KEY.
TEST_F(Service, CheckConfigNamesBadLinesAndZones) {
  const std::string bad = dir_.file("lines.conf");
  ASSERT_TRUE(g_file_set_contents(bad.c_str(),
                                  "[service]\nzones = hall:0,0 10,10 10,0 0,10\n"
                                  "[camera.a]\nurl = rtsp://127.0.0.1:1/a\nlines = door:5,5,5,5\n"
                                  "[camera.b]\nurl = rtsp://127.0.0.1:1/b\nzones = z:0,0 1,1\n"
                                  "[camera.c]\nurl = rtsp://127.0.0.1:1/c\nzones =\n"
                                  "lines = a:0,0,1,1\ntracker = false\ntrack-buffer = -3\n"
                                  "[camera.d]\nurl = rtsp://127.0.0.1:1/d\nzones =\n"
                                  "normalized = yes\nlines = door:0,0,300,300\n",
                                  -1, nullptr));
  std::vector<std::string> errors = check_config_errors(bad);
  std::vector<std::string> expected = {
      bad + ":camera.a:lines: line \"door\": its two ends are the same point: it has no length",
      bad + ":camera.b:zones: zone \"z\": a polygon needs at least 3 points, not 2",
      bad + ":camera.c:lines: counting needs the tracker (tracker = true)",
      bad + ":camera.c:track-buffer: is out of range: \"-3\" (0 to 100000)",
      bad + ":camera.d:lines: line \"door\": 300 is outside 0..1 (normalized=true)",
      bad +
          ":service:zones: zone \"hall\": the polygon crosses itself: edge 1-2 meets edge 3-4 "
          "(for camera a)"};
  EXPECT_EQ(errors, expected);
}

// The service's program without the plugins (no GST_PLUGIN_PATH, an empty system path) refuses
// a config with its reasons, not a crash: the cascade's implied method= used to look up a cudanms
// property that was not there.
TEST_F(Service, ACheckWithoutThePluginsRefusesTheConfig) {
  const std::string example =
      std::string(g_getenv("CUDANMS_SOURCE_ROOT")) + "/pipelines/cameras.conf";
  const std::string registry = dir_.file("empty-registry.bin");
  GSubprocess *p =
      spawn({"env", "GST_PLUGIN_PATH=", "GST_PLUGIN_SYSTEM_PATH=", "GST_REGISTRY=" + registry,
             std::string(g_getenv("CUDANMS_BUILD")) + "/service/cudanms-service", "--check-config",
             example},
            dir_.file("bare.out"), dir_.file("bare.err"));
  EXPECT_EQ(wait_exit(p, 30), 2);
  g_object_unref(p);
  EXPECT_NE(read_file(dir_.file("bare.err")).find("the cudanms element is not installed"),
            std::string::npos)
      << read_file(dir_.file("bare.err"));
}

// The service sees the GPUs CUDA_VISIBLE_DEVICES shows: with it empty there are none, and a
// config that names one is refused before any camera starts, by --check-config as by --config.
TEST_F(Service, AGpuTheServiceCannotSeeIsAConfigError) {
  const std::string conf = dir_.file("gpus.conf");
  ASSERT_TRUE(g_file_set_contents(
      conf.c_str(), "[service]\ngpus = 0,1\n[camera.a]\nurl = rtsp://127.0.0.1:1/a\ngpu-id = 1\n",
      -1, nullptr));
  const gchar *was = g_getenv("CUDA_VISIBLE_DEVICES");
  const std::string visible_before = was ? was : "";
  g_setenv("CUDA_VISIBLE_DEVICES", "", TRUE);
  for (const char *mode : {"--check-config", "--config"}) {
    GSubprocess *p =
        spawn({script("service"), mode, conf}, dir_.file("gpus.out"), dir_.file("gpus.err"));
    EXPECT_EQ(wait_exit(p, 30), 2) << mode;
    g_object_unref(p);
    std::vector<std::string> errors = lines_of(dir_.file("gpus.err"));
    std::sort(errors.begin(), errors.end());
    EXPECT_EQ(errors, (std::vector<std::string>{
                          conf + ":camera.a:gpu-id: GPU 1 does not exist (no CUDA device visible)",
                          conf + ":service:gpus: GPU 0 does not exist (no CUDA device visible)",
                          conf + ":service:gpus: GPU 1 does not exist (no CUDA device visible)"}))
        << mode;
  }
  if (was) {
    g_setenv("CUDA_VISIBLE_DEVICES", visible_before.c_str(), TRUE);
  } else {
    g_unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace
}  // namespace cudanms::testing
