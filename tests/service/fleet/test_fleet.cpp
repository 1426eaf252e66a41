// A site's cameras over a fleet of hosts (docs/fleet.md), as a site runs them: an etcd cluster
// of the test's own, a camera server with a dozen cameras on 127.0.0.1 that counts each camera's
// clients, a broker (Debian's mosquitto), and fleet hosts (pipelines/service, fleet = ...) that
// the tests kill (SIGKILL: the whole host), stop (SIGSTOP: the process that holds its lease) and
// start again; etcd's members killed too. The detector is brightspot (a test plugin), cheap
// enough for twelve cameras on two cores: what is under test is where the cameras run. Every
// wait is bounded. Skips without etcd (Debian's etcd-server).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "service/fleet_support.h"

namespace cudanms::testing {
namespace {

// Three hosts share twelve cameras, four each. One host dies (SIGKILL of its supervisor and its
// worker at once) while the broker hangs (SIGSTOP), so that events it counted were never
// acknowledged: its cameras stream again on the other two within the lease's TTL, the back-off
// and 2 s; no camera ever has two clients at its server; counts go on from where the dead host
// left them (never lower), track and event ids are never given twice, and once the broker goes
// on every event the JSON lines show reaches it (at least once: the next host sends the dead
// host's unacknowledged ones again, under their ids); the other cameras keep their frame rate.
// The host comes back and takes its share by rebalancing: four cameras move, no more.
TEST_F(Fleet, AKilledHostsCamerasRunOnTheOthersAndTheirCountsGoOn) {
  const int mqtt_port = free_port();
  Broker broker(mqtt_port);
  if (mosquitto_binary().empty() || !broker.start()) GTEST_SKIP() << "no mosquitto";
  Subscriber events(mqtt_port, "cudanms/+/events");
  ASSERT_TRUE(events.connected());
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 12, 12));

  FleetHost a(dir_, "a"), b(dir_, "b"), c(dir_, "c");
  const std::vector<FleetHost *> hosts = {&a, &b, &c};
  const std::map<std::string, std::string> mqtt = {{"mqtt-address", broker.address()}};
  for (FleetHost *host : hosts)
    ASSERT_TRUE(host->start(host_config(host->name(), etcd.endpoints(), mqtt)));
  ASSERT_TRUE(eventually(40, [&] { return placement(hosts).size() == 12; })) << logs(hosts);
  ASSERT_TRUE(eventually(20, [&] { return balanced(hosts, 4); })) << logs(hosts);
  // Each camera's ball crosses its line every 5 s.
  ASSERT_TRUE(eventually(30, [&] {
    for (const std::string &camera : names(12)) {
      size_t crossings = 0;
      for (FleetHost *host : hosts)
        crossings += read_camera(host->json_path(camera)).event_ids.size();
      if (crossings == 0) return false;
    }
    return true;
  })) << logs(hosts);

  std::vector<std::string> victims, others;
  for (const auto &[camera, host] : placement(hosts))
    (host == "a" ? victims : others).push_back(camera);
  ASSERT_EQ(victims.size(), 4u);
  const std::map<std::string, double> before = rates(hosts, others, 6);
  // Events a counts while the broker hangs: sent, never acknowledged.
  size_t sent = 0;
  for (const std::string &camera : victims)
    sent += read_camera(a.json_path(camera)).event_ids.size();
  broker.stop();
  ASSERT_TRUE(eventually(10, [&] {
    size_t now = 0;
    for (const std::string &camera : victims)
      now += read_camera(a.json_path(camera)).event_ids.size();
    return now > sent;
  })) << "no crossing on a's cameras in 10 s";
  std::map<std::string, CameraRecord> left;  // what a's JSON lines said last
  std::map<std::string, size_t> elsewhere;   // each victim's frames on b and c so far
  a.kill();
  const double killed = now_s();
  for (const std::string &camera : victims) {
    left[camera] = read_camera(a.json_path(camera));
    elsewhere[camera] =
        read_camera(b.json_path(camera)).frames + read_camera(c.json_path(camera)).frames;
  }
  const std::vector<FleetHost *> survivors = {&b, &c};
  std::map<std::string, double> recovered;
  // The others' frame rate while the dead host's cameras move.
  const double window_start = now_s();
  const auto others_before = frames(survivors, others);
  ASSERT_TRUE(eventually(kTakeover + 5, [&] {
    for (const std::string &camera : victims) {
      if (recovered.count(camera)) continue;
      const size_t now =
          read_camera(b.json_path(camera)).frames + read_camera(c.json_path(camera)).frames;
      if (now > elsewhere[camera]) recovered[camera] = now_s() - killed;
    }
    return recovered.size() == victims.size();
  })) << logs(hosts);
  for (const auto &[camera, seconds] : recovered) {
    printf("%s: frames again on another host %.1f s after its host was killed\n", camera.c_str(),
           seconds);
    EXPECT_LE(seconds, kTakeover) << camera;
  }
  g_usleep(static_cast<gulong>(std::max(0.0, 6 - (now_s() - window_start)) * 1e6));
  const auto others_after = frames(survivors, others);
  const double window = now_s() - window_start;
  for (const std::string &camera : others) {
    const double during = (others_after.at(camera) - others_before.at(camera)) / window;
    printf("%s: %.2f frames/s before, %.2f while the dead host's cameras moved\n", camera.c_str(),
           before.at(camera), during);
    EXPECT_GE(during, kRateKept * before.at(camera)) << camera;
  }

