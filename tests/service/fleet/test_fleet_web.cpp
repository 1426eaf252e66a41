// The operator's page of a fleet (web.h, docs/service.md): any host's /api/cameras lists every
// camera of the site with the host that runs it, the other hosts' cameras as those hosts say
// them and linked to their pages, and the cameras no host runs; a picture of another host's
// camera comes through it; a line drawn there goes into the camera's key in etcd, and the host
// that runs the camera counts on it. The site is the test's own, as test_fleet.cpp's: etcd, a
// camera server, two hosts with room for two cameras each, five cameras. Skips without etcd.
#include <gtest/gtest.h>

#include "service/fleet_support.h"

namespace cudanms::testing {
namespace {

constexpr const char *kKey = "key-of-the-site";

// A camera as a host's /api/cameras shows it.
struct Shown {
  std::string state, host, page, last_error, lines;  // lines: its configured "lines"
  gint64 door = 0;                                   // crossings of its line "door"
};

std::map<std::string, Shown> site_of(const FleetHost &host) {
  std::map<std::string, Shown> out;
  const std::string text = host.get("/api/cameras");
  JsonParser *parser = json_parser_new();
  if (!text.empty() && json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) {
    JsonObject *cameras = json_object_get_object_member(
        json_node_get_object(json_parser_get_root(parser)), "cameras");
    GList *names = cameras ? json_object_get_members(cameras) : nullptr;
    for (GList *n = names; n; n = n->next) {
      JsonObject *c = json_object_get_object_member(cameras, static_cast<const char *>(n->data));
      Shown s;
      s.state = json_object_get_string_member(c, "state");
      s.host = json_object_get_string_member(c, "host");
      s.page = json_object_get_string_member_with_default(c, "page", "");
      s.last_error = json_object_get_string_member(c, "last_error");
      s.lines = json_object_get_string_member(json_object_get_object_member(c, "shapes"), "lines");
      JsonObject *lines = json_object_get_object_member(c, "lines");
      if (json_object_has_member(lines, "door")) {
        JsonObject *door = json_object_get_object_member(lines, "door");
        s.door = json_object_get_int_member(door, "in") + json_object_get_int_member(door, "out");
      }
      out[static_cast<const char *>(n->data)] = s;
    }
    g_list_free(names);
  }
  g_object_unref(parser);
  return out;
}

// The camera's keys as etcd holds them.
std::string keys_in_etcd(const EtcdCluster &etcd, const std::string &camera) {
  using namespace cudanms::service;
  std::vector<std::string> endpoints;
  EtcdClient::check_endpoints(etcd.endpoints(), &endpoints);
  EtcdClient client(endpoints);
  const EtcdReply reply = client.post_sync(
      "/v3/kv/txn", etcd::txn({}, {etcd::range("/cudanms/test/cameras/" + camera)}));
  const std::vector<EtcdKeyValue> kvs = reply.kvs(0);
  return kvs.empty() ? "" : kvs.front().value;
}

TEST_F(Fleet, AnyHostsPageShowsTheSiteAndALineDrawnThereGoesToEtcd) {
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 5, 5));
  FleetHost a(dir_, "a"), b(dir_, "b");
  const std::vector<FleetHost *> hosts = {&a, &b};
  // The hosts' questions to one another carry the site's credential.
  const std::string credential = dir_.file("host-credential");
  ASSERT_TRUE(g_file_set_contents(credential.c_str(), "hosts-credential-4d2e\n", -1, nullptr));
  // b is reached through a proxy (advertise-url), as behind a NAT: a asks it there, and its
  // page links there.
  const int b_port = free_port();
  Partition b_proxy(dir_, "b-proxy");
  ASSERT_TRUE(b_proxy.start("http://127.0.0.1:" + std::to_string(b_port)));
  for (FleetHost *host : hosts) {
    std::map<std::string, std::string> keys = {
        {"capacity", "2"}, {"web-auth", kKey}, {"host-credential-file", credential}};
    if (host == &b)
      keys.insert({{"metrics-address", "127.0.0.1:" + std::to_string(b_port)},
                   {"advertise-url", b_proxy.endpoint()}});
    ASSERT_TRUE(host->start(host_config(host->name(), etcd.endpoints(), keys)));
  }
  ASSERT_TRUE(eventually(40, [&] { return placement(hosts).size() == 4 && balanced(hosts, 2); }))
      << logs(hosts);

