// A camera of the service in this process, its source a test pattern: what its start does with
// its config.
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cudanms/count.h>
#include <cudanms/nms.h>

#include "camera.h"
#include "config.h"
#include "cuda_contexts.h"
#include "pipelines/script_support.h"

namespace cudanms::service {
namespace {

using cudanms::testing::TempDir;

// Runs the main loop (where a camera lives) until `done`, at most `seconds`.
bool loop_until(double seconds, const std::function<bool()> &done) {
  const gint64 deadline = g_get_monotonic_time() + static_cast<gint64>(seconds * 1e6);
  while (!done()) {
    if (g_get_monotonic_time() > deadline) return false;
    while (g_main_context_iteration(nullptr, FALSE)) {
    }
    g_usleep(10 * 1000);
  }
  return true;
}

// A camera's lines and zones are read from their text once, when its config is: the camera's
// start gives them to its counter (boxcount, which reads them itself), and nothing else of the
// service reads them again (it once did three times a start: issue 67).
TEST(Camera, ItsStartReadsEachShapeTextOnce) {
  gst_init(nullptr, nullptr);
  TempDir dir;
  const std::string text =
      "[service]\nmetrics-address =\ngpus = none\ndetector = brightspot\nnormalized = true\n"
      "[camera.c]\nsource = videotestsrc pattern=ball is-live=true ! "
      "video/x-raw,width=160,height=120,framerate=10/1\n"
      "lines = door:0.5,0,0.5,1;gate:0,0.5,1,0.5\nzones = yard:0,0 0.5,0 0.5,0.5\n"
      "json = " +
      dir.path + "/c.jsonl\n";
  ServiceConfig config;
  std::vector<std::string> errors;
  const uint64_t before_read = cudanms::shape_texts_parsed();
  ASSERT_TRUE(parse_config(text, "camera.conf", &config, &errors, 0)) << errors.at(0);
  ASSERT_EQ(config.cameras.size(), 1u);
  EXPECT_EQ(cudanms::shape_texts_parsed() - before_read, 2u) << "the config's read: lines, zones";

  CameraRun run;
  run.on_cpu = true;
  const uint64_t before_start = cudanms::shape_texts_parsed();
  auto camera = std::make_unique<Camera>(config.cameras[0], run, nullptr);
  camera->start();
  ASSERT_TRUE(loop_until(20, [&] {
    const CameraSnapshot s = camera->snapshot(g_get_monotonic_time());
    return s.state == CameraState::kStreaming && s.counts.frames >= 3;
  })) << camera->snapshot(g_get_monotonic_time()).last_error;
  EXPECT_EQ(cudanms::shape_texts_parsed() - before_start, 2u)
      << "boxcount's read of the lines and the zones, and no other";

  bool stopped = false;
  camera->stop("the test ends", [&] { stopped = true; });
  ASSERT_TRUE(loop_until(20, [&] { return stopped; }));
  EXPECT_EQ(cudanms::shape_texts_parsed() - before_start, 2u);
}

// A camera placed on a GPU runs there: the service gives its pipeline that GPU's CUDA context,
// and its elements (their gpu-id left at -1) take it; nothing sets an element's gpu-id (issue
// 67). Cameras on GPUs 0 and 1 (GPU 1 where the machine has two) and one on the CPU: the
// detector of each says where it runs.
TEST(Camera, ItsElementsRunOnTheGpuThatItsContextGives) {
  gst_init(nullptr, nullptr);
  const int gpus = cudanms::cuda_device_count();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  const char *data = g_getenv("CUDANMS_OPENCV_DATA");
  const std::string model = std::string(data ? data : "/usr/share/opencv4") +
                            "/haarcascades/haarcascade_frontalface_default.xml";
  if (!g_file_test(model.c_str(), G_FILE_TEST_EXISTS)) GTEST_SKIP() << "opencv-data is missing";
  TempDir dir;
  std::string text = "[service]\nmetrics-address =\ngpus = none\ndetector = cudacascade model=\"" +
                     model + "\"\n";
  for (const char *name : {"a", "b", "c"})
    text += std::string("[camera.") + name +
            "]\nsource = videotestsrc is-live=true ! "
            "video/x-raw,width=320,height=240,framerate=10/1\n";
  ServiceConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(parse_config(text, "camera.conf", &config, &errors, 0)) << errors.at(0);
  const int placed[] = {0, gpus > 1 ? 1 : 0, -1};  // as placement would: a, b, c
  CudaContexts contexts;
  std::vector<std::unique_ptr<Camera>> cameras;
  for (size_t i = 0; i < 3; i++) {
    CameraConfig camera = config.cameras[i];
    CameraRun run;
    run.on_cpu = placed[i] < 0;
    if (placed[i] >= 0) camera.gpu_id = static_cast<unsigned>(placed[i]);
    cameras.push_back(std::make_unique<Camera>(camera, run, &contexts));
    cameras.back()->start();
  }
  ASSERT_TRUE(loop_until(30, [&] {
    for (const auto &camera : cameras) {
      const CameraSnapshot s = camera->snapshot(g_get_monotonic_time());
      if (s.state != CameraState::kStreaming || s.counts.frames < 3) return false;
    }
    return true;
  }));
  for (size_t i = 0; i < 3; i++) {
    const CameraSnapshot s = cameras[i]->snapshot(g_get_monotonic_time());
    const std::string expected = placed[i] < 0 ? "cpu" : "cuda:" + std::to_string(placed[i]) + " ";
    EXPECT_EQ(s.device.substr(0, expected.size()), expected) << s.name << ": " << s.device;
    EXPECT_EQ(s.gpu, placed[i]) << s.name;
    printf("camera %s placed on %d runs on %s\n", s.name.c_str(), placed[i], s.device.c_str());
  }
  if (gpus < 2) printf("one GPU: camera b shares GPU 0; the second GPU's case needs two\n");
  int stopped = 0;
  for (auto &camera : cameras) camera->stop("the test ends", [&] { stopped++; });
  ASSERT_TRUE(loop_until(20, [&] { return stopped == 3; }));
}

}  // namespace
}  // namespace cudanms::service