  // The fleet's figures on /metrics, read with the Prometheus client's parser.
  for (FleetHost *host : survivors) {
    const std::string labels = ",host=" + host->name() + ",worker=supervisor";
    EXPECT_EQ(host->metric("cudanms_fleet_up" + labels), 1) << host->name();
    EXPECT_EQ(host->metric("cudanms_fleet_cameras_owned" + labels), 6) << host->name();
    EXPECT_GE(host->metric("cudanms_fleet_claims_total" + labels), 6) << host->name();
    EXPECT_EQ(host->metric("cudanms_fleet_cameras" + labels), 12) << host->name();
    EXPECT_EQ(host->metric("cudanms_fleet_hosts" + labels), 2) << host->name();
    EXPECT_GT(host->metric("cudanms_fleet_lease_renew_seconds_count" + labels), 5) << host->name();
    EXPECT_LT(host->metric("cudanms_fleet_lease_renew_seconds,host=" + host->name() +
                           ",quantile=0.99,worker=supervisor"),
              1)
        << host->name();
  }

  // The events a counted that the hanging broker never acknowledged: in etcd's outbox, for the
  // next host to send again.
  int resent = 0;
  for (FleetHost *host : survivors)
    for (const std::string &line : lines_of(host->log_path())) {
      int n = 0;
      const size_t at = line.find("events to send again: ");
      if (at != std::string::npos && sscanf(line.c_str() + at, "events to send again: %d", &n) == 1)
        resent += n;
    }
  printf("%d unacknowledged events of the dead host's to send again\n", resent);
  EXPECT_GE(resent, 1);

  // Counts, track ids and event ids go on from the dead host's.
  for (const std::string &camera : victims) {
    CameraRecord moved;
    for (FleetHost *host : survivors) {
      const CameraRecord r = read_camera(host->json_path(camera));
      if (r.frames) moved = r;
    }
    ASSERT_GT(moved.frames, 0u) << camera;
    EXPECT_GE(moved.last_in, left[camera].last_in) << camera;
    EXPECT_GE(moved.last_out, left[camera].last_out) << camera;
    EXPECT_GT(left[camera].last_in + left[camera].last_out, 0) << camera << " counted nothing";
    if (!moved.event_ids.empty()) {
      EXPECT_GT(*std::min_element(moved.event_ids.begin(), moved.event_ids.end()),
                left[camera].max_event_id)
          << camera << ": an event id given twice";
    }
    EXPECT_GT(moved.max_track_id, left[camera].max_track_id) << camera;
  }

  // The host comes back: it takes its share from the others, four cameras, no more, and their
  // counts go on there (a claim's answer carries them: the watch may show its owner key first).
  const std::map<std::string, std::string> settled = placement(hosts);
  std::map<std::string, CameraRecord> before_rebalance;
  std::map<std::string, size_t> frames_on_a;  // from its first run
  for (const auto &[camera, host] : settled) {
    for (FleetHost *h : survivors)
      if (h->name() == host) before_rebalance[camera] = read_camera(h->json_path(camera));
    frames_on_a[camera] = read_camera(a.json_path(camera)).frames;
  }
  ASSERT_TRUE(a.start(host_config("a", etcd.endpoints(), mqtt)));
  ASSERT_TRUE(eventually(30, [&] { return balanced(hosts, 4); })) << logs(hosts);
  int moved = 0;
  for (const auto &[name, host] : placement(hosts)) {
    if (settled.at(name) == host) continue;
    moved++;
    const std::string camera = name;  // a lambda takes no structured binding (C++17)
    ASSERT_TRUE(eventually(
        5, [&] { return read_camera(a.json_path(camera)).frames > frames_on_a[camera] + 5; }));
    const CameraRecord now = read_camera(a.json_path(camera));
    EXPECT_GE(now.last_in, before_rebalance[camera].last_in) << camera << " moved to a";
    EXPECT_GE(now.last_out, before_rebalance[camera].last_out) << camera << " moved to a";
  }
  EXPECT_EQ(moved, 4);
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());

  // Every event of the JSON lines so far reaches the broker once it goes on, whichever host
  // sends it (events counted later are not waited for: there is always a newest one in flight).
  broker.resume();
  std::set<std::pair<std::string, guint64>> expected, published, missing;
  for (const std::string &camera : names(12))
    for (FleetHost *host : hosts)
      for (guint64 id : read_camera(host->json_path(camera)).event_ids)
        expected.insert({camera, id});
  const bool all = eventually(30, [&] {
    published.clear();
    for (const std::string &message : events.messages()) {
      JsonParser *parser = json_parser_new();
      if (json_parser_load_from_data(parser, message.c_str(), -1, nullptr)) {
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        published.insert({json_object_get_string_member(o, "source"),
                          static_cast<guint64>(json_object_get_int_member(o, "id"))});
      }
      g_object_unref(parser);
    }
    missing.clear();
    for (const auto &event : expected)
      if (!published.count(event)) missing.insert(event);
    return missing.empty();
  });
  std::string which;
  for (const auto &[camera, id] : missing) which += " " + camera + "#" + std::to_string(id);
  ASSERT_TRUE(all) << "events of the JSON lines that never reached the broker:" << which << "\n"
                   << logs(hosts);
  printf("%zu events published (%zu messages, duplicates included)\n", published.size(),
         events.messages().size());

  for (FleetHost *host : hosts) host->terminate();
  for (FleetHost *host : hosts) EXPECT_EQ(host->wait_exit(15), 0) << host->log();
}

