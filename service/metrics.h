// The service's HTTP endpoint (libsoup 3's SoupServer, on the main loop): /metrics in the
// Prometheus text exposition format, /health as JSON (200 when every enabled camera streams,
// 503 otherwise). The rendering is separate from the server, so that tests read it as is.
#pragma once

#include <libsoup/soup.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "camera.h"
#include "gpu_memory.h"

namespace cudanms::service {

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
};

// Every metric, with its HELP and TYPE lines.
std::string render_metrics(const std::vector<CameraSnapshot> &cameras,
                           const ProcessSnapshot &process);
// The health document; `*status` 200 or 503.
std::string render_health(const std::vector<CameraSnapshot> &cameras, double uptime_s, int *status);

class MetricsServer {
 public:
  using Cameras = std::function<std::vector<CameraSnapshot>()>;
  using Gpus = std::function<std::map<unsigned, bool>()>;  // ProcessSnapshot::placement_gpus
  MetricsServer(Cameras cameras, Gpus gpus);
  ~MetricsServer();
  MetricsServer(const MetricsServer &) = delete;
  MetricsServer &operator=(const MetricsServer &) = delete;

  // Listens on HOST:PORT (port 0: a free one); false with the reason.
  bool listen(const std::string &address, std::string *error);
  // http://HOST:PORT where it listens, "" when it does not.
  const std::string &url() const { return url_; }

 private:
  static void handle(SoupServer *server, SoupServerMessage *message, const char *path,
                     GHashTable *query, gpointer data);

  Cameras cameras_;
  Gpus gpus_;
  SoupServer *server_ = nullptr;
  std::string url_;
  gint64 started_us_;
};

}  // namespace cudanms::service
