// A fleet's hosts sharing one history in a PostgreSQL server the test starts itself (Debian's
// postgresql-15 on 127.0.0.1): either host's /api/events shows every camera's crossings and their
// pictures (asked of the host that made them); the database stopped holds no frame and loses no
// event; a camera whose host is killed keeps one history on the host it moves to: its events from
// before and after, each id once.
#include <json-glib/json-glib.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "fleet_support.h"
#include "support/postgres_server.h"

namespace cudanms::testing {
namespace {

struct Kept {
  gint64 id;
  std::string host;
  std::string snapshot;  // its picture's URL; "" for none
  std::string clip;      // its clip's URL; "" for none
};

// The camera's crossings in the history, through `host`'s /api/events, newest first.
std::vector<Kept> crossings(const FleetHost &host, const std::string &camera) {
  std::vector<Kept> out;
  guint status = 0;
  const std::string text =
      host.get("/api/events?camera=" + camera + "&kind=line-crossed&limit=1000", &status);
  JsonParser *parser = json_parser_new();
  if (status == 200 && json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) {
    JsonArray *events =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "events");
    for (guint i = 0; events && i < json_array_get_length(events); i++) {
      JsonObject *e = json_array_get_object_element(events, i);
      const auto url = [e](const char *member) -> std::string {
        return json_object_get_null_member(e, member) ? ""
                                                      : json_object_get_string_member(e, member);
      };
      out.push_back({json_object_get_int_member(e, "id"), json_object_get_string_member(e, "host"),
                     url("snapshot"), url("clip")});
    }
  }
  g_object_unref(parser);
  return out;
}

TEST_F(Fleet, HostsKeepOneHistoryAndAMovedCameraKeepsItsOwn) {
  if (PostgresServer::bin_dir().empty())
    GTEST_SKIP() << "no PostgreSQL server (Debian's postgresql-15: ./run.sh test installs it)";
  PostgresServer postgres(dir_.path);
  std::string why;
  ASSERT_TRUE(postgres.start(&why)) << why;
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 2, 2));
  FleetHost a(dir_, "a"), b(dir_, "b");
  const std::vector<FleetHost *> hosts = {&a, &b};
  for (FleetHost *host : hosts)
    ASSERT_TRUE(
        host->start(host_config(host->name(), etcd.endpoints(),
                                {{"history", postgres.uri()},
                                 {"snapshots", dir_.file((host->name() + "-events").c_str())},
                                 {"clips", "true"},
                                 {"clip-post-capture", "1"}})));
  ASSERT_TRUE(eventually(40, [&] { return placement(hosts).size() == 2; })) << logs(hosts);
  ASSERT_TRUE(eventually(20, [&] { return balanced(hosts, 1); })) << logs(hosts);
  const std::string moving = cameras_on(hosts, "a").at(0);
  const std::string staying = cameras_on(hosts, "b").at(0);

  // One history: a's camera's crossings on b's page, b's on a's (the ball crosses every 5 s).
  ASSERT_TRUE(eventually(30, [&] {
    return crossings(b, moving).size() >= 2 && crossings(a, staying).size() >= 2;
  })) << logs(hosts);
  const size_t before = crossings(b, moving).size();
  for (const Kept &k : crossings(b, moving)) EXPECT_EQ(k.host, "a");
  // An event's picture is on the disk of the host that made it: b's page asks a for it.
  const std::vector<Kept> a_made = crossings(b, moving);
  const auto pictured =
      std::find_if(a_made.begin(), a_made.end(), [](const Kept &k) { return !k.snapshot.empty(); });
  ASSERT_NE(pictured, a_made.end()) << "no picture of a's crossings";
  guint status = 0;
  const std::string picture = b.get(pictured->snapshot, &status);
  EXPECT_EQ(status, 200u) << picture;
  EXPECT_EQ(picture.rfind("\xff\xd8", 0), 0u) << "not a JPEG";
  // And its clip, cut on a's disk from the camera's H.264: b asks a for it too.
  const auto clipped =
      std::find_if(a_made.begin(), a_made.end(), [](const Kept &k) { return !k.clip.empty(); });
  ASSERT_NE(clipped, a_made.end()) << "no clip of a's crossings";
  std::string clip;
  EXPECT_TRUE(eventually(10,
                         [&] {  // muxed once its post-capture has passed
                           clip = b.get(clipped->clip, &status);
                           return status == 200;
                         }))
      << status << " " << clip;
  EXPECT_EQ(clip.find("ftyp"), 4u) << "not an MP4";

  // The database stopped (SIGSTOP, every backend) for 6 s while both cameras count: their frames
  // go on at the rate before, their events wait in the hosts' queues, and once it answers again
  // every event of their JSON lines is in the history.
  const std::vector<std::string> both = {moving, staying};
  const std::map<std::string, double> rate_before = rates(hosts, both, 4);
  postgres.pause();
  const std::map<std::string, double> rate_stopped = rates(hosts, both, 6);
  postgres.resume();
  for (const std::string &camera : both) {
    printf("%s: %.2f frames/s, %.2f while the database was stopped\n", camera.c_str(),
           rate_before.at(camera), rate_stopped.at(camera));
    EXPECT_GE(rate_stopped.at(camera), kRateKept * rate_before.at(camera)) << camera;
  }
  for (const auto &counted : {std::pair{moving, &a}, std::pair{staying, &b}}) {
    const std::string &camera = counted.first;  // named, not bound: a lambda captures them
    const FleetHost *host = counted.second;
    std::set<gint64> in_lines;
    for (guint64 id : read_camera(host->json_path(camera)).event_ids)
      in_lines.insert(static_cast<gint64>(id));
    EXPECT_TRUE(eventually(15,
                           [&] {
                             std::set<gint64> kept;
                             for (const Kept &k : crossings(*host, camera)) kept.insert(k.id);
                             return std::includes(kept.begin(), kept.end(), in_lines.begin(),
                                                  in_lines.end());
                           }))
        << camera << ": an event of its JSON lines is not in the history";
  }

  // a is killed: its camera counts on b, into the same history.
  a.kill();
  ASSERT_TRUE(eventually(kTakeover + 15, [&] {
    for (const Kept &k : crossings(b, moving))
      if (k.host == "b") return true;
    return false;
  })) << logs(hosts);
  // a gone (and its disk: its folder removed), its pictures are out of reach: said so, naming
  // the host b asked, not a broken answer.
  GFile *a_disk = g_file_new_for_path(dir_.file("a-events").c_str());
  TempDir::remove_tree(a_disk);
  g_object_unref(a_disk);
  const std::string unreachable = b.get(pictured->snapshot, &status);
  EXPECT_EQ(status, 503u) << unreachable;
  EXPECT_NE(unreachable.find("host a"), std::string::npos) << unreachable;
  const std::vector<Kept> all = crossings(b, moving);
  std::set<gint64> ids;
  size_t from_a = 0;
  for (const Kept &k : all) {
    EXPECT_TRUE(ids.insert(k.id).second) << "event " << k.id << " twice";
    from_a += k.host == "a";
  }
  EXPECT_GE(from_a, before) << "a's events were written over by b's";
  // Newest first: b's after a's, their ids going on from a's.
  EXPECT_EQ(all.front().host, "b");
  EXPECT_GT(all.front().id, all.back().id);
  printf("%s: %zu crossings in the history, %zu counted on a before it was killed, %zu on b\n",
         moving.c_str(), all.size(), from_a, all.size() - from_a);
}

}  // namespace
}  // namespace cudanms::testing