// Three hosts, twelve cameras. One host's supervisor, which holds its lease, stops (SIGSTOP)
// past the lease's TTL: its worker stops its cameras before the TTL ends (fencing) and the other
// two take them, never a camera with two clients. Let go on (SIGCONT), the host joins again with
// a new lease and takes back what rebalancing gives it, four cameras, no more. A camera added to
// etcd starts on a host within 2 s; removed, it stops within 2 s.
TEST_F(Fleet, AStoppedHostFencesItselfAndRejoinsAsRebalancingAllows) {
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 13, 12));
  FleetHost a(dir_, "a"), b(dir_, "b"), c(dir_, "c");
  const std::vector<FleetHost *> hosts = {&a, &b, &c};
  for (FleetHost *host : hosts)
    ASSERT_TRUE(host->start(host_config(host->name(), etcd.endpoints())));
  ASSERT_TRUE(eventually(40, [&] { return balanced(hosts, 4); })) << logs(hosts);

  const std::vector<std::string> stopped_cameras = cameras_on(hosts, "b");
  b.stop_supervisor();
  const double stopped = now_s();
  // Fenced: b's worker stops each camera before the lease can end, without its supervisor.
  std::map<std::string, double> fenced;
  ASSERT_TRUE(fenced_within_ttl(b, stopped_cameras, stopped, &fenced)) << b.log();
  for (const auto &[camera, seconds] : fenced) {
    printf("%s: stopped by its fenced host %.1f s after the host's supervisor stopped\n",
           camera.c_str(), seconds);
    EXPECT_LT(seconds, kTtl) << camera;
  }
  const std::vector<FleetHost *> others = {&a, &c};
  ASSERT_TRUE(eventually(kTakeover + 2, [&] { return placement(others).size() == 12; }))
      << logs(hosts);
  printf("all 12 cameras on a and c %.1f s after b's supervisor stopped\n", now_s() - stopped);
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());

  // Let go on past its TTL: it joins again and takes what rebalancing gives it.
  g_usleep(static_cast<gulong>(std::max(0.0, kTtl + 3 - (now_s() - stopped)) * 1e6));
  const std::map<std::string, std::string> settled = placement(others);
  b.resume_supervisor();
  ASSERT_TRUE(eventually(30, [&] { return balanced(hosts, 4); })) << logs(hosts);
  int moved = 0;
  for (const auto &[camera, host] : placement(hosts)) moved += settled.at(camera) != host;
  EXPECT_EQ(moved, 4) << "rebalancing moves what it must, no more";
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());

  // Added in etcd: started on a host with the fewest cameras within 2 s.
  ASSERT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "add", "cam13",
                   "url=" + server.url(13), "detector=brightspot"}),
            0)
      << read_file(dir_.file("fleet.err"));
  const double added = now_s();
  std::string started_on;
  ASSERT_TRUE(eventually(2, [&] {
    for (FleetHost *host : hosts)
      if (host->cameras().count("cam13")) started_on = host->name();
    return !started_on.empty();
  })) << logs(hosts);
  printf("cam13 started on %s %.1f s after it was added\n", started_on.c_str(), now_s() - added);
  ASSERT_TRUE(eventually(10, [&] { return placement(hosts).count("cam13") > 0; })) << logs(hosts);
  // Removed: stopped within 2 s, its server without a client.
  ASSERT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "remove", "cam13"}), 0);
  const double removed = now_s();
  ASSERT_TRUE(eventually(2, [&] {
    for (FleetHost *host : hosts)
      if (host->cameras().count("cam13")) return false;
    return server.clients()["/cam13"].first == 0;
  })) << logs(hosts);
  printf("cam13 stopped %.1f s after it was removed\n", now_s() - removed);
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
  for (FleetHost *host : hosts) host->terminate();
  for (FleetHost *host : hosts) EXPECT_EQ(host->wait_exit(15), 0) << host->log();
}

// Two hosts; a reaches etcd through a link the test cuts (a network partition: a's processes run
// on, etcd and b no longer hear from it, and nothing a sends is refused). a stops its cameras
// before its lease can end (fencing) and b takes them, never a camera with two clients. When the
// link is back, what a sent meanwhile reaches etcd late, and a joins again as rebalancing allows.
TEST_F(Fleet, APartitionedHostFencesItselfAndJoinsAgainWhenTheLinkIsBack) {
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 4, 4));
  Partition link(dir_);
  ASSERT_TRUE(link.start(etcd.endpoint(0))) << read_file(dir_.file("proxy.err"));
  FleetHost a(dir_, "a"), b(dir_, "b");
  const std::vector<FleetHost *> hosts = {&a, &b};
  ASSERT_TRUE(a.start(host_config("a", link.endpoint())));
  ASSERT_TRUE(b.start(host_config("b", etcd.endpoints())));
  ASSERT_TRUE(eventually(40, [&] { return balanced(hosts, 2); })) << logs(hosts);
  const std::vector<std::string> cut_off = cameras_on(hosts, "a");

  link.cut();
  ASSERT_NO_FATAL_FAILURE(expect_cut_off(a, cut_off, now_s(), kTtl, {&b}, 4, server));
  link.heal();
  expect_rejoined_and_end(hosts, 2, now_s(), server);
}

