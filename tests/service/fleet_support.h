// Shared by the fleet's tests: an etcd cluster of the test's own (Debian's etcd-server) on
// 127.0.0.1, whose members the tests kill and restart; a camera server (pipelines/rtsp-server
// --cameras N --loop) sending a ball that crosses the middle of the frame, which counts each
// camera's clients; and fleet hosts (pipelines/service with fleet = ... in [service]), each in a
// process group of its own so that a test kills a whole host (its supervisor and its workers) at
// once, or stops the process that holds its lease alone. Every wait is bounded.
#pragma once

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "etcd.h"
#include "service_support.h"
#include "support/certificate.h"
#include "support/mqtt_broker.h"

namespace cudanms::testing {

inline std::string etcd_binary() {
  gchar *found = g_find_program_in_path("etcd");
  std::string path = found ? found : "";
  g_free(found);
  return path;
}

// A clip of videotestsrc's ball on black, 160x120 at 10 frames/s, 10 s a loop, H.264 without
// B-frames: its centre crosses the middle of the frame once each way a loop.
inline bool make_ball_clip(const std::string &path) {
  const std::string raw = path + ".i420";
  const std::string steps[] = {
      // Every other frame of the ball's 20 s wave: a loop of 10 s at 10 frames/s.
      "videotestsrc pattern=ball motion=wavy num-buffers=200 ! "
      "video/x-raw,width=160,height=120,framerate=10/1,format=I420 ! videorate ! "
      "video/x-raw,framerate=5/1 ! filesink location=\"" +
          raw + "\"",
      "filesrc location=\"" + raw +
          "\" ! rawvideoparse width=160 height=120 format=i420 "
          "framerate=10/1 ! x264enc bframes=0 key-int-max=10 tune=zerolatency "
          "speed-preset=ultrafast ! h264parse ! mp4mux ! filesink location=\"" +
          path + "\""};
  for (const std::string &step : steps) {
    GstElement *pipeline = gst_parse_launch(step.c_str(), nullptr);
    if (!pipeline) return false;
    gst_element_set_state(pipeline, GST_STATE_PLAYING);
    GstBus *bus = gst_element_get_bus(pipeline);
    GstMessage *end = gst_bus_timed_pop_filtered(
        bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    const bool good = end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
    if (end) gst_message_unref(end);
    gst_object_unref(bus);
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
    if (!good) return false;
  }
  g_remove(raw.c_str());
  return true;
}

// A process of the test's own, in a process group of its own.
class Process {
 public:
  ~Process() { kill_group(); }
  bool spawn(const std::vector<std::string> &argv, const std::string &out, const std::string &err,
             bool stdout_pipe = false) {
    GSubprocessLauncher *launcher = g_subprocess_launcher_new(
        stdout_pipe ? G_SUBPROCESS_FLAGS_STDOUT_PIPE : G_SUBPROCESS_FLAGS_NONE);
    g_subprocess_launcher_set_child_setup(
        launcher, [](gpointer) { setpgid(0, 0); }, nullptr, nullptr);
    if (!stdout_pipe) g_subprocess_launcher_set_stdout_file_path(launcher, out.c_str());
    g_subprocess_launcher_set_stderr_file_path(launcher, err.c_str());
    std::vector<const gchar *> args;
    for (const std::string &a : argv) args.push_back(a.c_str());
    args.push_back(nullptr);
    GError *error = nullptr;
    process_ = g_subprocess_launcher_spawnv(launcher, args.data(), &error);
    g_object_unref(launcher);
    if (!process_) ADD_FAILURE() << argv[0] << ": " << error->message;
    g_clear_error(&error);
    if (process_) pid_ = std::atoi(g_subprocess_get_identifier(process_));
    return process_ != nullptr;
  }
  // SIGKILL to the whole group: the machine it stands for is gone.
  void kill_group() {
    if (!process_) return;
    ::kill(-pid_, SIGCONT);
    ::kill(-pid_, SIGKILL);
    g_subprocess_wait(process_, nullptr, nullptr);
    g_clear_object(&process_);
  }
  void signal(int number) { ::kill(pid_, number); }
  // Its exit status (-1: killed, or still running after `seconds`).
  int wait_exit(double seconds) {
    if (!process_) return -1;
    const int status = cudanms::testing::wait_exit(process_, seconds);
    ::kill(-pid_, SIGKILL);  // what it left running
    g_clear_object(&process_);
    return status;
  }
  bool running() const { return process_ && g_subprocess_get_identifier(process_); }
  GSubprocess *subprocess() { return process_; }

 private:
  GSubprocess *process_ = nullptr;
  int pid_ = 0;
};

// A way to one member of etcd that a test can cut (tcp_proxy.py): what a host behind it sees of
// a network partition, the others untouched. With a cut file, a member's peer port that cuts the
// members the file names (EtcdCluster::isolate).
class Partition {
 public:
  explicit Partition(const TempDir &dir, std::string name = "proxy")
      : dir_(dir), name_(std::move(name)), port_(free_port()) {}
  // Forwards 127.0.0.1:port() to `target` (http://127.0.0.1:PORT).
  bool start(const std::string &target, const std::string &cut_file = "") {
    const std::string to = target.substr(target.rfind(':') + 1);
    std::vector<std::string> argv = {
        python(), std::string(g_getenv("CUDANMS_SOURCE_ROOT")) + "/tests/service/tcp_proxy.py",
        std::to_string(port_), to};
    if (!cut_file.empty()) argv.insert(argv.end(), {"--cut-file", cut_file});
    if (!process_.spawn(argv, "", dir_.file((name_ + ".err").c_str()), true)) return false;
    GDataInputStream *out =
        g_data_input_stream_new(g_subprocess_get_stdout_pipe(process_.subprocess()));
    gchar *line = g_data_input_stream_read_line(out, nullptr, nullptr, nullptr);
    g_object_unref(out);
    const bool listening = line && std::string(line) == "listening";
    g_free(line);
    return listening;
  }
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void cut() { process_.signal(SIGSTOP); }
  void heal() { process_.signal(SIGCONT); }

 private:
  const TempDir &dir_;
  const std::string name_;
  const int port_;
  Process process_;
};

// etcd members on 127.0.0.1, one cluster.
class EtcdCluster {
 public:
  EtcdCluster(const TempDir &dir, int members) : dir_(dir), members_(members) {
    for (int i = 0; i < members; ++i) {
      client_ports_.push_back(free_port());
      peer_ports_.push_back(free_port());
    }
    advertised_peer_ports_ = peer_ports_;
    processes_.resize(members);
  }
  // Each member's peers reach it through a proxy of the test's (tcp_proxy.py --cut-file), so
  // that isolate() can cut a member off from the others both ways (before start()).
  bool use_peer_proxies() {
    for (int i = 0; i < members_; ++i) {
      peer_proxies_.push_back(std::make_unique<Partition>(dir_, "peer-proxy-" + name(i)));
      g_remove(cut_file(i).c_str());
      if (!peer_proxies_[i]->start("http://127.0.0.1:" + std::to_string(peer_ports_[i]),
                                   cut_file(i)))
        return false;
      advertised_peer_ports_[i] = peer_proxies_[i]->port();
    }
    return true;
  }
  // With peer proxies: member i and the others no longer hear each other, each side running on
  // (a network partition inside etcd); false when the members' ids cannot be read.
  bool isolate(int i) {
    const std::map<std::string, std::string> ids = member_ids();
    if (ids.size() != static_cast<size_t>(members_) || peer_proxies_.empty()) return false;
    for (int j = 0; j < members_; ++j) {
      const std::string refused = j == i ? "*" : ids.at(name(i));
      if (!g_file_set_contents(cut_file(j).c_str(), (refused + "\n").c_str(), -1, nullptr))
        return false;
    }
    return true;
  }
  void heal() {
    for (int j = 0; j < static_cast<int>(peer_proxies_.size()); ++j)
      g_file_set_contents(cut_file(j).c_str(), "", -1, nullptr);
  }
  bool start() {
    for (int i = 0; i < members_; ++i)
      if (!start_member(i)) return false;
    return healthy(20);
  }
  bool start_member(int i) {
    processes_[i] = std::make_unique<Process>();
    const std::string client = endpoint(i);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_ports_[i]);
    std::string cluster;
    for (int j = 0; j < members_; ++j)
      cluster += (j ? "," : "") + name(j) + "=" + advertised_peer(j);
    std::vector<std::string> argv = {
        etcd_binary(), "--name", name(i), "--data-dir", dir_.file(("etcd-" + name(i)).c_str()),
        "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls",
        peer, "--initial-advertise-peer-urls", advertised_peer(i), "--initial-cluster", cluster,
        "--initial-cluster-state", "new", "--initial-cluster-token", "cudanms-test"};
    if (!tls_.ca.empty())
      argv.insert(argv.end(), {"--cert-file", tls_.certificate, "--key-file", tls_.key,
                               "--trusted-ca-file", tls_.ca, "--client-cert-auth"});
    return processes_[i]->spawn(argv,
        dir_.file(("etcd-" + name(i) + ".out").c_str()),
        dir_.file(("etcd-" + name(i) + ".err").c_str()));
  }
  // Its clients over HTTPS, each asked for a certificate `tls.ca` signed (before start()).
  void use_tls(const SiteCertificates &tls) { tls_ = tls; }
  void kill(int i) { processes_[i]->kill_group(); }
  void signal(int i, int number) { processes_[i]->signal(number); }
  // Whether a member answers with a leader, within `seconds`.
  bool healthy(double seconds) {
    service::EtcdClient client(endpoint_list(), 500);
    return eventually(seconds, [&] {
      const service::EtcdReply reply = client.post_sync("/v3/kv/range", "{\"key\":\"AA==\"}");
      return reply.ok();
    });
  }
  // The leader's index, -1 when none answers.
  int leader() {
    for (int i = 0; i < members_; ++i) {
      if (!processes_[i] || !processes_[i]->running()) continue;
      service::EtcdClient client({endpoint(i)}, 1000);
      const service::EtcdReply status = client.post_sync("/v3/maintenance/status", "{}");
      if (!status.ok()) continue;
      JsonObject *o = status.object();
      const std::string leader = json_object_get_string_member_with_default(o, "leader", "");
      const std::string me = json_object_get_string_member_with_default(
          json_object_get_object_member(o, "header"), "member_id", "");
      if (!leader.empty() && leader == me) return i;
    }
    return -1;
  }
  // Seconds until a running member says it leads; -1 when none does within `limit`.
  double seconds_to_leader(double limit) {
    const double start = now_s();
    return eventually(limit, [&] { return leader() >= 0; }) ? now_s() - start : -1;
  }
  std::string endpoint(int i) const {
    return (tls_.ca.empty() ? "http" : "https") + std::string("://127.0.0.1:") +
           std::to_string(client_ports_[i]);
  }
  std::vector<std::string> endpoint_list() const {
    std::vector<std::string> out;
    for (int i = 0; i < members_; ++i) out.push_back(endpoint(i));
    return out;
  }
  std::string endpoints() const {
    std::string out;
    for (int i = 0; i < members_; ++i) out += (i ? "," : "") + endpoint(i);
    return out;
  }
  int members() const { return members_; }
  // etcd's users on (auth enable), as an operator sets them up with etcdctl: root (the root
  // role) and `user`, who may read and write the keys under `prefix` alone. This process's own
  // requests log in as root from then on (`root_file` holds its password).
  bool enable_auth(const std::string &root_file, const std::string &user,
                   const std::string &password, const std::string &prefix) {
    service::EtcdClient client(endpoint_list(), 2000);
    gchar *root = nullptr;
    if (!g_file_get_contents(root_file.c_str(), &root, nullptr, nullptr)) return false;
    const std::string root_password = g_strstrip(root);
    g_free(root);
    auto b64 = [](const std::string &text) {
      gchar *out = g_base64_encode(reinterpret_cast<const guchar *>(text.data()), text.size());
      const std::string encoded = out;
      g_free(out);
      return encoded;
    };
    const std::pair<const char *, std::string> steps[] = {
        {"/v3/auth/user/add", "{\"name\":\"root\",\"password\":\"" + root_password + "\"}"},
        {"/v3/auth/role/add", "{\"name\":\"root\"}"},
        {"/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}"},
        {"/v3/auth/role/add", "{\"name\":\"site\"}"},
        {"/v3/auth/role/grant",
         "{\"name\":\"site\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"" + b64(prefix) +
             "\",\"range_end\":\"" + b64(service::etcd::prefix_end(prefix)) + "\"}}"},
        {"/v3/auth/user/add", "{\"name\":\"" + user + "\",\"password\":\"" + password + "\"}"},
        {"/v3/auth/user/grant", "{\"user\":\"" + user + "\",\"role\":\"site\"}"},
        {"/v3/auth/enable", "{}"}};
    for (const auto &[path, body] : steps) {
      const service::EtcdReply reply = client.post_sync(path, body);
      if (!reply.ok()) {
        ADD_FAILURE() << path << ": " << reply.error();
        return false;
      }
    }
    return service::use_etcd_login({"root", root_file}).empty();
  }

 private:
  static std::string name(int i) { return "m" + std::to_string(i); }
  std::string advertised_peer(int i) const {
    return "http://127.0.0.1:" + std::to_string(advertised_peer_ports_[i]);
  }
  std::string cut_file(int i) const { return dir_.file(("cut-" + name(i)).c_str()); }
  // name -> id in hex, as members send it to each other (X-Server-From).
  std::map<std::string, std::string> member_ids() const {
    std::map<std::string, std::string> out;
    service::EtcdClient client(endpoint_list(), 2000);
    const service::EtcdReply reply = client.post_sync("/v3/cluster/member/list", "{}");
    if (!reply.ok() || !json_object_has_member(reply.object(), "members")) return out;
    JsonArray *members = json_object_get_array_member(reply.object(), "members");
    for (guint k = 0; members && k < json_array_get_length(members); ++k) {
      JsonObject *member = json_array_get_object_element(members, k);
      const guint64 id = g_ascii_strtoull(
          json_object_get_string_member_with_default(member, "ID", "0"), nullptr, 10);
      gchar *hex = g_strdup_printf("%" G_GINT64_MODIFIER "x", id);
      out[json_object_get_string_member_with_default(member, "name", "")] = hex;
      g_free(hex);
    }
    return out;
  }
  const TempDir &dir_;
  const int members_;
  std::vector<int> client_ports_, peer_ports_, advertised_peer_ports_;
  std::vector<std::unique_ptr<Process>> processes_;
  std::vector<std::unique_ptr<Partition>> peer_proxies_;
  SiteCertificates tls_;
};

// pipelines/rtsp-server --cameras N --loop CLIP: cameras at BASE1 ... BASEN, each client
// counted (--clients-file).
class CameraServer {
 public:
  explicit CameraServer(const TempDir &dir) : dir_(dir) {}
  bool start(int cameras, const std::string &clip) {
    if (!process_.spawn(
            {script("rtsp-server"), "--port", "0", "--address", "127.0.0.1", "--loop", "--cameras",
             std::to_string(cameras), "--mount", "/cam", "--clients-file", clients_path(), clip},
            "", dir_.file("cameras.err"), true))
      return false;
    GDataInputStream *out =
        g_data_input_stream_new(g_subprocess_get_stdout_pipe(process_.subprocess()));
    gchar *line = g_data_input_stream_read_line(out, nullptr, nullptr, nullptr);
    g_object_unref(out);
    if (!line) return false;
    base_ = line;
    g_free(line);
    base_.pop_back();  // rtsp://127.0.0.1:PORT/cam1 -> .../cam
    return true;
  }
  std::string url(int camera) const { return base_ + std::to_string(camera); }
  std::string clients_path() const { return dir_.file("clients"); }
  // mount -> {clients now, the most at once}.
  std::map<std::string, std::pair<int, int>> clients() const {
    std::map<std::string, std::pair<int, int>> out;
    for (const std::string &line : lines_of(clients_path())) {
      char mount[64];
      int now = 0, most = 0;
      if (sscanf(line.c_str(), "%63s %d %d", mount, &now, &most) == 3) out[mount] = {now, most};
    }
    return out;
  }
  // The most clients any camera had at once.
  int most_clients() const {
    int most = 0;
    for (const auto &[mount, counts] : clients()) most = std::max(most, counts.second);
    return most;
  }

