// A camera of the service in this process, its source a test pattern: what its start does with
// its config.
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <cudanms/count.h>

#include "camera.h"
#include "config.h"
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

}  // namespace
}  // namespace cudanms::service