// Three hosts on a three-member etcd, each host on one member. The leader's member and its host
// are cut off from the other two members and hosts (a network partition inside etcd: the
// minority with the old leader runs on and answers its host, the majority elects a new leader;
// the other hosts' questions to the cut-off host go unanswered). The cut-off host stops its
// cameras before the majority's hosts claim them, never a camera with two clients; they take
// them, and their pages answer without it; the cut healed, it joins again.
TEST_F(Fleet, AMinorityWithTheOldLeaderFencesItsHostAndTheMajorityTakesOver) {
  EtcdCluster etcd(dir_, 3);
  ASSERT_TRUE(etcd.use_peer_proxies()) << read_file(dir_.file("peer-proxy-m0.err"));
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 6, 6));
  const int leader = etcd.leader();
  ASSERT_GE(leader, 0);
  FleetHost a(dir_, "a"), b(dir_, "b"), c(dir_, "c");
  const std::vector<FleetHost *> hosts = {&a, &b, &c};
  // The other hosts reach a's endpoint through a link the test cuts with a's member.
  const int a_port = free_port();
  Partition a_link(dir_, "a-link");
  ASSERT_TRUE(a_link.start("http://127.0.0.1:" + std::to_string(a_port)));
  ASSERT_TRUE(a.start(host_config("a", etcd.endpoint(leader),
                                  {{"metrics-address", "127.0.0.1:" + std::to_string(a_port)},
                                   {"advertise-url", a_link.endpoint()}})));
  ASSERT_TRUE(b.start(host_config("b", etcd.endpoint((leader + 1) % 3))));
  ASSERT_TRUE(c.start(host_config("c", etcd.endpoint((leader + 2) % 3))));
  ASSERT_TRUE(eventually(40, [&] { return balanced(hosts, 2); })) << logs(hosts);
  const std::vector<std::string> cut_off = cameras_on(hosts, "a");

  ASSERT_TRUE(etcd.isolate(leader));
  a_link.cut();
  const double cut = now_s();
  // The majority's page while a still holds its lease there: its question to a waits out its
  // timeout (2 s), and the page answers with what the others have.
  guint status = 0;
  const std::string site = b.get("/api/cameras", &status);
  printf("b's /api/cameras asking the cut-off a: answered in %.1f s\n", now_s() - cut);
  EXPECT_EQ(status, 200u) << site;
  EXPECT_LT(now_s() - cut, 4.0);
  // Its member, the old leader, answers its renewals until it steps down (up to two election
  // timeouts after the cut); the fence comes 0.7 TTL after the last answer (5.5 s at most, plus
  // the worker's next frame). The majority's new leader gives every lease its whole TTL again
  // when elected (after an election timeout at least): no host of the majority may claim before
  // 7 s, nor did (most_clients).
  ASSERT_NO_FATAL_FAILURE(
      expect_cut_off(a, cut_off, cut, kTtl + 2 * kEtcdElectionTimeout, {&b, &c}, 6, server));
  printf("etcd's leader now member %d (member %d before the cut)\n", etcd.leader(), leader);
  // Taken over: the majority's page shows every camera, a no longer asked.
  const std::string taken = b.get("/api/cameras", &status);
  EXPECT_EQ(status, 200u) << taken;
  for (const auto &[camera, host] : placement({&b, &c}))
    EXPECT_NE(taken.find("\"" + camera + "\""), std::string::npos) << camera << ": " << taken;
  etcd.heal();
  a_link.heal();
  expect_rejoined_and_end(hosts, 2, now_s(), server);
}