 private:
  const TempDir &dir_;
  Process process_;
  std::string base_;
};

// A fleet host: pipelines/service --config NAME.conf, its log, its endpoint.
class FleetHost {
 public:
  FleetHost(const TempDir &dir, std::string name) : dir_(dir), name_(std::move(name)) {}

  bool start(const std::string &config) {
    g_file_set_contents(config_path().c_str(), config.c_str(), -1, nullptr);
    g_remove(log_path().c_str());
    if (!process_.spawn({script("service"), "--config", config_path()},
                        dir_.file((name_ + ".out").c_str()), log_path()))
      return false;
    const bool listening = eventually(30, [&] { return !base().empty() || !process_.running(); });
    if (!listening || !process_.running()) ADD_FAILURE() << name_ << " did not start:\n" << log();
    return listening && process_.running();
  }
  void kill() { process_.kill_group(); }
  // SIGSTOP / SIGCONT to the process that holds the host's lease (its supervisor) alone.
  void stop_supervisor() { process_.signal(SIGSTOP); }
  void resume_supervisor() { process_.signal(SIGCONT); }
  void terminate() { process_.signal(SIGTERM); }
  int wait_exit(double seconds) { return process_.wait_exit(seconds); }
  bool running() const { return process_.running(); }

  const std::string &name() const { return name_; }
  std::string config_path() const { return dir_.file((name_ + ".conf").c_str()); }
  std::string log_path() const { return dir_.file((name_ + ".err").c_str()); }
  std::string log() const { return read_file(log_path()); }
  std::string base() const { return metrics_base_in(log()); }
  // GET of the endpoint: the body, "" when it does not answer.
  std::string get(const std::string &path, guint *status = nullptr) const {
    return request("GET", path, "", "", status);
  }
  // POST of a JSON body to the endpoint with a bearer key.
  std::string post(const std::string &path, const std::string &body, const std::string &key,
                   guint *status) const {
    return request("POST", path, body, key, status);
  }
  std::string request(const char *method, const std::string &path, const std::string &body,
                      const std::string &key, guint *status) const {
    if (base().empty()) return "";
    SoupSession *session = soup_session_new_with_options("timeout", 5, nullptr);
    SoupMessage *message = soup_message_new(method, (base() + path).c_str());
    if (!body.empty()) {
      GBytes *request = g_bytes_new(body.data(), body.size());
      soup_message_set_request_body_from_bytes(message, "application/json", request);
      g_bytes_unref(request);
    }
    if (!key.empty())
      soup_message_headers_replace(soup_message_get_request_headers(message), "Authorization",
                                   ("Bearer " + key).c_str());
    GBytes *answer = soup_session_send_and_read(session, message, nullptr, nullptr);
    std::string out;
    if (answer) {
      gsize size = 0;
      const char *data = static_cast<const char *>(g_bytes_get_data(answer, &size));
      out.assign(data, size);
      g_bytes_unref(answer);
    }
    if (status) *status = soup_message_get_status(message);
    g_object_unref(message);
    g_object_unref(session);
    return out;
  }
  // A sample of /metrics as the Prometheus client's parser reads it (scrape.py): `key` is
  // NAME,LABEL=VALUE,... with its labels but camera in order; NAN when absent.
  double metric(const std::string &key, const std::string &camera = "") const {
    const std::string script_path =
        std::string(g_getenv("CUDANMS_SOURCE_ROOT")) + "/tests/service/scrape.py";
    const std::string url = base() + "/metrics";
    const gchar *argv[] = {python(), script_path.c_str(), url.c_str(), nullptr};
    gchar *out = nullptr;
    gint status = 1;
    double value = NAN;
    if (g_spawn_sync(nullptr, const_cast<gchar **>(argv), nullptr, G_SPAWN_SEARCH_PATH, nullptr,
                     nullptr, &out, nullptr, &status, nullptr) &&
        status == 0) {
      JsonParser *parser = json_parser_new();
      if (json_parser_load_from_data(parser, out, -1, nullptr)) {
        JsonObject *metrics = json_object_get_object_member(
            json_node_get_object(json_parser_get_root(parser)), "metrics");
        if (metrics && json_object_has_member(metrics, key.c_str())) {
          JsonObject *by_camera = json_object_get_object_member(metrics, key.c_str());
          if (json_object_has_member(by_camera, camera.c_str()))
            value = json_object_get_double_member(by_camera, camera.c_str());
        }
      }
      g_object_unref(parser);
    } else {
      ADD_FAILURE() << "scrape.py " << url << " failed";
    }
    g_free(out);
    return value;
  }
  // /health's cameras and their states ("" for none: not answering).
  std::map<std::string, std::string> cameras(std::string *fleet_status = nullptr) const {
    std::map<std::string, std::string> out;
    const std::string text = get("/health");
    JsonParser *parser = json_parser_new();
    if (!text.empty() && json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) {
      JsonObject *root = json_node_get_object(json_parser_get_root(parser));
      JsonObject *cameras = json_object_get_object_member(root, "cameras");
      GList *names = cameras ? json_object_get_members(cameras) : nullptr;
      for (GList *n = names; n; n = n->next) {
        const char *name = static_cast<const char *>(n->data);
        out[name] =
            json_object_get_string_member(json_object_get_object_member(cameras, name), "state");
      }
      g_list_free(names);
      if (fleet_status && json_object_has_member(root, "fleet"))
        *fleet_status =
            json_object_get_string_member(json_object_get_object_member(root, "fleet"), "status");
    }
    g_object_unref(parser);
    return out;
  }
  // The cameras it runs that stream.
  std::set<std::string> streaming() const {
    std::set<std::string> out;
    for (const auto &[camera, state] : cameras())
      if (state == "streaming") out.insert(camera);
    return out;
  }
  std::string json_path(const std::string &camera) const {
    return dir_.file((name_ + "-" + camera + ".jsonl").c_str());
  }

