// A site of many hosts on one machine (docs/fleet.md): `cudanms-service fleet simulate` runs the
// hosts' agents (their leases, watches, plans, claims and releases, as a real host's supervisor
// holds them) with cameras that do nothing, against a real three-member etcd. Measured: the time
// until every camera is placed, until a dead host's cameras run elsewhere, the cameras that move
// when hosts join, and what the site costs etcd and the hosts' process in steady state. CI's size
// by default (20 hosts, 300 cameras); CUDANMS_FLEET_SCALE=HOSTS,CAMERAS for docs/fleet.md's.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "service/fleet_support.h"

namespace cudanms::testing {
namespace {

// The simulated hosts' process, asked through its stdin, answering on its stdout.
class SimulatedSite {
 public:
  bool start(const std::vector<std::string> &argv, const std::string &err) {
    GSubprocessLauncher *launcher = g_subprocess_launcher_new(static_cast<GSubprocessFlags>(
        G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE));
    g_subprocess_launcher_set_stderr_file_path(launcher, err.c_str());
    std::vector<const gchar *> args;
    for (const std::string &a : argv) args.push_back(a.c_str());
    args.push_back(nullptr);
    process_ = g_subprocess_launcher_spawnv(launcher, args.data(), nullptr);
    g_object_unref(launcher);
    if (!process_) return false;
    out_ = g_data_input_stream_new(g_subprocess_get_stdout_pipe(process_));
    pid_ = std::atoi(g_subprocess_get_identifier(process_));
    return true;
  }
  ~SimulatedSite() {
    if (!process_) return;
    g_subprocess_force_exit(process_);
    g_subprocess_wait(process_, nullptr, nullptr);
    g_object_unref(out_);
    g_object_unref(process_);
  }
  // A command's answer line.
  std::string ask(const std::string &command) {
    const std::string line = command + "\n";
    g_output_stream_write_all(g_subprocess_get_stdin_pipe(process_), line.data(), line.size(),
                              nullptr, nullptr, nullptr);
    gchar *answer = g_data_input_stream_read_line(out_, nullptr, nullptr, nullptr);
    const std::string out = answer ? answer : "";
    g_free(answer);
    return out;
  }
  // host -> the cameras it runs.
  std::map<std::string, int> running() {
    std::map<std::string, int> out;
    JsonParser *parser = json_parser_new();
    if (json_parser_load_from_data(parser, ask("report").c_str(), -1, nullptr)) {
      JsonObject *hosts = json_object_get_object_member(
          json_node_get_object(json_parser_get_root(parser)), "per_host");
      GList *names = json_object_get_members(hosts);
      for (GList *n = names; n; n = n->next) {
        const char *name = static_cast<const char *>(n->data);
        out[name] = static_cast<int>(json_object_get_int_member(hosts, name));
      }
      g_list_free(names);
    }
    g_object_unref(parser);
    return out;
  }
  int total() {
    int sum = 0;
    for (const auto &[host, cameras] : running()) sum += cameras;
    return sum;
  }
  // CPU seconds it has used, and its resident memory in MiB.
  double cpu_s() const {
    const std::string stat = read_file("/proc/" + std::to_string(pid_) + "/stat");
    std::vector<std::string> fields;
    gchar **parts = g_strsplit(stat.substr(stat.rfind(')') + 2).c_str(), " ", -1);
    for (gchar **p = parts; *p; ++p) fields.push_back(*p);
    g_strfreev(parts);
    return fields.size() > 12 ? (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) /
                                    sysconf(_SC_CLK_TCK)
                              : 0;
  }
  double rss_mib() const {
    const std::string status = read_file("/proc/" + std::to_string(pid_) + "/status");
    const size_t at = status.find("VmRSS:");
    return at == std::string::npos ? 0 : std::atof(status.c_str() + at + 6) / 1024;
  }