// Two hosts on a three-member etcd. The leader is killed: the fleet goes on, and no camera stops
// when the election is over before a host's fence time.
// Every member is killed: each host runs its cameras until its lease would have ended, stops
// them before (fencing), says "degraded (no etcd)" on /health; etcd back, the cameras run again.
// The quorum lost with its leader alive: fenced within the documented bound too.
TEST_F(Fleet, TheFleetOutlivesItsEtcdLeaderAndFencesItselfWithoutEtcd) {
  EtcdCluster etcd(dir_, 3);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 4, 4));
  FleetHost a(dir_, "a"), b(dir_, "b");
  const std::vector<FleetHost *> hosts = {&a, &b};
  for (FleetHost *host : hosts)
    ASSERT_TRUE(host->start(host_config(host->name(), etcd.endpoints())));
  ASSERT_TRUE(eventually(40, [&] { return placement(hosts).size() == 4; })) << logs(hosts);
  auto stops = [&] {  // each camera's state lines "stopped" so far, over every host
    std::map<std::string, size_t> n;
    for (const std::string &camera : names(4))
      for (FleetHost *host : hosts)
        for (const std::string &state : read_camera(host->json_path(camera)).states)
          n[camera] += state.rfind("stopped", 0) == 0;
    return n;
  };
  // Stops since `then`, and whether every camera is among them: a slow election may have stopped
  // some cameras already, so a total would count one camera's second stop for another's.
  auto stops_since = [&](const std::map<std::string, size_t> &then) {
    size_t n = 0;
    for (const auto &[camera, stopped] : stops()) n += stopped - then.at(camera);
    return n;
  };
  auto each_stopped_since = [&](const std::map<std::string, size_t> &then) {
    for (const auto &[camera, stopped] : stops())
      if (stopped == then.at(camera)) return false;
    return true;
  };
  const auto stops_before = stops();

  const int leader = etcd.leader();
  ASSERT_GE(leader, 0);
  const auto before = frames(hosts, names(4));
  etcd.kill(leader);
  const double killed = now_s();
  const double elected = etcd.seconds_to_leader(kTtl);
  g_usleep(static_cast<gulong>(std::max(0.0, kTtl + 3 - (now_s() - killed)) * 1e6));
  printf("etcd's leader (member %d) killed: a new one in %.1f s, %zu cameras stopped\n", leader,
         elected, stops_since(stops_before));
  // An election that outlasts the fence's delay (a machine too loaded to hold one in time) fences
  // the cameras until a renewal comes again, as it must: then only that they went on is checked.
  if (elected >= 0 && elected < kElectionWithinFence) {
    EXPECT_EQ(stops(), stops_before) << "a camera stopped when etcd's leader died\n" << logs(hosts);
  }
  EXPECT_EQ(placement(hosts).size(), 4u) << logs(hosts);
  const auto after = frames(hosts, names(4));
  for (const std::string &camera : names(4)) EXPECT_GT(after.at(camera), before.at(camera) + 50);
  ASSERT_TRUE(etcd.start_member(leader));
  // Every camera has counted a crossing before etcd goes, so that its counts going on after can
  // be told (the ball crosses every 5 s; on a loaded machine, under ASan, cameras start later).
  const auto line_counts = [&](const std::string &camera) {
    gint64 n = 0;
    for (FleetHost *host : hosts) {
      const CameraRecord r = read_camera(host->json_path(camera));
      n = std::max(n, r.last_in + r.last_out);
    }
    return n;
  };
  ASSERT_TRUE(eventually(20, [&] {
    for (const std::string &camera : names(4))
      if (line_counts(camera) == 0) return false;
    return true;
  })) << "a camera counted nothing in 20 s\n"
      << logs(hosts);

  const auto stops_alive = stops();
  for (int i = 0; i < etcd.members(); ++i) etcd.kill(i);
  const double gone = now_s();
  // Each camera stopped (fenced) before its host's lease could have ended.
  ASSERT_TRUE(eventually(kTtl + 2, [&] { return each_stopped_since(stops_alive); })) << logs(hosts);
  const double fenced = now_s() - gone;
  printf("every member of etcd killed: all 4 cameras fenced within %.1f s\n", fenced);
  EXPECT_LT(fenced, kTtl);
  std::string status;
  a.cameras(&status);
  EXPECT_EQ(status, "degraded (no etcd)");
  guint http = 0;
  a.get("/health", &http);
  EXPECT_EQ(http, 503u);
  const auto fenced_frames = frames(hosts, names(4));
  g_usleep(2 * G_USEC_PER_SEC);
  EXPECT_EQ(frames(hosts, names(4)), fenced_frames) << "frames published while fenced";
  std::map<std::string, gint64> counted;  // each camera's line counts, in + out, when fenced
  for (const std::string &camera : names(4)) counted[camera] = line_counts(camera);

  for (int i = 0; i < etcd.members(); ++i) ASSERT_TRUE(etcd.start_member(i));
  const double back = now_s();
  ASSERT_TRUE(eventually(30, [&] { return placement(hosts).size() == 4; })) << logs(hosts);
  printf("etcd back: all 4 cameras stream again %.1f s later\n", now_s() - back);
  // Their counts go on (read again from etcd, whether the lease outlived the outage or not).
  g_usleep(G_USEC_PER_SEC);
  for (const std::string &camera : names(4)) {
    EXPECT_GE(line_counts(camera), counted[camera]) << camera;
    EXPECT_GT(counted[camera], 0) << camera << " counted nothing before the outage";
  }
  a.cameras(&status);
  EXPECT_EQ(status, "ok");

  // The quorum lost with the leader alive (the two other members killed): the leader answers
  // renewals until it steps down (its election timeout), so the fence comes 3.5 s after its last
  // answer, within TTL + 1 s of the loss (docs/fleet.md); before the majority's new leader
  // could let another host claim (it gives every lease its whole TTL again).
  const int kept = etcd.leader();
  ASSERT_GE(kept, 0);
  const auto stops_now = stops();
  for (int i = 0; i < etcd.members(); ++i)
    if (i != kept) etcd.kill(i);
  const double lost = now_s();
  ASSERT_TRUE(eventually(kTtl + 3, [&] { return each_stopped_since(stops_now); })) << logs(hosts);
  const double fenced_minority = now_s() - lost;
  printf("the quorum lost, the leader (member %d) alive: all 4 cameras fenced within %.1f s\n",
         kept, fenced_minority);
  EXPECT_LT(fenced_minority, kTtl + 1);
  for (int i = 0; i < etcd.members(); ++i) {
    if (i != kept) {
      ASSERT_TRUE(etcd.start_member(i));
    }
  }
  ASSERT_TRUE(eventually(30, [&] { return placement(hosts).size() == 4; })) << logs(hosts);

  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
  for (FleetHost *host : hosts) host->terminate();
  for (FleetHost *host : hosts) EXPECT_EQ(host->wait_exit(15), 0) << host->log();
}

