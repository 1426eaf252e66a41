#include "metrics.h"

#include <json-glib/json-glib.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "web.h"

// AddressSanitizer's allocator, when the service is built with it (tools/sanitize.sh): malloc's
// own statistics then see nothing.
extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace cudanms::service {
namespace {

// A camera's count as a metric's value.
template <auto FrameCounts::*field>
double counted(const CameraSnapshot &c) {
  return static_cast<double>(c.counts.*field);
}
// 1 while the camera says why something cannot be written, else 0.
template <std::string FrameCounts::*why>
double failing(const CameraSnapshot &c) {
  return (c.counts.*why).empty() ? 0.0 : 1.0;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

// Writes metric families: HELP and TYPE once, then a sample per camera.
class Exposition {
 public:
  void family(const char *name, const char *type, const char *help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void sample(const std::string &name, const std::string &labels, double value) {
    out_ << name;
    if (!labels.empty()) out_ << "{" << labels << "}";
    out_ << " ";
    if (std::isnan(value)) {
      out_ << "NaN";
    } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
      out_ << static_cast<long long>(value);
    } else {
      char text[32];
      g_ascii_formatd(text, sizeof text, "%.9g", value);
      out_ << text;
    }
    out_ << "\n";
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string camera_label(const CameraSnapshot &c) {
  return "camera=\"" + escape_quoted(c.name) + "\"";
}

std::uint64_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE *f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// Bytes malloc has handed out and not had back.
std::uint64_t heap_bytes() {
  if (__sanitizer_get_current_allocated_bytes) return __sanitizer_get_current_allocated_bytes();
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// Entries of a /proc/self directory: the process's threads (task) or file descriptors (fd).
long entries_of(const char *dir) {
  GDir *d = g_dir_open(dir, 0, nullptr);
  if (!d) return 0;
  long n = 0;
  while (g_dir_read_name(d)) ++n;
  g_dir_close(d);
  return n - (strcmp(dir, "/proc/self/fd") == 0);  // the directory's own descriptor
}

}  // namespace

std::string escape_quoted(const std::string &value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

namespace {

// Per camera: its state, rates, latencies and traffic.
void camera_families(Exposition &e, const std::vector<CameraSnapshot> &cameras) {
  // Per camera: one family a quantity, one sample a camera.
  struct Counter {
    const char *name, *type, *help;
    double (*value)(const CameraSnapshot &);
  };
  const Counter per_camera[] = {
      {"cudanms_camera_up", "gauge", "1 while the camera streams, else 0",
       [](const CameraSnapshot &c) { return c.state == CameraState::kStreaming ? 1.0 : 0.0; }},
      {"cudanms_camera_frames_total", "counter", "Frames that went through NMS",
       counted<&FrameCounts::frames>},
      {"cudanms_camera_frames_per_second", "gauge", "Frames per second over the last 5 s",
       [](const CameraSnapshot &c) { return c.frames_per_second; }},
      {"cudanms_camera_last_frame_age_seconds", "gauge",
       "Seconds since the camera's last frame (since its start when none came)",
       [](const CameraSnapshot &c) { return c.seconds_since_frame; }},
      {"cudanms_camera_state_seconds", "gauge", "Seconds the camera has been in its state",
       [](const CameraSnapshot &c) { return c.state_seconds; }},
      {"cudanms_camera_reconnects_total", "counter", "Connections made again after a failure",
       [](const CameraSnapshot &c) { return double(c.reconnects); }},
      {"cudanms_camera_queued_bytes", "gauge",
       "Bytes of frames waiting in the camera's queues (host or GPU memory)",
       [](const CameraSnapshot &c) { return double(c.queued_bytes); }},
      {"cudanms_camera_candidates_total", "counter", "Candidate boxes given to NMS",
       counted<&FrameCounts::candidates>},
      {"cudanms_camera_kept_boxes_total", "counter", "Boxes NMS kept",
       counted<&FrameCounts::kept>},
      {"cudanms_camera_messages_published_total", "counter",
       "MQTT messages published (QoS 1: acknowledged by the broker)",
       counted<&FrameCounts::published>},
      {"cudanms_camera_messages_dropped_total", "counter",
       "MQTT messages dropped: the queue overflowed while the broker was away, or at a stop",
       counted<&FrameCounts::dropped>},
      {"cudanms_camera_chain_seconds_total", "counter",
       "Wall time of the detector, cudanms and the tracker and counter, from the intake queue "
       "to the last of them",
       counted<&FrameCounts::chain_sum_s>},
      {"cudanms_camera_json_lines_lost_total", "counter",
       "JSON lines that could not be written (disk full, ...)",
       counted<&FrameCounts::lines_lost>},
      {"cudanms_camera_outputs_queued", "gauge",
       "Frames whose counts are not kept yet (the counts file, etcd), their lines and messages "
       "waiting behind them",
       counted<&FrameCounts::outputs_queued>},
      {"cudanms_camera_outputs_full_waits_total", "counter",
       "Frames that waited for their counts' keeping: as many frames were waiting already",
       counted<&FrameCounts::outputs_full_waits>},
      {"cudanms_camera_pictures_failing", "gauge",
       "1 while its events' pictures cannot be written (snapshots: a full disk, ...), else 0",
       failing<&FrameCounts::pictures_failing>},
      {"cudanms_camera_clips_failing", "gauge",
       "1 while its events' clips cannot be written (clips: a full disk, ...), else 0",
       failing<&FrameCounts::clips_failing>},
      {"cudanms_camera_frames_unpublished_total", "counter",
       "A fleet's frames not published: the camera stopped (fenced) before etcd had their counts",
       counted<&FrameCounts::outputs_unkept>},
  };
  for (const Counter &m : per_camera) {
    e.family(m.name, m.type, m.help);
    for (const CameraSnapshot &c : cameras) e.sample(m.name, camera_label(c), m.value(c));
  }
}

// Per camera: its state, one sample a state, and its NMS latency's summary.
void camera_state_families(Exposition &e, const std::vector<CameraSnapshot> &cameras) {
  e.family("cudanms_camera_state", "gauge",
           "1 for the camera's state (starting, streaming, reconnecting, stopped, failed), 0 for "
           "the others");
  for (const CameraSnapshot &c : cameras)
    for (CameraState s : kAllStates)
      e.sample("cudanms_camera_state", camera_label(c) + ",state=\"" + state_name(s) + "\"",
               c.state == s ? 1 : 0);
  e.family("cudanms_camera_nms_latency_seconds", "summary",
           "Wall time of NMS per frame: p50 and p99 of the last 1024 frames; sum and count of all");
  for (const CameraSnapshot &c : cameras) {
    for (double q : {0.5, 0.99}) {
      gchar text[8];
      g_ascii_formatd(text, sizeof text, "%g", q);
      e.sample("cudanms_camera_nms_latency_seconds", camera_label(c) + ",quantile=\"" + text + "\"",
               quantile(c.counts.recent_nms_us, q) / 1e6);
    }
    e.sample("cudanms_camera_nms_latency_seconds_sum", camera_label(c), c.counts.nms_sum_s);
    e.sample("cudanms_camera_nms_latency_seconds_count", camera_label(c), double(c.counts.frames));
  }
}

// A camera's labels and a zone's, for a count by (zone, label).
std::string zone_and_label(const CameraSnapshot &c,
                           const std::pair<std::string, std::string> &key) {
  return camera_label(c) + ",zone=\"" + escape_quoted(key.first) + "\",label=\"" +
         escape_quoted(key.second) + "\"";
}

// Per camera: what boxcount counted, kept across its reconnections.
void counting_families(Exposition &e, const std::vector<CameraSnapshot> &cameras) {
  e.family("cudanms_line_crossings_total", "counter",
           "Tracks that crossed a counting line (boxcount), by line, direction (in, out) and "
           "label; kept across the camera's reconnections");
  for (const CameraSnapshot &c : cameras)
    for (const auto &[key, n] : c.counting.crossings)
      e.sample("cudanms_line_crossings_total",
               camera_label(c) + ",line=\"" + escape_quoted(std::get<0>(key)) + "\",direction=\"" +
                   std::get<1>(key) + "\",label=\"" + escape_quoted(std::get<2>(key)) + "\"",
               double(n));
  e.family("cudanms_zone_objects", "gauge", "Tracks in a zone now (boxcount), by zone and label");
  for (const CameraSnapshot &c : cameras)
    for (const auto &[key, n] : c.counting.occupancy)
      e.sample("cudanms_zone_objects", zone_and_label(c, key), double(n));

  e.family("cudanms_zone_loitering", "gauge",
           "Tracks in a zone now that stayed its loitering-time (boxcount), by zone");
  for (const CameraSnapshot &c : cameras)
    for (const auto &[zone, n] : c.counting.loitering)
      e.sample("cudanms_zone_loitering", camera_label(c) + ",zone=\"" + escape_quoted(zone) + "\"",
               double(n));
  e.family("cudanms_zone_loitering_total", "counter",
           "Tracks that stayed a zone's loitering-time (boxcount's zone-loitering events), by "
           "zone and label");
  for (const CameraSnapshot &c : cameras)
    for (const auto &[key, n] : c.counting.loitered)
      e.sample("cudanms_zone_loitering_total", zone_and_label(c, key), double(n));
}

// Each camera's GPU and load, and per GPU of the placement its cameras' sums.
void gpu_families(Exposition &e, const std::vector<CameraSnapshot> &cameras,
                  const ProcessSnapshot &process) {
  e.family("cudanms_camera_gpu", "gauge", "The GPU the camera is placed on (-1: the CPU)");
  for (const CameraSnapshot &c : cameras) e.sample("cudanms_camera_gpu", camera_label(c), c.gpu);
  e.family("cudanms_camera_load", "gauge",
           "Seconds of the detector's and cudanms's work per second (last 5 s): what the camera "
           "costs its GPU");
  for (const CameraSnapshot &c : cameras) e.sample("cudanms_camera_load", camera_label(c), c.load);

  // Per GPU of the placement: its cameras' sums, and whether it failed.
  struct GpuFigures {
    double cameras = 0, fps = 0, load = 0, failed = 0, nms_s = 0, chain_s = 0;
  };
  std::map<unsigned, GpuFigures> per_gpu;
  for (const auto &[gpu, failed] : process.placement_gpus) per_gpu[gpu].failed = failed;
  for (const CameraSnapshot &c : cameras) {
    if (c.gpu < 0) continue;
    GpuFigures &g = per_gpu[static_cast<unsigned>(c.gpu)];
    g.cameras++;
    g.fps += c.frames_per_second;
    g.load += c.load;
    g.nms_s += c.counts.nms_sum_s;
    g.chain_s += c.counts.chain_sum_s;
  }
  const struct {
    const char *name, *type, *help;
    double GpuFigures::*value;
  } per_gpu_families[] = {
      {"cudanms_gpu_cameras", "gauge", "Cameras placed on the GPU", &GpuFigures::cameras},
      {"cudanms_gpu_frames_per_second", "gauge",
       "Frames per second of the GPU's cameras (last 5 s)", &GpuFigures::fps},
      {"cudanms_gpu_load", "gauge",
       "Seconds of detector and cudanms work per second on the GPU (last 5 s)", &GpuFigures::load},
      {"cudanms_gpu_nms_seconds_total", "counter",
       "Wall time of NMS of the GPU's cameras (their connections since they were placed there)",
       &GpuFigures::nms_s},
      {"cudanms_gpu_chain_seconds_total", "counter",
       "Wall time of the detector and cudanms of the GPU's cameras", &GpuFigures::chain_s},
      {"cudanms_gpu_failed", "gauge", "1 when a CUDA failure took the GPU out of the placement",
       &GpuFigures::failed},
  };
  for (const auto &f : per_gpu_families) {
    e.family(f.name, f.type, f.help);
    for (const auto &[gpu, figures] : per_gpu)
      e.sample(f.name, "gpu=\"" + std::to_string(gpu) + "\"", figures.*(f.value));
  }
}

// The process: uptime, memory, threads, descriptors, the GPUs' memory.
void process_families(Exposition &e, const ProcessSnapshot &process) {
  e.family("cudanms_uptime_seconds", "gauge", "Seconds since the service started");
  e.sample("cudanms_uptime_seconds", "", process.uptime_s);
  e.family("process_resident_memory_bytes", "gauge", "Resident memory of the service");
  e.sample("process_resident_memory_bytes", "", double(process.resident_bytes));
  e.family("cudanms_process_heap_bytes", "gauge", "Heap memory the service has allocated");
  e.sample("cudanms_process_heap_bytes", "", double(process.heap_bytes));
  e.family("cudanms_process_threads", "gauge", "Threads of the service");
  e.sample("cudanms_process_threads", "", double(process.threads));
  e.family("process_open_fds", "gauge", "Open file descriptors of the service");
  e.sample("process_open_fds", "", double(process.open_fds));
  if (const std::optional<HistoryStats> &h = process.history) {
    const struct {
      const char *name, *type, *help;
      guint64 value;
    } history[] = {
        {"cudanms_history_events_written_total", "counter",
         "Events written into the history (an event delivered again counts again)", h->written},
        {"cudanms_history_events_queued", "gauge",
         "Events waiting for the history's database (slow, locked or failing)", h->queued},
        {"cudanms_history_events_dropped_total", "counter",
         "Events lost past the history's queue bound", h->dropped},
        {"cudanms_history_write_failures_total", "counter",
         "Batches the history's database refused (each tried again)", h->failures},
    };
    for (const auto &f : history) {
      e.family(f.name, f.type, f.help);
      e.sample(f.name, "", double(f.value));
    }
  }
  if (!process.gpus.empty()) {
    e.family("cudanms_gpu_memory_used_bytes", "gauge",
             "GPU memory in use on the device, by every process (nvidia-smi's)");
    for (const GpuMemory &g : process.gpus)
      e.sample("cudanms_gpu_memory_used_bytes", "gpu=\"" + std::to_string(g.index) + "\"",
               double(g.used));
    e.family("cudanms_process_gpu_memory_bytes", "gauge",
             "GPU memory the service holds on the device (where NVML lists the process)");
    for (const GpuMemory &g : process.gpus)
      if (g.process_known)
        e.sample("cudanms_process_gpu_memory_bytes", "gpu=\"" + std::to_string(g.index) + "\"",
                 double(g.process));
  }
}

}  // namespace

std::string render_metrics(const std::vector<CameraSnapshot> &cameras,
                           const ProcessSnapshot &process) {
  Exposition e;
  camera_families(e, cameras);
  camera_state_families(e, cameras);
  counting_families(e, cameras);
  gpu_families(e, cameras, process);
  process_families(e, process);
  return e.text();
}

std::string render_health(const std::vector<CameraSnapshot> &cameras, double uptime_s,
                          int *status) {
  bool all_streaming = true;
  JsonBuilder *b = begin_health(uptime_s);
  for (const CameraSnapshot &c : cameras) {
    if (c.enabled && c.state != CameraState::kStreaming) all_streaming = false;
    json_builder_set_member_name(b, c.name.c_str());
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, state_name(c.state));
    json_builder_set_member_name(b, "enabled");
    json_builder_add_boolean_value(b, c.enabled);
    json_builder_set_member_name(b, "state_seconds");
    json_builder_add_int_value(b, static_cast<gint64>(c.state_seconds));
    json_builder_set_member_name(b, "last_error");
    json_builder_add_string_value(b, without_credentials(c.last_error).c_str());
    json_builder_set_member_name(b, "pictures_failing");  // why its events' pictures are not made
    json_builder_add_string_value(b, c.counts.pictures_failing.c_str());
    json_builder_set_member_name(b, "clips_failing");  // why its events' clips are not made
    json_builder_add_string_value(b, c.counts.clips_failing.c_str());
    json_builder_set_member_name(b, "frames");
    json_builder_add_int_value(b, static_cast<gint64>(c.counts.frames));
    json_builder_set_member_name(b, "frames_per_second");
    json_builder_add_double_value(b, c.frames_per_second);
    json_builder_set_member_name(b, "reconnects");
    json_builder_add_int_value(b, static_cast<gint64>(c.reconnects));
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  return end_health(b, all_streaming, status);
}

JsonBuilder *begin_health(double uptime_s) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "uptime_seconds");
  json_builder_add_int_value(b, static_cast<gint64>(uptime_s));
  json_builder_set_member_name(b, "cameras");
  json_builder_begin_object(b);
  return b;
}

std::string end_health(JsonBuilder *b, bool ok, int *status) {
  json_builder_set_member_name(b, "status");
  json_builder_add_string_value(b, ok ? "ok" : "degraded");
  json_builder_end_object(b);
  *status = ok ? 200 : 503;
  return json_text(b);
}

void add_string(JsonBuilder *b, const char *name, const std::string &value) {
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, value.c_str());
}

void add_int(JsonBuilder *b, const char *name, gint64 value) {
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, value);
}

std::string json_text(JsonBuilder *builder) {
  JsonNode *root = json_builder_get_root(builder);
  gchar *text = json_to_string(root, TRUE);
  std::string out = std::string(text) + "\n";
  g_free(text);
  json_node_unref(root);
  g_object_unref(builder);
  return out;
}

ProcessSnapshot process_snapshot(double uptime_s, std::map<unsigned, bool> placement_gpus) {
  ProcessSnapshot process;
  process.uptime_s = uptime_s;
  process.resident_bytes = resident_bytes();
  process.heap_bytes = heap_bytes();
  process.threads = entries_of("/proc/self/task");
  process.open_fds = entries_of("/proc/self/fd");
  process.gpus = gpu_memory();
  process.placement_gpus = std::move(placement_gpus);
  return process;
}

}  // namespace cudanms::service