  // Every camera on a's page: where it runs, b's linked to b's page, the fifth on none.
  const std::map<std::string, std::string> placed = placement(hosts);
  std::map<std::string, Shown> site;
  ASSERT_TRUE(eventually(10, [&] {
    site = site_of(a);
    for (const auto &[camera, host] : placed)
      if (!site.count(camera) || site[camera].state != "streaming") return false;
    return site.size() == 5;
  })) << a.get("/api/cameras");
  std::string remote, unplaced;
  for (const auto &[camera, shown] : site) {
    const auto runs = placed.find(camera);
    if (runs == placed.end()) {
      unplaced = camera;
      EXPECT_EQ(shown.state, "unplaced");
      EXPECT_EQ(shown.host, "");
      EXPECT_NE(shown.last_error, "");
      continue;
    }
    EXPECT_EQ(shown.host, runs->second) << camera;
    EXPECT_EQ(shown.page, runs->second == "b" ? b_proxy.endpoint() + "/" : "") << camera;
    if (runs->second == "b") remote = camera;
  }
  ASSERT_FALSE(remote.empty());
  ASSERT_FALSE(unplaced.empty());
  printf("a's page: %zu cameras; %s on b, linked to %s; %s on no host: %s\n", site.size(),
         remote.c_str(), site[remote].page.c_str(), unplaced.c_str(),
         site[unplaced].last_error.c_str());

  // b's camera's picture through a (made once asked for: the first asks may find none yet).
  guint status = 0;
  std::string jpeg;
  ASSERT_TRUE(eventually(10,
                         [&] {
                           jpeg = a.get("/snapshot/" + remote, &status);
                           return status == 200;
                         }))
      << status << " " << jpeg;
  EXPECT_EQ(jpeg.substr(0, 2), "\xff\xd8") << "not a JPEG";
  a.get("/snapshot/" + unplaced, &status);
  EXPECT_EQ(status, 404u) << unplaced << " runs nowhere: no picture";

  // What a host asks another is refused without the site's credential, or with another.
  for (const std::string &key :
       {std::string(), std::string("hosts-credential-4d2"), std::string(kKey)}) {
    b.request("GET", "/api/host/cameras", "", key, &status);
    EXPECT_EQ(status, 401u) << "key \"" << key << "\"";
  }
  const std::string own =
      b.request("GET", "/api/host/cameras", "", "hosts-credential-4d2e", &status);
  EXPECT_EQ(status, 200u) << own;
  EXPECT_NE(own.find(remote), std::string::npos) << own;
  for (FleetHost *host : hosts) {
    EXPECT_EQ(host->log().find("hosts-credential"), std::string::npos) << host->log();
    EXPECT_EQ(host->get("/health").find("hosts-credential"), std::string::npos);
  }

  // Refused, with the reason, etcd unchanged.
  const std::string keys_before = keys_in_etcd(etcd, remote);
  ASSERT_NE(keys_before, "");
  const std::string path = "/api/cameras/" + remote + "/shapes";
  struct Refusal {
    std::string path, body, key;
    guint status;
  };
  for (const Refusal &r : std::vector<Refusal>{
           {path, R"({"zones": "bow:0.1,0.1 0.9,0.9 0.9,0.1 0.1,0.9"})", kKey, 400},
           {path, R"({"lines": "door:0.5,0,0.5,1"})", "wrong-key", 401},
           {"/api/cameras/cam9/shapes", R"({"lines": "door:0.5,0,0.5,1"})", kKey, 404}}) {
    const std::string said = a.post(r.path, r.body, r.key, &status);
    EXPECT_EQ(status, r.status) << r.body << ": " << said;
    EXPECT_NE(said.find("\"error\""), std::string::npos) << said;
  }
  EXPECT_EQ(keys_in_etcd(etcd, remote), keys_before);

  // A line drawn on b's camera through a's page: into etcd, and b counts the ball on it.
  const std::string said = a.post(path, R"({"lines": "door:0.5,0,0.5,1"})", kKey, &status);
  ASSERT_EQ(status, 200u) << said;
  const std::string keys_after = keys_in_etcd(etcd, remote);
  EXPECT_NE(keys_after.find("lines=door:0.5,0,0.5,1"), std::string::npos) << keys_after;
  EXPECT_NE(keys_after.find("url="), std::string::npos) << keys_after;
  const double saved = now_s();
  ASSERT_TRUE(eventually(30,
                         [&] {
                           const Shown shown = site_of(a)[remote];
                           return shown.lines == "door:0.5,0,0.5,1" && shown.door > 0;
                         }))
      << a.get("/api/cameras") << logs(hosts);
  printf("%s counted on its new line 'door' %.1f s after it was saved\n", remote.c_str(),
         now_s() - saved);

  // b killed: a's page shows b's cameras not answering, then (a has no room) on no host.
  std::vector<std::string> on_b;
  for (const auto &[camera, host] : placed)
    if (host == "b") on_b.push_back(camera);
  b.kill();
  const double killed = now_s();
  auto all_of_b = [&](const std::string &state) {
    return [&, state] {
      site = site_of(a);
      for (const std::string &camera : on_b)
        if (site[camera].state != state) return false;
      return true;
    };
  };
  ASSERT_TRUE(eventually(5, all_of_b("unanswered"))) << a.get("/api/cameras");
  printf("b killed: its cameras shown not answering %.1f s later\n", now_s() - killed);
  ASSERT_TRUE(eventually(kTtl + 5, all_of_b("unplaced"))) << a.get("/api/cameras");
  printf("b's lease ended: its cameras shown on no host %.1f s after it was killed\n",
         now_s() - killed);
}

}  // namespace
}  // namespace cudanms::testing