// A lease's renewal asks every member (EtcdClient::post_to_all): a member that takes the request
// and never answers (as one waiting for a new leader does) does not hold up the answer of one that
// gives it, where asking one after another waits out its timeout first. When none answers, the
// error names each member's reason once. Hedged, the others are asked only once the first has
// been silent for the hedge: a member that answers is asked alone.
TEST_F(Fleet, ARequestToEveryMemberTakesTheFirstAnswer) {
  EtcdCluster etcd(dir_, 1);
  ASSERT_TRUE(etcd.start()) << read_file(dir_.file("etcd-m0.err"));
  // Listens, never accepts: the request goes out and no answer comes.
  int silent_port = 0;
  GSocket *silent = loopback_socket(true, &silent_port);
  ASSERT_NE(silent, nullptr);
  const std::string silent_endpoint = "http://127.0.0.1:" + std::to_string(silent_port);

  const guint timeout_ms = 3000;
  service::EtcdClient client({silent_endpoint, etcd.endpoint(0)}, timeout_ms);
  GMainLoop *loop = g_main_loop_new(nullptr, FALSE);
  auto ask = [&](service::EtcdClient *to, bool to_all, double *waited_ms, guint hedge_ms = 0) {
    service::EtcdReply answer;
    const std::string body = "{\"key\":\"AA==\"}";
    auto done = [&](service::EtcdReply reply) {
      answer = std::move(reply);
      g_main_loop_quit(loop);
    };
    const gint64 start = g_get_monotonic_time();
    if (to_all)
      to->post_to_all("/v3/kv/range", body, done, hedge_ms);
    else
      to->post("/v3/kv/range", body, done);
    g_main_loop_run(loop);
    *waited_ms = (g_get_monotonic_time() - start) / 1e3;
    return answer;
  };
  double one_by_one_ms = 0, at_once_ms = 0;
  const service::EtcdReply first = ask(&client, false, &one_by_one_ms);  // the silent one first
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_GE(one_by_one_ms, timeout_ms);
  // A new client, so that the silent member is again the one it would ask first.
  service::EtcdClient racing({silent_endpoint, etcd.endpoint(0)}, timeout_ms);
  const service::EtcdReply raced = ask(&racing, true, &at_once_ms);
  ASSERT_TRUE(raced.ok()) << raced.error();
  EXPECT_LT(at_once_ms, timeout_ms) << "post_to_all waited for the silent member";
  printf("one after another: answered in %.0f ms; every member at once: %.0f ms\n",
         one_by_one_ms, at_once_ms);

  // Hedged (a lease's renewal): the member asked first alone while it answers, the others once
  // it has been silent for the hedge.
  const guint hedge_ms = 400;
  service::EtcdClient hedged_silent_first({silent_endpoint, etcd.endpoint(0)}, timeout_ms);
  double hedged_ms = 0;
  const service::EtcdReply late = ask(&hedged_silent_first, true, &hedged_ms, hedge_ms);
  ASSERT_TRUE(late.ok()) << late.error();
  EXPECT_GE(hedged_ms, hedge_ms);
  EXPECT_LT(hedged_ms, timeout_ms) << "the hedge did not ask the other member";
  printf("hedged, the silent member first: answered in %.0f ms\n", hedged_ms);
  int quiet_port = 0;
  GSocket *quiet = loopback_socket(true, &quiet_port);  // the other member: is it asked?
  ASSERT_NE(quiet, nullptr);
  g_socket_set_blocking(quiet, FALSE);
  service::EtcdClient hedged_good_first(
      {etcd.endpoint(0), "http://127.0.0.1:" + std::to_string(quiet_port)}, timeout_ms);
  for (int i = 0; i < 5; i++)
    ASSERT_TRUE(ask(&hedged_good_first, true, &hedged_ms, hedge_ms).ok());
  g_usleep(2 * hedge_ms * 1000);  // a hedge that would still fire
  GSocket *came = g_socket_accept(quiet, nullptr, nullptr);
  EXPECT_EQ(came, nullptr) << "a member that answers was hedged all the same";
  if (came) g_object_unref(came);
  g_object_unref(quiet);

  const std::string refusing = "http://127.0.0.1:" + std::to_string(free_port());
  service::EtcdClient nobody({silent_endpoint, refusing}, 300);
  const std::string why = ask(&nobody, true, &at_once_ms).error();
  EXPECT_EQ(why.rfind("no etcd endpoint answered: ", 0), 0u) << why;
  EXPECT_EQ(why.find("no etcd endpoint answered", 1), std::string::npos) << why;
  EXPECT_NE(why.find(silent_endpoint + ": no answer within 300 ms"), std::string::npos) << why;
  EXPECT_NE(why.find(refusing + ": "), std::string::npos) << why;
  g_main_loop_unref(loop);
  g_object_unref(silent);
}

