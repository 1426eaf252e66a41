// Many cameras into one broker, end to end: four RTSP cameras (pipelines/rtsp-server serving
// vtest.avi on 127.0.0.1), pipelines/streams running detector -> cudanms -> metapublish for each
// in one process, Debian's mosquitto, and a subscriber counting every camera's messages. Skips
// without opencv-doc, mosquitto or mosquitto-clients.
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <csignal>
#include <map>

#include "support/mqtt_broker.h"
#include "script_support.h"

namespace cudanms::testing {
namespace {

TEST(Publish, FourRtspCamerasIntoOneBroker) {
  gst_init(nullptr, nullptr);
  if (!g_file_test(opencv_sample("vtest.avi").c_str(), G_FILE_TEST_IS_REGULAR))
    GTEST_SKIP() << "vtest.avi is missing: install the Debian package opencv-doc";
  if (mosquitto_binary().empty() || mosquitto_sub_binary().empty())
    GTEST_SKIP() << "no mosquitto or mosquitto_sub (Debian packages mosquitto, mosquitto-clients)";
  TempDir dir;
  Broker broker(free_port());
  ASSERT_TRUE(broker.start());
  Subscriber subscriber(broker.port(), "site/#");
  ASSERT_TRUE(subscriber.connected());

  const std::vector<std::string> cameras = {"cam-a", "cam-b", "cam-c", "cam-d"};
  std::vector<GSubprocess *> servers;
  std::vector<std::string> urls;
  for (size_t i = 0; i < cameras.size(); ++i) {
    GSubprocess *server =
        spawn({script("rtsp-server"), "--port", "0", "--address", "127.0.0.1"}, "",
              dir.file(("server" + std::to_string(i) + ".err").c_str()), true);
    ASSERT_NE(server, nullptr);
    servers.push_back(server);
    GDataInputStream *out = g_data_input_stream_new(g_subprocess_get_stdout_pipe(server));
    gchar *line = g_data_input_stream_read_line(out, nullptr, nullptr, nullptr);
    g_object_unref(out);
    ASSERT_NE(line, nullptr) << read_file(
        dir.file(("server" + std::to_string(i) + ".err").c_str()));
    urls.push_back(line);
    g_free(line);
  }

  const int kFrames = 20;
  std::vector<std::string> argv = {script("streams"),
                                   "--frames",
                                   std::to_string(kFrames),
                                   "--progress",
                                   "0",
                                   "--publish",
                                   broker.address(),
                                   "--topic",
                                   "site",
                                   "--camera-ids",
                                   "cam-a,cam-b,cam-c,cam-d",
                                   "--format",
                                   "dlstreamer",
                                   "--qos",
                                   "1"};
  argv.insert(argv.end(), urls.begin(), urls.end());
  GSubprocess *run = spawn(argv, dir.file("stdout"), dir.file("stderr"));
  const int status = wait_exit(run, 300);
  g_object_unref(run);
  for (GSubprocess *server : servers) {
    g_subprocess_send_signal(server, SIGKILL);
    g_subprocess_wait(server, nullptr, nullptr);
    g_object_unref(server);
  }
  const std::string out = read_file(dir.file("stdout"));
  ASSERT_EQ(status, 0) << out << read_file(dir.file("stderr"));
  EXPECT_NE(out.find("streams 4  frames " + std::to_string(4 * kFrames)), std::string::npos) << out;
  for (const std::string &camera : cameras) {
    EXPECT_NE(out.find(camera + ": " + std::to_string(kFrames) + " published, 0 dropped"),
              std::string::npos)
        << out;
  }

  // Every message arrived, in DL Streamer's format, each camera's under its own id.
  ASSERT_TRUE(subscriber.wait_for(4 * kFrames, std::chrono::seconds(10)));
  std::map<std::string, int> per_camera;
  std::map<std::string, gint64> last_timestamp;
  for (const std::string &message : subscriber.messages()) {
    JsonParser *parser = json_parser_new();
    ASSERT_TRUE(json_parser_load_from_data(parser, message.c_str(), -1, nullptr)) << message;
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    const std::string source = json_object_get_string_member(o, "source");
    ASSERT_TRUE(json_object_has_member(o, "objects")) << message;
    const gint64 timestamp = json_object_get_int_member(o, "timestamp");
    if (per_camera[source]++ > 0) {
      EXPECT_GT(timestamp, last_timestamp[source]) << source;
    }
    last_timestamp[source] = timestamp;
    g_object_unref(parser);
  }
  for (const std::string &camera : cameras) EXPECT_EQ(per_camera[camera], kFrames) << camera;
  EXPECT_EQ(per_camera.size(), cameras.size());
}

}  // namespace
}  // namespace cudanms::testing
