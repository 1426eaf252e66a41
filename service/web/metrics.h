// The service's HTTP endpoint (libsoup 3's SoupServer, on the main loop): /metrics in the
// Prometheus text exposition format, /health as JSON (200 when every enabled camera streams,
// 503 otherwise). The rendering is separate from the server, so that tests read it as is, and
// so that a supervisor serves its workers' answers merged (worker_merge.h).
#pragma once

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "camera.h"
#include "event_history.h"
#include "gpu_memory.h"

namespace cudanms::service {

// A value escaped for a double-quoted string: a label of the exposition format, a JSON string.
std::string escape_quoted(const std::string &value);

struct ProcessSnapshot {
  double uptime_s = 0;
  std::uint64_t resident_bytes = 0;
  // What a leak per reconnection shows in: the heap in use (malloc's, or the sanitizer's
  // allocator's under AddressSanitizer), the threads and the open file descriptors.
  std::uint64_t heap_bytes = 0;
  long threads = 0;
  long open_fds = 0;
  std::vector<GpuMemory> gpus;
  std::map<unsigned, bool> placement_gpus;  // the GPUs cameras may run on: failed or not
  std::optional<HistoryStats> history;       // where this process keeps the events' history
};

// Every metric, with its HELP and TYPE lines.
std::string render_metrics(const std::vector<CameraSnapshot> &cameras,
                           const ProcessSnapshot &process);
// The health document; `*status` 200 or 503.
std::string render_health(const std::vector<CameraSnapshot> &cameras, double uptime_s, int *status);
// `builder`'s document as text, a newline after it; unrefs the builder.
std::string json_text(JsonBuilder *builder);
// A member of the object being built.
void add_string(JsonBuilder *b, const char *name, const std::string &value);
void add_int(JsonBuilder *b, const char *name, gint64 value);
// A counting event's members, as the page's recent events and the history's API give them.
template <typename Event>
void add_event(JsonBuilder *b, const Event &e) {
  add_int(b, "id", static_cast<gint64>(e.id));
  json_builder_set_member_name(b, "time");
  json_builder_add_double_value(b, e.time_us / 1e6);
  add_string(b, "kind", e.kind);
  add_string(b, "name", e.name);
  add_string(b, "direction", e.direction);
  add_string(b, "label", e.label);
  add_int(b, "track", static_cast<gint64>(e.track_id));
}
// The health document's frame, the same for a host and for its workers' merge:
// {"uptime_seconds": N, "cameras": {one member a camera}, ..., "status": "ok" or "degraded"}.
// begin_health leaves "cameras" open; end_health follows the members after it, unrefs the
// builder and sets `*status` (200 or 503).
JsonBuilder *begin_health(double uptime_s);
std::string end_health(JsonBuilder *builder, bool ok, int *status);
// This process's figures now; `placement_gpus` as ProcessSnapshot's.
ProcessSnapshot process_snapshot(double uptime_s, std::map<unsigned, bool> placement_gpus);

// What the endpoint answers a GET.
struct Reply {
  int status = 200;
  std::string type;  // the Content-Type
  std::string body;
  // Or a file's bytes (an event's clip): of a single Range only that part is read and answered
  // (206), so that a browser seeking in a long clip does not make the host read it whole.
  std::string file = {};
};
constexpr const char *kMetricsType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char *kHealthType = "application/json";

// The endpoint: the page's files (web.h) it serves itself; /api/stream, /api/cameras each
// second to every page open; any other GET goes to the handler.
// The page's and the API's certificate and private key (PEM files): HTTPS; none: plain HTTP.
struct WebTls {
  std::string certificate, key;
  bool on() const { return !certificate.empty(); }
  bool operator==(const WebTls &o) const { return certificate == o.certificate && key == o.key; }
  bool operator!=(const WebTls &o) const { return !(*this == o); }
};

// The host's, from its config.
inline WebTls web_tls(const ServiceConfig &config) {
  return {config.tls_certificate, config.tls_key};
}

// Whether `authorization` is "Bearer SECRET", compared in constant time (a key's bytes are not
// told by how long a wrong guess takes).
bool bearer_matches(const std::string &authorization, const std::string &secret);

class MetricsServer {
 public:
  using Respond = std::function<void(Reply)>;
  // The host that answers what the server does not serve itself, each through `respond`, once:
  // at once, or later from the main loop (a supervisor asks its workers first).
  class Owner {
   public:
    // A GET of `path` (/metrics, /health, /api/cameras, /snapshot/NAME; 404 for another).
    virtual void serve(const std::string &path, Respond respond) = 0;
    // A POST of `path` (/api/cameras/NAME/shapes, config_edit.h) with its body and Authorization
    // header.
    virtual void change(const std::string &path, const std::string &body,
                        const std::string &authorization, Respond respond) = 0;

   protected:
    ~Owner() = default;
  };
  explicit MetricsServer(Owner *owner) : owner_(owner) {}
  ~MetricsServer();
  MetricsServer(const MetricsServer &) = delete;
  MetricsServer &operator=(const MetricsServer &) = delete;

  // Listens on HOST:PORT (port 0: a free one), over HTTPS with `tls`, or on a Unix socket,
  // unix:PATH; false with the reason.
  bool listen(const std::string &address, std::string *error, const WebTls &tls = {});
  // A reload's new address or certificate: listens there, and logs where, or why not.
  void listen_again(const std::string &address, const WebTls &tls = {});
  // http(s)://HOST:PORT or unix:PATH where it listens, "" when it does not.
  const std::string &url() const { return url_; }
  // The site's host credential (host-credential-file): what asks for /api/host/... (what the
  // other hosts of a fleet ask) without it as a bearer key gets 401; "": anyone may.
  void set_host_credential(std::string secret) { host_credential_ = std::move(secret); }

 private:
  static void handle(SoupServer *server, SoupServerMessage *message, const char *path,
                     GHashTable *query, gpointer data);
  void close();
  // /api/stream: Server-Sent Events, one "cameras" event a second while a page listens.
  void open_stream(SoupServerMessage *message);
  void send_to_streams(const std::string &event);
  static void on_stream_finished(SoupServerMessage *message, gpointer data);

  Owner *const owner_;
  std::vector<SoupServerMessage *> streams_;  // held until finished
  guint stream_timer_ = 0;
  bool stream_asked_ = false;  // a document for the streams is on its way
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for answers that come late
  SoupServer *server_ = nullptr;
  std::string url_;
  std::string socket_path_;  // unix:PATH's, removed when closed
  std::string host_credential_;
};

}  // namespace cudanms::service