// A site whose etcd takes only clients with a certificate its CA signed (TLS, --client-cert-auth):
// a host with the site's certificate runs its cameras, and its workers keep their counts there;
// one without it never joins and runs nothing.
TEST_F(Fleet, AnEtcdOverTlsTakesOnlyHostsWithTheSitesCertificate) {
  if (!g_tls_backend_supports_tls(g_tls_backend_get_default()))
    GTEST_SKIP() << "no TLS backend (Debian's glib-networking)";
  SiteCertificates site;
  if (!make_site_certificates(dir_.path, &site)) GTEST_SKIP() << "no openssl";
  EtcdCluster etcd(dir_, 1);
  etcd.use_tls(site);
  ASSERT_EQ(service::use_etcd_tls({site.ca, site.certificate, site.key}), "");  // the test's own
  CameraServer server(dir_);
  const std::map<std::string, std::string> tls = {
      {"fleet-ca", site.ca}, {"fleet-certificate", site.certificate}, {"fleet-key", site.key}};
  ASSERT_TRUE(etcd.start()) << read_file(dir_.file("etcd-m0.err"));
  ASSERT_EQ(etcd.endpoint(0).rfind("https://", 0), 0u);
  ASSERT_TRUE(server.start(2, clip()));
  ASSERT_EQ(import_as_host(etcd.endpoints(), tls, 2, server), 0)
      << read_file(dir_.file("fleet.err"));

  FleetHost a(dir_, "a");
  ASSERT_TRUE(a.start(host_config("a", etcd.endpoints(), tls)));
  ASSERT_TRUE(eventually(30, [&] { return a.streaming().size() == 2; }))
      << a.log() << a.get("/health");
  // Its workers keep the counts in etcd over the same TLS.
  ASSERT_TRUE(eventually(20, [&] { return newest_counts(etcd) > 0; })) << a.log();

  FleetHost stranger(dir_, "stranger");
  ASSERT_TRUE(stranger.start(host_config("stranger", etcd.endpoints(), {{"fleet-ca", site.ca}})));
  // etcd ends its handshake: it never joins, runs nothing, and says it is degraded because
  // etcd does not answer it (libsoup leaves such a request unfinished: its deadline ends it).
  std::string status;
  ASSERT_TRUE(eventually(10, [&] {
    stranger.cameras(&status);
    return status.rfind("degraded (no etcd", 0) == 0;
  })) << status << "\n" << stranger.log();
  g_usleep(3 * G_USEC_PER_SEC);
  stranger.cameras(&status);
  EXPECT_EQ(status.rfind("degraded", 0), 0u) << status;
  EXPECT_EQ(stranger.log().find("joined site"), std::string::npos) << stranger.log();
  EXPECT_TRUE(stranger.streaming().empty());
  EXPECT_EQ(a.streaming().size(), 2u);
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
  printf("etcd over TLS: the site's host runs both cameras; a host without its certificate none\n");
  service::use_etcd_tls({});
}

// A site whose etcd has users (auth enable): a host that logs in as the site's user runs its
// cameras, and its workers keep their counts there, through a restart of etcd that forgets every
// token; one with a wrong password runs nothing and says etcd refused its login; the password is
// nowhere the hosts speak.
TEST_F(Fleet, AnEtcdWithUsersTakesOnlyHostsThatLogIn) {
  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_TRUE(etcd.start()) << read_file(dir_.file("etcd-m0.err"));
  ASSERT_TRUE(server.start(2, clip()));
  const std::string password = "site-secret-9f3a", root = dir_.file("root-password"),
                    mine = dir_.file("site-password"), wrong = dir_.file("wrong-password");
  ASSERT_TRUE(g_file_set_contents(root.c_str(), "root-secret-77c1\n", -1, nullptr));
  ASSERT_TRUE(g_file_set_contents(mine.c_str(), (password + "\n").c_str(), -1, nullptr));
  ASSERT_TRUE(g_file_set_contents(wrong.c_str(), "not-the-password\n", -1, nullptr));
  ASSERT_TRUE(etcd.enable_auth(root, "site", password, "/cudanms/test/"));
  const std::map<std::string, std::string> login = {{"fleet-user", "site"},
                                                    {"fleet-password-file", mine}};
  // Without a login etcd answers nothing.
  ASSERT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "import",
                   cameras_file(2, server)}),
            1)
      << read_file(dir_.file("fleet.err"));
  ASSERT_EQ(import_as_host(etcd.endpoints(), login, 2, server), 0)
      << read_file(dir_.file("fleet.err"));

  FleetHost a(dir_, "a");
  ASSERT_TRUE(a.start(host_config("a", etcd.endpoints(), login)));
  ASSERT_TRUE(eventually(30, [&] { return a.streaming().size() == 2; }))
      << a.log() << a.get("/health");
  ASSERT_TRUE(eventually(20, [&] { return newest_counts(etcd) > 0; })) << a.log();

  // etcd restarted: its tokens are gone; the host logs in again and goes on keeping counts.
  etcd.kill(0);
  ASSERT_TRUE(etcd.start_member(0));
  ASSERT_TRUE(etcd.healthy(20)) << read_file(dir_.file("etcd-m0.err"));
  const gint64 before = newest_counts(etcd);
  ASSERT_TRUE(eventually(30, [&] {
    return newest_counts(etcd) > before && a.streaming().size() == 2;
  })) << a.log() << a.get("/health");

  FleetHost stranger(dir_, "stranger");
  ASSERT_TRUE(stranger.start(
      host_config("stranger", etcd.endpoints(),
                  {{"fleet-user", "site"}, {"fleet-password-file", wrong}})));
  std::string status;
  ASSERT_TRUE(eventually(10, [&] {
    stranger.cameras(&status);
    return status.rfind("degraded", 0) == 0 &&
           stranger.log().find("etcd refused the login of user site") != std::string::npos;
  })) << status << "\n" << stranger.log();
  g_usleep(3 * G_USEC_PER_SEC);
  EXPECT_EQ(stranger.log().find("joined site"), std::string::npos) << stranger.log();
  EXPECT_TRUE(stranger.streaming().empty());
  EXPECT_EQ(a.streaming().size(), 2u);
  EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
  for (const std::string &said : {a.log(), a.get("/health"), a.get("/metrics"),
                                  a.get("/api/cameras"), stranger.log(), stranger.get("/health")})
    EXPECT_EQ(said.find("secret"), std::string::npos) << said;
  printf("etcd with users: the site's user runs both cameras, through a restart of etcd; a wrong "
         "password none\n");
  service::use_etcd_login({});
}