 private:
  GSubprocess *process_ = nullptr;
  GDataInputStream *out_ = nullptr;
  int pid_ = 0;
};

// What every member of `etcd` has answered, and the bytes it has sent and received, so far.
struct EtcdWork {
  double requests = 0, bytes = 0;
};
EtcdWork etcd_work(const EtcdCluster &etcd) {
  EtcdWork work;
  SoupSession *session = soup_session_new_with_options("timeout", 5, nullptr);
  for (const std::string &endpoint : etcd.endpoint_list()) {
    SoupMessage *message = soup_message_new("GET", (endpoint + "/metrics").c_str());
    GBytes *body = soup_session_send_and_read(session, message, nullptr, nullptr);
    g_object_unref(message);
    if (!body) continue;
    gsize size = 0;
    const auto *data = static_cast<const char *>(g_bytes_get_data(body, &size));
    const std::string text(data, size);
    g_bytes_unref(body);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const double value = std::atof(line.c_str() + line.rfind(' ') + 1);
      // Unary requests (ranges, transactions, lease grants); a stream's messages are not counted
      // by etcd, its bytes are.
      if (line.rfind("grpc_server_handled_total{", 0) == 0) work.requests += value;
      if (line.rfind("etcd_network_client_grpc_received_bytes_total ", 0) == 0 ||
          line.rfind("etcd_network_client_grpc_sent_bytes_total ", 0) == 0)
        work.bytes += value;
    }
  }
  g_object_unref(session);
  return work;
}

// camera -> the host etcd says owns it.
std::map<std::string, std::string> owners(const EtcdCluster &etcd) {
  service::EtcdClient client(etcd.endpoint_list(), 5000);
  const std::string folder = "/cudanms/scale/owners/";
  const service::EtcdReply reply =
      client.post_sync("/v3/kv/txn", service::etcd::txn({}, {service::etcd::range(folder, true)}));
  std::map<std::string, std::string> out;
  for (const service::EtcdKeyValue &kv : reply.kvs(0)) out[kv.key.substr(folder.size())] = kv.value;
  return out;
}

TEST_F(Fleet, ASiteOfManyHostsPlacesItsCamerasQuicklyAndCostsEtcdLittle) {
  int hosts = 20, cameras = 300;
  if (const char *scale = g_getenv("CUDANMS_FLEET_SCALE")) {
    ASSERT_EQ(sscanf(scale, "%d,%d", &hosts, &cameras), 2) << "CUDANMS_FLEET_SCALE=HOSTS,CAMERAS";
  }
  const int joining = std::max(1, hosts / 10);
  EtcdCluster etcd(dir_, 3);
  ASSERT_TRUE(etcd.start()) << read_file(dir_.file("etcd-m0.err"));
  std::string site = "[service]\ndetector = brightspot\n";
  for (int i = 1; i <= cameras; ++i)
    site += "[camera.cam" + std::to_string(i) + "]\nurl = rtsp://127.0.0.1:9/cam" +
            std::to_string(i) + "\n";
  const std::string site_file = dir_.file("site.conf"), host_file = dir_.file("host.conf");
  g_file_set_contents(site_file.c_str(), site.c_str(), -1, nullptr);
  // More than etcd takes in one transaction (128 operations): the import splits them.
  ASSERT_EQ(fleet({"--fleet", etcd.endpoints(), "--site", "scale", "import", site_file}), 0)
      << read_file(dir_.file("fleet.err"));
  // Room for twice a host's share.
  const int capacity = 2 * ((cameras + hosts - 1) / hosts);
  const std::string host_text = host_config(
      "sim", etcd.endpoints(), {{"site", "scale"}, {"capacity", std::to_string(capacity)}});
  g_file_set_contents(host_file.c_str(), host_text.c_str(), -1, nullptr);

  SimulatedSite simulated;
  const double start = now_s();
  ASSERT_TRUE(simulated.start(
      {script("service"), "fleet", "--config", host_file, "simulate", std::to_string(hosts)},
      dir_.file("simulated.err")));
  ASSERT_TRUE(eventually(60, [&] { return simulated.total() == cameras; }))
      << simulated.ask("report") << read_file(dir_.file("simulated.err"));
  const double placed_s = now_s() - start;

  // Steady state: nothing changes; the hosts renew their leases, etcd keeps them.
  g_usleep(2 * G_USEC_PER_SEC);
  const EtcdWork before = etcd_work(etcd);
  const double cpu_before = simulated.cpu_s();
  const double steady_from = now_s();
  g_usleep(10 * G_USEC_PER_SEC);
  const EtcdWork after = etcd_work(etcd);
  const double steady_s = now_s() - steady_from;
  const double requests_per_s = (after.requests - before.requests) / steady_s;
  const double kib_per_s = (after.bytes - before.bytes) / steady_s / 1024;
  const double cpu_per_host = (simulated.cpu_s() - cpu_before) / steady_s / hosts;
  const double rss = simulated.rss_mib();

  // A host dies: its cameras run on the others after its lease's TTL.
  std::map<std::string, int> running = simulated.running();
  const std::string dead = running.begin()->first;
  const int orphans = running.begin()->second;
  ASSERT_EQ(simulated.ask("kill " + dead), "killed");
  const double died = now_s();
  ASSERT_TRUE(eventually(kTtl + 10, [&] { return simulated.total() == cameras; }))
      << simulated.ask("report");
  const double replaced_s = now_s() - died;

  // Hosts join: they take their share from the others, and no more moves.
  const std::map<std::string, std::string> settled = owners(etcd);
  ASSERT_EQ(static_cast<int>(settled.size()), cameras);
  for (int i = 1; i <= joining; ++i)
    ASSERT_EQ(simulated.ask("add new-" + std::to_string(i)), "added");
  const int live = hosts - 1 + joining;
  const int share = cameras / live;  // what each host holds at least, once settled
  ASSERT_TRUE(eventually(30, [&] {
    running = simulated.running();
    for (int i = 1; i <= joining; ++i)
      if (running["new-" + std::to_string(i)] < share) return false;
    return simulated.total() == cameras;
  })) << simulated.ask("report");
  int moved = 0;
  for (const auto &[camera, host] : owners(etcd)) moved += settled.at(camera) != host;
  int joined = 0;
  for (int i = 1; i <= joining; ++i) joined += running["new-" + std::to_string(i)];

  printf(
      "| hosts | cameras | all placed | a dead host's %d cameras placed again | %d hosts join: "
      "cameras moved (they took) | etcd, steady: requests/s | KiB/s | a host's CPU | the "
      "process's memory |\n",
      orphans, joining);
  printf("| %d | %d | %.1f s | %.1f s | %d (%d) | %.0f | %.0f | %.2f %% | %.0f MiB |\n", hosts,
         cameras, placed_s, replaced_s, moved, joined, requests_per_s, kib_per_s,
         100 * cpu_per_host, rss);
  EXPECT_LT(placed_s, 30);
  EXPECT_LT(replaced_s, kTtl + 2);
  EXPECT_LT(requests_per_s, 500);
  EXPECT_EQ(moved, joined) << "only what the joining hosts took moves";
}

}  // namespace
}  // namespace cudanms::testing
