// A worker process per GPU, without processes: the assignment's round trip, what a worker takes
// of the config, and the supervisor's merged /metrics and /health.
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <set>
#include <sstream>

#include <glib/gstdio.h>

#include "assignment.h"
#include "counting_file.h"
#include "worker_merge.h"

namespace cudanms::service {
namespace {

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

size_t count(const std::vector<std::string> &lines, const std::string &line) {
  return static_cast<size_t>(std::count(lines.begin(), lines.end(), line));
}

TEST(Assignment, ReadsBackWhatItWrote) {
  Assignment a;
  a.cameras = {{"door", 0}, {"yard west", 3}, {"gate", 1}};
  a.epochs = {{"door", 1}, {"yard west", 7}, {"gate", 2}};
  a.failed = {3};
  a.fleet_endpoints = {"http://127.0.0.1:2379"};
  a.fleet_keys = "/cudanms/site/";
  a.fleet_host = "host-a";
  a.fleet_lease = 42;
  Assignment b;
  std::string error;
  ASSERT_TRUE(parse_assignment(assignment_text(a), &b, &error)) << error;
  EXPECT_EQ(b.cameras, a.cameras);
  EXPECT_EQ(b.epochs, a.epochs);
  EXPECT_EQ(b.failed, a.failed);
  EXPECT_EQ(b.fleet_endpoints, a.fleet_endpoints);
  EXPECT_EQ(b.fleet_keys, a.fleet_keys);
  EXPECT_EQ(b.fleet_host, a.fleet_host);
  EXPECT_EQ(b.fleet_lease, a.fleet_lease);
  EXPECT_FALSE(parse_assignment("[cameras]\ndoor = zero\n", &b, &error));
  EXPECT_FALSE(error.empty());
}

TEST(Assignment, AWorkerTakesItsCamerasOnItsGpu) {
  ServiceConfig all;
  all.gpus = {0, 1};
  all.all_gpus = true;
  all.mqtt_address = "127.0.0.1:1883";
  for (const char *name : {"a", "b", "c"}) {
    CameraConfig c;
    c.name = name;
    c.mqtt_address = all.mqtt_address;
    all.cameras.push_back(c);
  }
  all.cameras[2].gpu_id = 0;  // pinned to GPU 0, moved to 1 after GPU 0 failed
  Assignment assignment;
  assignment.cameras = {{"a", 0}, {"b", 1}, {"c", 1}};
  const ServiceConfig one = worker_config(all, 1, assignment, "/run/x");
  ASSERT_EQ(one.cameras.size(), 2u);
  EXPECT_EQ(one.cameras[0].name, "b");
  EXPECT_EQ(one.cameras[0].gpu_id, 1u);
  EXPECT_EQ(one.cameras[1].gpu_id, 1u);
  EXPECT_EQ(one.cameras[1].mqtt_address, "127.0.0.1:1883") << "cameras publish from workers";
  EXPECT_EQ(one.runs.at(one.cameras[0].name).counts_file, "/run/x/counts-b-0.json");
  EXPECT_EQ(one.gpus, std::vector<unsigned>{1});
  EXPECT_FALSE(one.all_gpus);
  EXPECT_EQ(one.metrics_address, "unix:/run/x/worker-1.sock");
  EXPECT_EQ(one.mqtt_address, "") << "the service's status is the supervisor's";

  assignment.failed = {1};  // its cameras run on the CPU
  const ServiceConfig failed = worker_config(all, 1, assignment, "/run/x");
  EXPECT_TRUE(failed.gpus.empty());
  EXPECT_FALSE(failed.cameras[0].gpu_id.has_value());
}

// The supervisor's clean-up of the run directory: a worker's file being written (a temporary
// renamed over it) is not a stale file (it was deleted mid-write: "Failed to rename file").
TEST(CountingFile, OnlyFilesOfNoCameraAreStale) {
  const std::set<std::string> current = {counts_file_name("cam2", 3), counts_file_name("cam1", 0)};
  const std::set<std::string> leaving = {counts_file_prefix("cam9")};
  EXPECT_FALSE(stale_counts_file("counts-cam2-3.json", current, leaving));
  EXPECT_FALSE(stale_counts_file("counts-cam2-3.json.Q7X2KZ", current, leaving)) << "being written";
  EXPECT_TRUE(stale_counts_file("counts-cam2-2.json", current, leaving)) << "an earlier epoch's";
  EXPECT_TRUE(stale_counts_file("counts-cam2-2.json.Q7X2KZ", current, leaving));
  EXPECT_TRUE(stale_counts_file("counts-cam10-0.json", current, leaving)) << "not cam1's";
  EXPECT_FALSE(stale_counts_file("counts-cam9-4.json", current, leaving)) << "still stopping";
  EXPECT_FALSE(stale_counts_file("config.conf", current, leaving)) << "not a counts file";
  EXPECT_FALSE(stale_counts_file("worker-0.sock", current, leaving));
}

TEST(CountingFile, ReadsBackWhatItWrote) {
  gchar *dir = g_dir_make_tmp("counting-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/" + counts_file_name("yard/west gate", 3);
  EXPECT_EQ(path.substr(path.rfind('/') + 1), "counts-yard%2Fwest%20gate-3.json");
  CountingState state;
  state.next_track_id = 120;
  state.lines = {{"door", {3, 5}}, {"top", {0, 1}}};
  state.crossings = {{{"door", "in", "person"}, 3}, {{"door", "out", ""}, 5}};
  state.occupancy = {{{"hall", "person"}, 2}};
  const std::map<std::string, std::string> shapes = {{"door", "384,0 384,576"},
                                                     {"top", "0,200 768,200"}};
  std::string error;
  ASSERT_TRUE(save_counting(path, state, shapes, &error)) << error;
  CountingState read;
  std::map<std::string, std::string> read_shapes;
  ASSERT_TRUE(load_counting(path, &read, &read_shapes));
  EXPECT_EQ(read.next_track_id, 120u);
  EXPECT_EQ(read.lines, state.lines);
  EXPECT_EQ(read.crossings, state.crossings);
  EXPECT_TRUE(read.occupancy.empty()) << "a zone's occupancy starts again";
  EXPECT_EQ(read_shapes, shapes);
  EXPECT_FALSE(load_counting(std::string(dir) + "/none.json", &read, &read_shapes));
  ASSERT_TRUE(g_file_set_contents(path.c_str(), "[1, 2", -1, nullptr));
  EXPECT_FALSE(load_counting(path, &read, &read_shapes)) << "not JSON";
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
}

const char *kWorker0 = R"(# HELP cudanms_camera_up 1 while the camera streams, else 0
# TYPE cudanms_camera_up gauge
cudanms_camera_up{camera="a"} 1
# HELP cudanms_gpu_cameras Cameras placed on the GPU
# TYPE cudanms_gpu_cameras gauge
cudanms_gpu_cameras{gpu="0"} 1
# HELP cudanms_gpu_memory_used_bytes GPU memory in use on the device
# TYPE cudanms_gpu_memory_used_bytes gauge
cudanms_gpu_memory_used_bytes{gpu="0"} 100
cudanms_gpu_memory_used_bytes{gpu="1"} 200
# HELP process_open_fds Open file descriptors of the service
# TYPE process_open_fds gauge
process_open_fds 11
)";
const char *kWorker1 = R"(# HELP cudanms_camera_up 1 while the camera streams, else 0
# TYPE cudanms_camera_up gauge
cudanms_camera_up{camera="b"} 0
cudanms_camera_up{camera="gpu=\"0\""} 1
# HELP cudanms_gpu_cameras Cameras placed on the GPU
# TYPE cudanms_gpu_cameras gauge
cudanms_gpu_cameras{gpu="1"} 2
# HELP cudanms_gpu_memory_used_bytes GPU memory in use on the device
# TYPE cudanms_gpu_memory_used_bytes gauge
cudanms_gpu_memory_used_bytes{gpu="0"} 101
cudanms_gpu_memory_used_bytes{gpu="1"} 201
# HELP process_open_fds Open file descriptors of the service
# TYPE process_open_fds gauge
process_open_fds 12
)";

// Each family once, its samples together: what the exposition format requires (the service
// tests read the real thing with the Prometheus client's parser).
TEST(WorkerMerge, MetricsAreOneExposition) {
  const std::string own = "# HELP cudanms_worker_up up\n# TYPE cudanms_worker_up gauge\n"
                          "cudanms_worker_up{worker=\"0\"} 1\n"
                          "# HELP process_open_fds Open file descriptors of the service\n"
                          "# TYPE process_open_fds gauge\nprocess_open_fds 9\n";
  const std::vector<std::string> merged =
      lines_of(merge_metrics({{"supervisor", own}, {"0", kWorker0}, {"1", kWorker1}}));
  const std::vector<std::string> expected = {
      "# HELP cudanms_worker_up up",
      "# TYPE cudanms_worker_up gauge",
      "cudanms_worker_up{worker=\"0\"} 1",
      "# HELP process_open_fds Open file descriptors of the service",
      "# TYPE process_open_fds gauge",
      "process_open_fds{worker=\"supervisor\"} 9",
      "process_open_fds{worker=\"0\"} 11",
      "process_open_fds{worker=\"1\"} 12",
      "# HELP cudanms_camera_up 1 while the camera streams, else 0",
      "# TYPE cudanms_camera_up gauge",
      "cudanms_camera_up{camera=\"a\"} 1",
      "cudanms_camera_up{camera=\"b\"} 0",
      "cudanms_camera_up{camera=\"gpu=\\\"0\\\"\"} 1",
      "# HELP cudanms_gpu_cameras Cameras placed on the GPU",
      "# TYPE cudanms_gpu_cameras gauge",
      "cudanms_gpu_cameras{gpu=\"0\"} 1",
      "cudanms_gpu_cameras{gpu=\"1\"} 2",
      "# HELP cudanms_gpu_memory_used_bytes GPU memory in use on the device",
      "# TYPE cudanms_gpu_memory_used_bytes gauge",
      "cudanms_gpu_memory_used_bytes{gpu=\"0\"} 100",
      "cudanms_gpu_memory_used_bytes{gpu=\"1\"} 201",
  };
  EXPECT_EQ(merged, expected);
  EXPECT_EQ(count(merged, "# TYPE cudanms_camera_up gauge"), 1u);
}

JsonObject *parsed(JsonParser *parser, const std::string &text) {
  EXPECT_TRUE(json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) << text;
  return json_node_get_object(json_parser_get_root(parser));
}

TEST(WorkerMerge, HealthIsOkOnlyWhenEveryCameraStreamsAndEveryWorkerIsUp) {
  const std::string streaming =
      R"({"uptime_seconds": 3, "cameras": {"a": {"state": "streaming", "enabled": true}}})";
  const std::string disabled =
      R"({"cameras": {"b": {"state": "stopped", "enabled": false}}, "status": "degraded"})";
  int status = 0;
  JsonParser *parser = json_parser_new();
  JsonObject *o = parsed(parser, merge_health({{"0", streaming}, {"1", disabled}},
                                              {{"0", true, 10, 0, ""}, {"1", true, 11, 2, "x"}},
                                              7, &status));
  EXPECT_EQ(status, 200);
  EXPECT_STREQ(json_object_get_string_member(o, "status"), "ok");
  EXPECT_EQ(json_object_get_int_member(o, "uptime_seconds"), 7);
  JsonObject *cameras = json_object_get_object_member(o, "cameras");
  EXPECT_TRUE(json_object_has_member(cameras, "a"));
  EXPECT_TRUE(json_object_has_member(cameras, "b"));
  JsonObject *one = json_object_get_object_member(json_object_get_object_member(o, "workers"), "1");
  EXPECT_EQ(json_object_get_int_member(one, "pid"), 11);
  EXPECT_EQ(json_object_get_int_member(one, "restarts"), 2);

  merge_health({{"0", streaming}}, {{"0", true, 10, 0, ""}, {"1", false, 0, 1, "killed"}}, 7,
               &status);
  EXPECT_EQ(status, 503) << "a worker down";
  const std::string reconnecting =
      R"({"cameras": {"c": {"state": "reconnecting", "enabled": true}}})";
  merge_health({{"0", streaming}, {"1", reconnecting}}, {}, 7, &status);
  EXPECT_EQ(status, 503) << "a camera not streaming";
  merge_health({{"0", streaming}, {"1", "<html>"}}, {}, 7, &status);
  EXPECT_EQ(status, 503) << "an answer that is not a health document";
  g_object_unref(parser);
}

}  // namespace
}  // namespace cudanms::service