 private:
  const TempDir &dir_;
  const std::string name_;
  Process process_;
};

// What a camera's JSON lines say, over every host that ran it.
struct CameraRecord {
  size_t frames = 0;
  gint64 last_in = -1, last_out = -1;  // the line "middle"'s counts in the last frame
  guint64 max_track_id = 0, max_event_id = 0;
  std::vector<guint64> event_ids;
  std::vector<std::string> states;  // "state: reason" of each state line
};

inline CameraRecord read_camera(const std::string &path) {
  CameraRecord record;
  for (const std::string &line : lines_of(path)) {
    JsonParser *parser = json_parser_new();
    if (!json_parser_load_from_data(parser, line.c_str(), -1, nullptr)) {
      g_object_unref(parser);
      continue;  // the last line of a killed host may be cut short
    }
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    if (json_object_has_member(o, "state")) {
      record.states.push_back(std::string(json_object_get_string_member(o, "state")) + ": " +
                              json_object_get_string_member(o, "reason"));
    } else if (json_object_has_member(o, "boxes")) {
      record.frames++;
      JsonArray *boxes = json_object_get_array_member(o, "boxes");
      for (guint i = 0; i < json_array_get_length(boxes); ++i) {
        JsonObject *box = json_array_get_object_element(boxes, i);
        if (json_object_has_member(box, "track_id"))
          record.max_track_id =
              std::max<guint64>(record.max_track_id, json_object_get_int_member(box, "track_id"));
      }
      if (json_object_has_member(o, "events")) {
        JsonArray *events = json_object_get_array_member(o, "events");
        for (guint i = 0; i < json_array_get_length(events); ++i) {
          const guint64 id =
              json_object_get_int_member(json_array_get_object_element(events, i), "id");
          record.event_ids.push_back(id);
          record.max_event_id = std::max(record.max_event_id, id);
        }
      }
      if (json_object_has_member(o, "counts")) {
        JsonObject *lines =
            json_object_get_object_member(json_object_get_object_member(o, "counts"), "lines");
        if (lines && json_object_has_member(lines, "middle")) {
          JsonObject *middle = json_object_get_object_member(lines, "middle");
          record.last_in = json_object_get_int_member(middle, "in");
          record.last_out = json_object_get_int_member(middle, "out");
        }
      }
    }
    g_object_unref(parser);
  }
  return record;
}

constexpr double kTtl = 5;               // fleet-ttl: the default
constexpr double kReconnectInitial = 1;  // the back-off's first wait
// A dead host's camera streams again on another within this (the bound).
constexpr double kTakeover = kTtl + kReconnectInitial + 2;
// A host fences 0.7 TTL after its last renewal, sent every TTL/10 (service/fleet/fleet_agent.cpp): an
// etcd election shorter than this stops no camera (a renewal's round trip spared).
constexpr double kElectionWithinFence = 0.7 * kTtl - kTtl / 10 - 0.5;
// etcd's --election-timeout (its default): a leader cut off from its quorum answers renewals until
// it steps down, up to two of these after the cut (raft's check of the quorum runs once each).
constexpr double kEtcdElectionTimeout = 1;

// A site of the test's own: etcd, a camera server of the ball clip, cameras imported, hosts.
class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    if (etcd_binary().empty()) GTEST_SKIP() << "no etcd: install the Debian package etcd-server";
    ASSERT_TRUE(make_ball_clip(clip())) << "cannot make the cameras' clip";
  }
  std::string clip() const { return dir_.file("ball.mp4"); }

  // The site's cameras cam1 ... camN, as a file to import: each counts the ball crossing the
  // middle of its frame.
  std::string cameras_file(int n, const CameraServer &server, int first = 1) {
    std::string text =
        "[service]\ndetector = brightspot\nlines = middle:0.5,0,0.5,1\nnormalized = true\n";
    for (int i = first; i < first + n; ++i)
      text += "\n[camera.cam" + std::to_string(i) + "]\nurl = " + server.url(i) + "\n";
    const std::string path = dir_.file("site.conf");
    g_file_set_contents(path.c_str(), text.c_str(), -1, nullptr);
    return path;
  }

  // The site: `etcd` and `server` (`served` cameras) started, cam1 ... cam`imported` in etcd.
  void start_site(EtcdCluster *etcd, CameraServer *server, int served, int imported) {
    ASSERT_TRUE(etcd->start()) << read_file(dir_.file("etcd-m0.err"));
    ASSERT_TRUE(server->start(served, clip()));
    ASSERT_EQ(fleet({"--fleet", etcd->endpoints(), "--site", "test", "import",
                     cameras_file(imported, *server)}),
              0)
        << read_file(dir_.file("fleet.err"));
  }

  // The cameras of `host` (as `placement` has them), and then, after `since`, the seconds until
  // each said in its JSON lines that its host fenced it, within the lease's TTL + 2 s; false
  // when one did not.
  static std::vector<std::string> cameras_on(const std::vector<FleetHost *> &hosts,
                                             const std::string &host) {
    std::vector<std::string> out;
    for (const auto &[camera, runs_on] : placement(hosts))
      if (runs_on == host) out.push_back(camera);
    return out;
  }
  static bool fenced_within_ttl(const FleetHost &host, const std::vector<std::string> &cameras,
                                double since, std::map<std::string, double> *fenced) {
    return eventually(kTtl + 2, [&] {
      for (const std::string &camera : cameras)
        for (const std::string &state : read_camera(host.json_path(camera)).states)
          if (!fenced->count(camera) && state.rfind("stopped: fenced", 0) == 0)
            (*fenced)[camera] = now_s() - since;
      return fenced->size() == cameras.size();
    });
  }

  // After a network cut at `cut` that left `alone` without etcd's majority: every camera of
  // `cut_off` stopped by `alone` (fenced) within `fence_bound` seconds, all `cameras` streaming on
  // `others` within the takeover bound, `alone` streaming none and "degraded", and no camera
  // ever with two clients.
  static void expect_cut_off(const FleetHost &alone, const std::vector<std::string> &cut_off,
                             double cut, double fence_bound, const std::vector<FleetHost *> &others,
                             size_t cameras, const CameraServer &server) {
    std::map<std::string, double> fenced;
    ASSERT_TRUE(fenced_within_ttl(alone, cut_off, cut, &fenced)) << alone.log();
    for (const auto &[camera, seconds] : fenced) {
      printf("%s: stopped by the cut-off host %.1f s after the cut\n", camera.c_str(), seconds);
      EXPECT_LT(seconds, fence_bound) << camera;
    }
    ASSERT_TRUE(eventually(kTakeover + 2, [&] { return placement(others).size() == cameras; }))
        << logs(others) << alone.log();
    printf("all %zu cameras on the other hosts %.1f s after the cut\n", cameras, now_s() - cut);
    EXPECT_TRUE(alone.streaming().empty());
    std::string status;
    alone.cameras(&status);
    EXPECT_EQ(status.rfind("degraded", 0), 0u) << status;
    EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
  }
  // The cut healed at `healed`: every host streams `each` cameras again within 30 s, never a
  // camera with two clients; then each host ends cleanly.
  static void expect_rejoined_and_end(const std::vector<FleetHost *> &hosts, int each,
                                      double healed, const CameraServer &server) {
    ASSERT_TRUE(eventually(30, [&] { return balanced(hosts, each); })) << logs(hosts);
    printf("balanced again %.1f s after the cut healed\n", now_s() - healed);
    EXPECT_EQ(server.most_clients(), 1) << read_file(server.clients_path());
    for (FleetHost *host : hosts) host->terminate();
    for (FleetHost *host : hosts) EXPECT_EQ(host->wait_exit(15), 0) << host->log();
  }

  // Whether each host streams `each` cameras.
  static bool balanced(const std::vector<FleetHost *> &hosts, int each) {
    std::map<std::string, int> per_host;
    for (const auto &[camera, host] : placement(hosts)) per_host[host]++;
    for (FleetHost *host : hosts)
      if (per_host[host->name()] != each) return false;
    return true;
  }

  std::string host_config(const std::string &name, const std::string &endpoints,
                          const std::map<std::string, std::string> &more = {}) {
    std::map<std::string, std::string> keys = {{"fleet", endpoints},
                                               {"site", "test"},
                                               {"host-id", name},
                                               {"gpus", "none"},
                                               {"capacity", "6"},
                                               {"metrics-address", "127.0.0.1:0"},
                                               {"json", dir_.path + "/" + name + "-{camera}.jsonl"},
                                               {"reconnect-initial", "1"},
                                               {"reconnect-max", "4"},
                                               {"stall-timeout", "3"}};
    for (const auto &[key, value] : more) keys[key] = value;
    std::string text = "[service]\n";
    for (const auto &[key, value] : keys) text += key + " = " + value + "\n";
    return text;
  }

  // `fleet import` of cam1 ... cam`n` through a host's config (its TLS, its login): its exit
  // status.
  int import_as_host(const std::string &endpoints, const std::map<std::string, std::string> &keys,
                     int n, const CameraServer &server) {
    const std::string importer = dir_.file("importer.conf");
    const std::string text = host_config("importer", endpoints, keys);
    g_file_set_contents(importer.c_str(), text.c_str(), -1, nullptr);
    return fleet({"--config", importer, "--site", "test", "import", cameras_file(n, server)});
  }

  // The revision of the newest camera counts the site's state keys hold (0: none yet).
  static gint64 newest_counts(const EtcdCluster &etcd) {
    service::EtcdClient client(etcd.endpoint_list(), 2000);
    const auto reply = client.post_sync(
        "/v3/kv/txn", service::etcd::txn({}, {service::etcd::range("/cudanms/test/state/", true)}));
    gint64 newest = 0;
    for (const auto &kv : reply.kvs(0)) newest = std::max(newest, kv.mod_revision);
    return newest;
  }

  // pipelines/service fleet ARGS...: its exit status; its output in *out.
  int fleet(const std::vector<std::string> &args, std::string *out = nullptr) {
    std::vector<std::string> argv = {script("service"), "fleet"};
    argv.insert(argv.end(), args.begin(), args.end());
    GSubprocess *p = spawn(argv, dir_.file("fleet.out"), dir_.file("fleet.err"));
    const int status = wait_exit(p, 30);
    g_object_unref(p);
    if (out) *out = read_file(dir_.file("fleet.out")) + read_file(dir_.file("fleet.err"));
    return status;
  }

  // camera -> the host it streams on. The hosts answer one after another, so a camera that
  // moves meanwhile may be seen on two (ci17, under ASan): it is on the one that answered last.
  // Whether two hosts ever ran a camera at once is the camera server's to say (most_clients).
  static std::map<std::string, std::string> placement(const std::vector<FleetHost *> &hosts) {
    std::map<std::string, std::string> out;
    for (FleetHost *host : hosts) {
      if (!host->running()) continue;
      for (const std::string &camera : host->streaming()) {
        if (out.count(camera))
          printf("%s seen streaming on %s, then on %s\n", camera.c_str(), out[camera].c_str(),
                 host->name().c_str());
        out[camera] = host->name();
      }
    }
    return out;
  }

  // Frames of each camera so far, over every host's JSON lines.
  static std::map<std::string, size_t> frames(const std::vector<FleetHost *> &hosts,
                                              const std::vector<std::string> &cameras) {
    std::map<std::string, size_t> out;
    for (const std::string &camera : cameras)
      for (FleetHost *host : hosts) out[camera] += read_camera(host->json_path(camera)).frames;
    return out;
  }
  static std::map<std::string, double> rates(const std::vector<FleetHost *> &hosts,
                                             const std::vector<std::string> &cameras,
                                             double seconds) {
    const auto before = frames(hosts, cameras);
    const double start = now_s();
    g_usleep(static_cast<gulong>(seconds * 1e6));
    const auto after = frames(hosts, cameras);
    std::map<std::string, double> out;
    for (const std::string &camera : cameras)
      out[camera] = (after.at(camera) - before.at(camera)) / (now_s() - start);
    return out;
  }
  static std::vector<std::string> names(int n, int first = 1) {
    std::vector<std::string> out;
    for (int i = first; i < first + n; ++i) out.push_back("cam" + std::to_string(i));
    return out;
  }
  static std::string logs(const std::vector<FleetHost *> &hosts) {
    std::string out;
    for (FleetHost *host : hosts) out += "---- " + host->name() + "\n" + host->log();
    return out;
  }

  TempDir dir_;
};

}  // namespace cudanms::testing
