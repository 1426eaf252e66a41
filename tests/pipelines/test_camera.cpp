// The camera pipeline end to end over RTSP on 127.0.0.1: pipelines/rtsp-server serves vtest.avi
// on a free port, pipelines/camera detects people in N frames of it; then the server is killed
// mid-stream and the camera does what the README says: it ends the stream (the MP4 and the JSON
// lines stay complete), reports "source lost", tries --reconnect times, and exits with status 3.
#include <gtest/gtest.h>

#include <csignal>

#include "script_support.h"

namespace cudanms::testing {
namespace {

class Camera : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    if (!g_file_test(opencv_sample("vtest.avi").c_str(), G_FILE_TEST_IS_REGULAR))
      GTEST_SKIP() << "vtest.avi is missing: install the Debian package opencv-doc";
    // Port 0: the server binds a free port and prints the URL.
    server_ = spawn({script("rtsp-server"), "--port", "0", "--address", "127.0.0.1"}, "",
                    dir_.file("server.err"), true);
    ASSERT_NE(server_, nullptr);
    GDataInputStream *out = g_data_input_stream_new(g_subprocess_get_stdout_pipe(server_));
    gchar *line = g_data_input_stream_read_line(out, nullptr, nullptr, nullptr);
    g_object_unref(out);
    ASSERT_NE(line, nullptr) << read_file(dir_.file("server.err"));
    url_ = line;
    g_free(line);
    ASSERT_EQ(url_.rfind("rtsp://127.0.0.1:", 0), 0u) << url_;
  }

  void TearDown() override {
    if (server_) {
      g_subprocess_send_signal(server_, SIGKILL);
      g_subprocess_wait(server_, nullptr, nullptr);
      g_object_unref(server_);
    }
  }

  TempDir dir_;
  GSubprocess *server_ = nullptr;
  std::string url_;
};

TEST_F(Camera, DetectionsArriveOverRtsp) {
  GSubprocess *camera = spawn({script("camera"), "--url", url_, "--frames", "15", "--output",
                               "none", "--json", dir_.file("camera.jsonl"), "--backend", "cpu"},
                              dir_.file("camera.out"), dir_.file("camera.err"));
  ASSERT_NE(camera, nullptr);
  const int status = wait_exit(camera, 120);
  g_object_unref(camera);
  ASSERT_EQ(status, 0) << read_file(dir_.file("camera.err"));
  const std::vector<std::string> lines = lines_of(dir_.file("camera.jsonl"));
  EXPECT_EQ(lines.size(), 15u);
  guint64 candidates, kept;
  ASSERT_TRUE(json_lines_parse(lines, &candidates, &kept));
  EXPECT_GE(candidates, 15u * 10);  // vtest.avi's people, through H.264 and RTP
  EXPECT_GE(kept, 15u);
  EXPECT_NE(read_file(dir_.file("camera.out")).find("summary: frames 15,"), std::string::npos);
}

TEST_F(Camera, ServerStoppedMidStreamEndsCleanlyAfterReconnecting) {
  GSubprocess *camera = spawn(
      {script("camera"), "--url", url_, "--output", dir_.file("camera.mp4"), "--json",
       dir_.file("camera.jsonl"), "--backend", "cpu", "--reconnect", "1", "--reconnect-delay", "1"},
      dir_.file("camera.out"), dir_.file("camera.err"));
  ASSERT_NE(camera, nullptr);
  // Mid-stream: once 10 frames have been written, the server dies without a word.
  const gint64 deadline = g_get_monotonic_time() + 90 * G_USEC_PER_SEC;
  while (lines_of(dir_.file("camera.jsonl")).size() < 10 && g_get_monotonic_time() < deadline)
    g_usleep(100 * 1000);
  ASSERT_GE(lines_of(dir_.file("camera.jsonl")).size(), 10u) << read_file(dir_.file("camera.err"));
  g_subprocess_send_signal(server_, SIGKILL);

  const int status = wait_exit(camera, 60);
  g_object_unref(camera);
  const std::string err = read_file(dir_.file("camera.err"));
  EXPECT_EQ(status, 3) << err;
  EXPECT_NE(err.find("source lost after"), std::string::npos) << err;
  EXPECT_NE(err.find("reconnecting in 1s (attempt 1 of 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("gave up after 1 reconnect attempts"), std::string::npos) << err;

  // What was written before the drop is complete: every JSON line parses, the MP4 plays to
  // its end and holds as many frames as there are lines.
  const std::vector<std::string> lines = lines_of(dir_.file("camera.jsonl"));
  guint64 candidates, kept;
  EXPECT_TRUE(json_lines_parse(lines, &candidates, &kept));
  EXPECT_GE(kept, 10u);
  EXPECT_EQ(mp4_frames(dir_.file("camera.mp4")), int(lines.size())) << err;
}

}  // namespace
}  // namespace cudanms::testing
