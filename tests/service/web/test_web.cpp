// The operator page's API without a server: the cameras' document (counts, events, no
// credentials), the supervisor's merge of its workers' documents, the page's files and the
// snapshot paths. The page itself, in a browser: web/test_page.py.
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <memory>

#include "web.h"

namespace cudanms::service {
namespace {

// The document's camera `name`, as a JSON object the test owns through `parser`.
JsonObject *camera_of(JsonParser *parser, const std::string &text, const std::string &name) {
  if (!json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) return nullptr;
  JsonObject *cameras =
      json_object_get_object_member(json_node_get_object(json_parser_get_root(parser)), "cameras");
  return cameras && json_object_has_member(cameras, name.c_str())
             ? json_object_get_object_member(cameras, name.c_str())
             : nullptr;
}

CameraSnapshot door() {
  CameraSnapshot c;
  c.name = "door";
  c.state = CameraState::kReconnecting;
  c.last_error = "Could not open rtsp://admin:hunter2@10.0.0.7/live and rtsp://:pw@cam/x";
  c.gpu = 1;
  c.reconnects = 3;
  c.snapshot_number = 42;
  c.counting.lines["entry"] = {5, 2};
  c.counting.crossings[{"entry", "in", "person"}] = 4;
  c.counting.crossings[{"entry", "in", "car"}] = 1;
  c.counting.occupancy[{"lobby", "person"}] = 2;
  c.counting.loitering["lobby"] = 1;
  c.counting.loitered[{"lobby", "person"}] = 3;
  c.events = {{9, 1700000001000000, "line-crossed", "entry", "in", "person", 17},
              {8, 1700000000000000, "zone-entered", "lobby", "", "person", 16}};
  return c;
}

// Loitering on /metrics: the tracks loitering now (a gauge) and the loitering events (a counter).
TEST(WebApi, LoiteringOnMetrics) {
  const std::string text = render_metrics({door()}, ProcessSnapshot());
  EXPECT_NE(text.find("# TYPE cudanms_zone_loitering gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("cudanms_zone_loitering{camera=\"door\",zone=\"lobby\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE cudanms_zone_loitering_total counter\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("cudanms_zone_loitering_total{camera=\"door\",zone=\"lobby\",label=\"person\"} 3\n"),
      std::string::npos)
      << text;
}

TEST(WebApi, ACameraSaysItsStateCountsAndEventsButNoCredentials) {
  const std::string text = render_cameras({door()}, "host-a");
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_EQ(text.find(":pw@"), std::string::npos) << text;
  JsonParser *parser = json_parser_new();
  JsonObject *c = camera_of(parser, text, "door");
  ASSERT_NE(c, nullptr) << text;
  EXPECT_STREQ(json_object_get_string_member(c, "state"), "reconnecting");
  EXPECT_STREQ(json_object_get_string_member(c, "host"), "host-a");
  EXPECT_STREQ(json_object_get_string_member(c, "gpu"), "1");
  EXPECT_STREQ(json_object_get_string_member(c, "last_error"),
               "Could not open rtsp://10.0.0.7/live and rtsp://cam/x");
  EXPECT_EQ(json_object_get_int_member(c, "reconnects"), 3);
  EXPECT_EQ(json_object_get_int_member(c, "snapshot"), 42);
  JsonObject *entry =
      json_object_get_object_member(json_object_get_object_member(c, "lines"), "entry");
  EXPECT_EQ(json_object_get_int_member(entry, "in"), 5);
  EXPECT_EQ(json_object_get_int_member(entry, "out"), 2);
  JsonArray *crossings = json_object_get_array_member(c, "crossings");
  ASSERT_EQ(json_array_get_length(crossings), 2u);
  JsonObject *car =
      json_array_get_object_element(crossings, 0);  // in the order of (line, dir, label)
  EXPECT_STREQ(json_object_get_string_member(car, "label"), "car");
  EXPECT_EQ(json_object_get_int_member(car, "count"), 1);
  JsonArray *occupancy = json_object_get_array_member(c, "occupancy");
  ASSERT_EQ(json_array_get_length(occupancy), 1u);
  EXPECT_EQ(json_object_get_int_member(json_array_get_object_element(occupancy, 0), "objects"), 2);
  EXPECT_EQ(json_object_get_int_member(json_object_get_object_member(c, "loitering"), "lobby"), 1);
  JsonArray *events = json_object_get_array_member(c, "events");
  ASSERT_EQ(json_array_get_length(events), 2u);
  JsonObject *newest = json_array_get_object_element(events, 0);
  EXPECT_EQ(json_object_get_int_member(newest, "id"), 9);
  EXPECT_STREQ(json_object_get_string_member(newest, "direction"), "in");
  EXPECT_EQ(json_object_get_int_member(newest, "track"), 17);
  EXPECT_DOUBLE_EQ(json_object_get_double_member(newest, "time"), 1700000001.0);
  g_object_unref(parser);

  CameraSnapshot on_cpu;
  on_cpu.name = "yard";
  JsonParser *second = json_parser_new();
  JsonObject *yard = camera_of(second, render_cameras({on_cpu}, "h"), "yard");
  ASSERT_NE(yard, nullptr);
  EXPECT_STREQ(json_object_get_string_member(yard, "gpu"), "cpu");
  EXPECT_EQ(json_object_get_int_member(yard, "snapshot"), 0);
  EXPECT_STREQ(json_object_get_string_member(yard, "pictures_failing"), "");
  g_object_unref(second);
  // Its events' pictures cannot be written: said on the page and on /metrics.
  on_cpu.counts.pictures_failing = "No space left on device";
  JsonParser *third = json_parser_new();
  yard = camera_of(third, render_cameras({on_cpu}, "h"), "yard");
  ASSERT_NE(yard, nullptr);
  EXPECT_STREQ(json_object_get_string_member(yard, "pictures_failing"), "No space left on device");
  g_object_unref(third);
}

TEST(WebApi, CredentialsLeaveEveryKindOfUrl) {
  EXPECT_EQ(without_credentials("rtsp://u:p@h:554/a"), "rtsp://h:554/a");
  EXPECT_EQ(without_credentials("http://user@h/x, https://a:b@c/"), "http://h/x, https://c/");
  EXPECT_EQ(without_credentials("no url, a@b.c mail"), "no url, a@b.c mail");
  EXPECT_EQ(without_credentials("rtsp://h/path@x"), "rtsp://h/path@x");  // @ after the host
  EXPECT_EQ(without_credentials(""), "");
}

TEST(WebApi, TheSupervisorMergesItsWorkersCamerasAndLeavesOutWhatIsNoDocument) {
  CameraSnapshot gate;
  gate.name = "gate";
  gate.state = CameraState::kStreaming;
  const std::string merged = merge_cameras({{"0", render_cameras({door()}, "h")},
                                            {"1", render_cameras({gate}, "h")},
                                            {"2", "not json"},
                                            {"3", "[1, 2]"},
                                            {"4", "{\"cameras\": 7}"},
                                            {"5", "{\"cameras\": {\"x\": 1}}"}},
                                           "host-b");
  JsonParser *parser = json_parser_new();
  JsonObject *g = camera_of(parser, merged, "gate");
  ASSERT_NE(g, nullptr) << merged;
  EXPECT_STREQ(json_object_get_string_member(g, "state"), "streaming");
  EXPECT_STREQ(json_object_get_string_member(g, "host"), "host-b");
  EXPECT_EQ(camera_of(parser, merged, "x"), nullptr) << "a camera that is no object";
  JsonObject *d = camera_of(parser, merged, "door");
  ASSERT_NE(d, nullptr) << merged;
  EXPECT_EQ(json_object_get_int_member(d, "snapshot"), 42);
  g_object_unref(parser);
}

// A fleet host's page after another host died: the dead host's camera is "unanswered" (then
// "unplaced"), its last events kept and marked as that host's; a camera another host runs now
// shows that host's events, not the dead one's.
TEST(WebApi, ADeadHostsLastEventsStayOnTheSitesPage) {
  CameraSnapshot gate;
  gate.name = "gate";
  gate.state = CameraState::kStreaming;
  gate.events = {{3, 1700000005000000, "line-crossed", "entry", "out", "car", 5}};
  const std::string dead_before = render_cameras({door()}, "host-a");
  const std::string dead_last = render_cameras({door(), gate}, "host-a");
  const std::string alive = render_cameras({}, "host-b");
  CameraSnapshot moved = gate;
  moved.events = {{4, 1700000006000000, "line-crossed", "entry", "in", "car", 6}};
  const std::vector<SiteCamera> site = {{"door", "host-a", "http://a:1", "", true},
                                        {"gate", "", "", "", true}};
  const std::string page =
      site_cameras(render_cameras({}, "here"), {{"http://b:1", alive}}, site,
                   {{"http://a:1", dead_before}, {"http://a:1", dead_last}});
  JsonParser *parser = json_parser_new();
  JsonObject *d = camera_of(parser, page, "door");
  ASSERT_NE(d, nullptr) << page;
  EXPECT_STREQ(json_object_get_string_member(d, "state"), "unanswered");
  JsonArray *events = json_object_get_array_member(d, "events");
  ASSERT_EQ(json_array_get_length(events), 2u) << page;
  JsonObject *first = json_array_get_object_element(events, 0);
  EXPECT_EQ(json_object_get_int_member(first, "id"), 9);
  EXPECT_STREQ(json_object_get_string_member(first, "host"), "host-a");
  JsonObject *g = camera_of(parser, page, "gate");
  ASSERT_NE(g, nullptr) << page;
  EXPECT_STREQ(json_object_get_string_member(g, "state"), "unplaced");
  ASSERT_EQ(json_array_get_length(json_object_get_array_member(g, "events")), 1u);

  // The gate camera running on host b now: its own events only.
  const std::string now = site_cameras(render_cameras({}, "here"),
                                       {{"http://b:1", render_cameras({moved}, "host-b")}}, site,
                                       {{"http://a:1", dead_last}});
  g = camera_of(parser, now, "gate");
  ASSERT_NE(g, nullptr) << now;
  EXPECT_STREQ(json_object_get_string_member(g, "state"), "streaming");
  events = json_object_get_array_member(g, "events");
  ASSERT_EQ(json_array_get_length(events), 1u);
  EXPECT_EQ(json_object_get_int_member(json_array_get_object_element(events, 0), "id"), 4);
  g_object_unref(parser);
}

TEST(WebApi, SnapshotsAndPageFiles) {
  EXPECT_EQ(snapshot_camera("/snapshot/door"), "door");
  EXPECT_EQ(snapshot_camera("/snapshot/yard%20west"), "yard west");
  EXPECT_EQ(snapshot_camera("/snapshot/a%2Fb"), "");  // no camera: a name holds no "/"
  EXPECT_EQ(snapshot_camera("/metrics"), "");

  Reply none = snapshot_reply({});
  EXPECT_EQ(none.status, 503);
  Reply picture = snapshot_reply({std::make_shared<const std::string>("\xff\xd8jpeg"), 3});
  EXPECT_EQ(picture.status, 200);
  EXPECT_EQ(picture.type, kJpegType);
  EXPECT_EQ(picture.body, "\xff\xd8jpeg");

  for (const char *path : {"/", "/index.html", "/app.js", "/style.css"}) {
    Reply file = page_file(path);
    EXPECT_EQ(file.status, 200) << path << ": " << file.body;
    EXPECT_FALSE(file.body.empty()) << path;
  }
  EXPECT_NE(page_file("/").type.find("text/html"), std::string::npos);
  EXPECT_EQ(page_file("/../service.cpp").status, 404);
  EXPECT_EQ(page_file("/etc/passwd").status, 404);
  EXPECT_EQ(not_found("/nope").status, 404);
}

}  // namespace
}  // namespace cudanms::service