// What a site gets wrong: an etcd no one answers at, an endpoint that is no URL, cameras in a
// fleet host's own file, cameras in etcd that cannot run (each reported with its key, the others
// run), two hosts with one host-id (the second refused), and the fleet command's errors.
TEST_F(Fleet, BadInputGetsClearAnswers) {
  // Nobody at the address: the host runs, degraded, and says so. The port is held by a socket
  // that does not listen, so that no server (the host's own endpoint once took a free_port()'s)
  // answers there and every connection is refused.
  int nobody = 0;
  GSocket *held = loopback_socket(false, &nobody);
  ASSERT_NE(held, nullptr);
  FleetHost lone(dir_, "lone");
  ASSERT_TRUE(lone.start(host_config("lone", "http://127.0.0.1:" + std::to_string(nobody))));
  std::string status;
  ASSERT_TRUE(eventually(5, [&] {
    lone.cameras(&status);
    return status == "degraded (no etcd)";
  })) << lone.log();
  guint http = 0;
  lone.get("/health", &http);
  EXPECT_EQ(http, 503u);
  EXPECT_NE(lone.log().find("fleet: no etcd: no etcd endpoint answered"), std::string::npos)
      << lone.log();
  lone.terminate();
  EXPECT_EQ(lone.wait_exit(15), 0);
  g_object_unref(held);

  // Config errors, with FILE:GROUP:KEY.
  const std::string host_file = dir_.file("host.conf");
  auto check = [&](const std::string &text) {
    g_file_set_contents(host_file.c_str(), text.c_str(), -1, nullptr);
    GSubprocess *p = spawn({script("service"), "--check-config", host_file}, dir_.file("check.out"),
                           dir_.file("check.err"));
    EXPECT_EQ(wait_exit(p, 30), 2);
    g_object_unref(p);
    return read_file(dir_.file("check.err"));
  };
  EXPECT_NE(check("[service]\nfleet = ftp://127.0.0.1:2379\n")
                .find(host_file + ":service:fleet: an endpoint is http(s)://HOST:PORT"),
            std::string::npos);
  EXPECT_NE(check("[service]\nfleet = http://127.0.0.1:2379\n[camera.x]\nurl = rtsp://h/x\n")
                .find("a fleet host runs the cameras etcd has"),
            std::string::npos);
  EXPECT_NE(check("[service]\nfleet = http://127.0.0.1:2379\nhost-id = a/b\n")
                .find(host_file + ":service:host-id: must be 1 to 64 letters"),
            std::string::npos);

  EtcdCluster etcd(dir_, 1);
  CameraServer server(dir_);
  ASSERT_NO_FATAL_FAILURE(start_site(&etcd, &server, 2, 2));
  // Cameras that cannot run, put there by hand: one naming an element that does not exist, one
  // whose value smuggles in a group of its own.
  service::EtcdClient client(etcd.endpoint_list(), 2000);
  const std::string bad = "url = " + server.url(1) + "\ndetector = nosuchelement\n";
  const std::string evil = "url = " + server.url(2) + "\n[service]\nmetrics-address = 0.0.0.0:80\n";
  ASSERT_TRUE(client
                  .post_sync("/v3/kv/txn",
                             service::etcd::txn(
                                 {}, {service::etcd::put("/cudanms/test/cameras/bad", bad),
                                      service::etcd::put("/cudanms/test/cameras/evil", evil)}))
                  .ok());
  FleetHost a(dir_, "a"), twin(dir_, "twin");
  ASSERT_TRUE(a.start(host_config("a", etcd.endpoints())));
  ASSERT_TRUE(eventually(30, [&] { return a.streaming().size() == 2; })) << a.log();
  const std::string health = a.get("/health");
  EXPECT_NE(health.find("\"bad\" : \"/cudanms/test/cameras/bad:camera.bad:detector:"),
            std::string::npos)
      << health;
  EXPECT_NE(health.find("\"evil\" : \"/cudanms/test/cameras/evil: holds a [group] line"),
            std::string::npos)
      << health;
  EXPECT_EQ(a.cameras().count("bad") + a.cameras().count("evil"), 0u);

  // A second host with a's host-id is refused, and a runs on.
  ASSERT_TRUE(twin.start(host_config("a", etcd.endpoints())));
  EXPECT_EQ(twin.wait_exit(kTtl + 10), 2) << twin.log();
  EXPECT_NE(twin.log().find("host-id a is another live host's in site test"), std::string::npos)
      << twin.log();
  EXPECT_EQ(a.streaming().size(), 2u) << a.log();

  // The fleet command's errors.
  std::string out;
  g_file_set_contents(dir_.file("typo.conf").c_str(), "[camera.x]\nurl = rtsp://h/x\nlatensy = 5\n",
                      -1, nullptr);
  EXPECT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "import", dir_.file("typo.conf")},
                  &out),
            2);
  EXPECT_NE(out.find(dir_.file("typo.conf") + ":camera.x:latensy: unknown key"), std::string::npos)
      << out;
  EXPECT_EQ(
      fleet({"--fleet", etcd.endpoints(), "--site", "test", "add", "cam1", "url=" + server.url(1)},
            &out),
      1);
  EXPECT_NE(out.find("camera cam1 is there already"), std::string::npos) << out;
  EXPECT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "remove", "nosuch"}, &out), 1);
  EXPECT_NE(out.find("no camera nosuch"), std::string::npos) << out;
  EXPECT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "test", "list"}, &out), 0);
  EXPECT_NE(out.find("cam1"), std::string::npos) << out;
  a.terminate();
  EXPECT_EQ(a.wait_exit(15), 0) << a.log();
}

}  // namespace
}  // namespace cudanms::testing
