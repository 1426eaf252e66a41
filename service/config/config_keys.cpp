// The config's own keys: the table of what each means, where it may stand and how its value
// goes into the config (the checks of values: key_values.h). config.cpp reads the file with
// them.
#include "config_keys.h"

#include <cudanms/bounded_file.h>
#include <gio/gio.h>
#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "etcd.h"
#include "gpulist.h"
#include "history_store.h"
#include "key_values.h"

namespace cudanms::service {
namespace {

// The keys whose value goes into one field as a rule takes it.
template <std::string CameraConfig::*field>
std::string description(const std::string &v, CameraConfig *c, ServiceConfig *) {
  return take_description(v, &(c->*field));
}
template <bool CameraConfig::*field>
std::string camera_flag(const std::string &v, CameraConfig *c, ServiceConfig *) {
  return parse_bool(v, &(c->*field));
}
// A clip's seconds before or after its events: 0 to 60 (the ring before is kept in memory).
template <double CameraConfig::*field>
std::string clip_seconds(const std::string &v, CameraConfig *c, ServiceConfig *) {
  const std::string why = parse_seconds(v, 0, &(c->*field));
  return why.empty() && c->*field > 60 ? "must be at most 60 s, not " + v : why;
}
template <std::string ServiceConfig::*field>
std::string readable(const std::string &v, CameraConfig *, ServiceConfig *s) {
  return take_readable(v, &(s->*field));
}
template <std::string EtcdTls::*field>
std::string fleet_readable(const std::string &v, CameraConfig *, ServiceConfig *s) {
  return take_readable(v, &(s->fleet.tls.*field));
}

const Key kKeys[] = {
    // [service] only.
    {"metrics-address", Where::kService,
     "HOST:PORT of the HTTP endpoint (/metrics, /health); \"\" for none; port 0: a free one",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       const std::string why = check_listen_address(v);
       if (why.empty()) s->metrics_address = v;
       return why;
     }},
    {"tls-certificate", Where::kService,
     "a PEM certificate (chain) for HTTPS on metrics-address, with tls-key; none (default): plain "
     "HTTP, which listens on loopback only unless insecure-listen = true",
     readable<&ServiceConfig::tls_certificate>},
    {"tls-key", Where::kService, "the PEM private key of tls-certificate",
     readable<&ServiceConfig::tls_key>},
    {"tls-ca", Where::kService,
     "PEM certificates a fleet's host trusts in the other hosts' HTTPS (their cameras, "
     "pictures); none (default): the system's",
     readable<&ServiceConfig::tls_ca>},
    {"host-credential-file", Where::kService,
     "a file whose first line is the secret a fleet's hosts give one another (the same on every "
     "host): a host with one answers the others' questions (/api/host/) only with it",
     readable<&ServiceConfig::host_credential_file>},
    {"insecure-listen", Where::kService,
     "true: plain HTTP may listen beyond loopback (anyone on the network reads the site); false "
     "(default): a metrics-address beyond loopback needs tls-certificate",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       return parse_bool(v, &s->insecure_listen);
     }},
    {"web-auth", Where::kService,
     "a key the operator's page must give (Authorization: Bearer KEY) to change the config; "
     "none (default): the page changes nothing",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (!v.empty() && v.size() < 8)
         return "must be at least 8 characters, not " + std::to_string(v.size());
       s->web_auth = v;
       return "";
     }},
    {"history", Where::kService,
     "the events' history: an SQLite file (made where there is none; the workers of this host "
     "write into it), or a PostgreSQL database (postgresql://USER@HOST:PORT/DB, the password "
     "in ~/.pgpass or PGPASSFILE) that the hosts of a fleet share: searched at /api/events; "
     "\"\" (default) for none",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v.empty() || is_postgres_uri(v)) return (s->history = v), "";
       gchar *dir = g_path_get_dirname(v.c_str());
       std::string why = check_directory(dir);
       g_free(dir);
       if (why.empty() && g_file_test(v.c_str(), G_FILE_TEST_IS_DIR))
         why = v + " is a directory, not a file";
       if (why.empty()) s->history = v;
       return why;
     }},
    {"snapshots", Where::kService,
     "a directory for a picture of each counting event (DIR/CAMERA/ID.jpg: its frame at most 640 "
     "wide, its track's box highlighted and the others faint; made where there is none), served "
     "at /api/events/SEQ/snapshot with the history; \"\" (default) for none",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       const std::string why = v.empty() ? "" : check_directory(v);
       if (why.empty()) s->snapshots = v;
       return why;
     }},
    {"snapshots-size", Where::kService,
     "the most the snapshots' pictures take, e.g. 500M or 20G (K, M, G: 1024s): past it the "
     "oldest go, their events kept (\"snapshot_gone\"); 0 (default): no bound",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       return parse_bytes(v, &s->snapshots_size);
     }},
    {"mqtt-address", Where::kService,
     "the MQTT broker (host:port, tcp:// or ssl:// URI); \"\" for none",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
#ifndef CUDANMS_HAVE_MQTT
       if (!v.empty()) return "this build has no MQTT client (install libpaho-mqtt-dev, rebuild)";
#endif
       s->mqtt_address = v;
       return "";
     }},
    {"mqtt-prefix", Where::kService,
     "topic prefix: detections on PREFIX/CAMERA, states on PREFIX/CAMERA/status (retained), the "
     "service's own on PREFIX/status",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       const std::string why = check_topic(v);
       if (why.empty()) s->mqtt_prefix = v;
       return why;
     }},
    {"gpus", Where::kService,
     "the GPUs cameras are placed on, each on the least loaded one: all (default; those "
     "CUDA_VISIBLE_DEVICES shows), none (the CPU) or indices, 0,2,3; a camera's gpu-id fixes "
     "its own",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       std::string why;
       gst_cv_parse_gpu_list(v, &s->gpus, &s->all_gpus, &why);
       return why;
     }},
    {"gpu-failure", Where::kService,
     "when a GPU fails (CUDA errors): move its cameras to the least loaded GPU left (move, "
     "default; the CPU when none is left) or run them on the cpu",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v != "move" && v != "cpu") return "must be move or cpu, not \"" + v + "\"";
       s->gpu_failure = v;
       return "";
     }},
    {"workers", Where::kService,
     "per-gpu: a worker process per GPU, restarted by itself when it dies, the others "
     "untouched (default with more than one GPU); one: every camera in the service's process. "
     "Read at start only",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v != "per-gpu" && v != "one") return "must be per-gpu or one, not \"" + v + "\"";
       s->workers = v;
       return "";
     }},
    {"fleet", Where::kService,
     "etcd's endpoints, http(s)://HOST:PORT[,...]: this host runs its share of the site's "
     "cameras, kept in etcd, instead of cameras of its own (docs/fleet.md)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v.empty()) return (s->fleet.endpoints.clear()), "";
       return EtcdClient::check_endpoints(v, &s->fleet.endpoints);
     }},
    {"site", Where::kService, "the fleet's site: hosts of one site share its cameras (default)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       const std::string why = check_name(v);
       if (why.empty()) s->fleet.site = v;
       return why;
     }},
    {"advertise-url", Where::kService,
     "the URL the fleet's other hosts reach this host's endpoint at, http(s)://HOST:PORT (behind "
     "a NAT or a proxy); default: metrics-address, 0.0.0.0 or :: as this machine's name",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       const std::string why = check_endpoint_url(v);
       if (why.empty()) s->fleet.advertise_url = v.back() == '/' ? v.substr(0, v.size() - 1) : v;
       return why;
     }},
    {"host-id", Where::kService,
     "this host's name in the fleet, unique in its site (default: the machine's name)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       const std::string why = check_name(v);
       if (why.empty()) s->fleet.host_id = v;
       return why;
     }},
    {"capacity", Where::kService,
     "the cameras this host runs at most, per GPU of gpus (the CPU counts as one; default 8)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       char *end = nullptr;
       const long n = std::strtol(v.c_str(), &end, 10);
       if (v.empty() || *end != '\0' || n < 1 || n > 10000)
         return "must be 1 to 10000 cameras, not \"" + v + "\"";
       s->fleet.capacity = static_cast<int>(n);
       return "";
     }},
    {"fleet-ttl", Where::kService,
     "seconds of the host's etcd lease (default 5): a host silent this long loses its cameras to "
     "the others, and stops them itself before (fencing)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       return parse_seconds(v, 2, &s->fleet.ttl_s);
     }},
    {"fleet-ca", Where::kService,
     "PEM certificates etcd's are checked against (https:// endpoints; default: the system's)",
     fleet_readable<&EtcdTls::ca>},
    {"fleet-certificate", Where::kService,
     "this host's PEM client certificate for etcd (its --client-cert-auth), with fleet-key",
     fleet_readable<&EtcdTls::certificate>},
    {"fleet-key", Where::kService, "the PEM private key of fleet-certificate",
     fleet_readable<&EtcdTls::key>},
    {"fleet-user", Where::kService,
     "the etcd user this host logs in as (etcd's auth enable), with fleet-password-file",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v.empty() || v.find_first_of(" \t") != std::string::npos)
         return "must be a user name, not \"" + v + "\"";
       s->fleet.login.user = v;
       return "";
     }},
    {"fleet-password-file", Where::kService,
     "a file whose first line is fleet-user's password (readable by the service alone)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) {
       return take_readable(v, &s->fleet.login.password_file);
     }},
    {"fleet-prefix", Where::kService, "where the fleet's keys are in etcd (default /cudanms)",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (v.size() < 2 || v[0] != '/' || v.back() == '/')
         return "must start with / and not end with one, not \"" + v + "\"";
       s->fleet.prefix = v;
       return "";
     }},
    // A camera's, or every camera's default in [service].
    {"url", Where::kCamera, "the camera: rtsp://user:password@host/path, file:///..., or a path",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v.find("://") != std::string::npos) {
         if (!gst_uri_is_valid(v.c_str())) return "is not a valid URI: \"" + v + "\"";
         gchar *protocol = gst_uri_get_protocol(v.c_str());
         const bool supported = gst_uri_protocol_is_supported(GST_URI_SRC, protocol);
         const std::string name = protocol;
         g_free(protocol);
         if (!supported) return "no installed element reads " + name + ":// URIs";
         c->uri = v;
         return "";
       }
       if (!g_file_test(v.c_str(), G_FILE_TEST_IS_REGULAR)) return "no such file: " + v;
       gchar *uri = gst_filename_to_uri(v.c_str(), nullptr);
       c->uri = uri ? uri : "";
       g_free(uri);
       return "";
     }},
    {"source", Where::kCamera,
     "instead of url: a gst-launch description giving raw video (v4l2src device=/dev/video0)",
     description<&CameraConfig::source>},
    {"enabled", Where::kAnywhere, "false: the camera is configured but not run",
     camera_flag<&CameraConfig::enabled>},
    {"detector", Where::kAnywhere,
     "the detector, a gst-launch description (default: OpenCV's frontal-face cascade on "
     "cudacascade, 40 px and up)",
     description<&CameraConfig::detector>},
    {"latency", Where::kAnywhere, "RTSP: rtspsrc's jitter buffer in ms (default 200)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       char *end = nullptr;
       const long ms = std::strtol(v.c_str(), &end, 10);
       if (v.empty() || *end != '\0' || ms < 0 || ms > 60000)
         return "must be 0 to 60000 ms, not \"" + v + "\"";
       c->latency_ms = static_cast<int>(ms);
       return "";
     }},
    {"protocols", Where::kAnywhere,
     "RTSP: tcp (default: through NAT and firewalls), udp, or udp+tcp",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v != "tcp" && v != "udp" && v != "udp+tcp" && v != "tcp+udp")
         return "must be tcp, udp or udp+tcp, not \"" + v + "\"";
       c->protocols = v;
       return "";
     }},
    {"json", Where::kAnywhere,
     "JSON lines file of the detections and state changes, appended to ({camera}: the name)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v.empty()) return (c->json = ""), "";
       gchar *dir = g_path_get_dirname(v.c_str());
       std::string why = check_directory(dir);
       g_free(dir);
       if (why.empty() && g_file_test(v.c_str(), G_FILE_TEST_EXISTS) &&
           (!g_file_test(v.c_str(), G_FILE_TEST_IS_REGULAR) || access(v.c_str(), W_OK) != 0))
         why = "cannot append to " + v;
       if (why.empty()) c->json = v;
       return why;
     }},
    {"format", Where::kAnywhere, "cudanms (default) or dlstreamer (gvametaconvert's JSON)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v != "cudanms" && v != "dlstreamer")
         return "must be cudanms or dlstreamer, not \"" + v + "\"";
       c->format = v;
       return "";
     }},
    {"mqtt-topic", Where::kAnywhere, "the detections' topic (default PREFIX/{camera})",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       const std::string why = check_topic(v);
       if (why.empty()) c->mqtt_topic = v;
       return why;
     }},
    {"record-dir", Where::kAnywhere,
     "record MP4 segments CAMERA-NNNNN.mp4 into this directory (each playable on its own)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       const std::string why = v.empty() ? "" : check_directory(v);
       if (why.empty()) c->record_dir = v;
       return why;
     }},
    {"record-segment", Where::kAnywhere, "seconds per MP4 segment (default 60)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_seconds(v, 1, &c->record_segment_s);
     }},
    {"record-encoder", Where::kAnywhere,
     "the recording's H.264 encoder, a gst-launch description (default x264enc, ultrafast)",
     description<&CameraConfig::record_encoder>},
    {"record-boxes", Where::kAnywhere, "draw the kept boxes into the recording (default true)",
     camera_flag<&CameraConfig::record_boxes>},
    {"snapshot-interval", Where::kAnywhere,
     "seconds between the annotated pictures of the operator's page (default 1; 0: none)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       double seconds = 0;
       const std::string why = parse_seconds(v, 0, &seconds);
       if (!why.empty()) return why;
       if (seconds > 0 && seconds < 0.1) return "must be 0 (none) or at least 0.1 s, not " + v;
       c->snapshot_interval_s = seconds;
       return "";
     }},
    {"picture-retain-days", Where::kAnywhere,
     "days its events' pictures (snapshots) are kept, then removed, their events kept "
     "(\"snapshot_gone\"); 0 (default): kept until snapshots-size needs their room",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       char *end = nullptr;
       const double days = g_ascii_strtod(v.c_str(), &end);
       if (v.empty() || *end != '\0' || !std::isfinite(days) || days < 0)
         return "must be a number of days (0: no bound), not \"" + v + "\"";
       c->picture_retain_days = days;
       return "";
     }},
    {"picture-retain-size", Where::kAnywhere,
     "the most its events' pictures take, e.g. 200M (K, M, G: 1024s): past it its oldest go, "
     "their events kept (\"snapshot_gone\"); 0 (default): no bound but snapshots-size",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       return parse_bytes(v, &c->picture_retain_bytes);
     }},
    {"clips", Where::kAnywhere,
     "a clip of each counting event beside its picture (SNAPSHOTS/CAMERA/ID.mp4), cut from the "
     "camera's own H.264/H.265 without re-encoding (default false; needs snapshots)",
     camera_flag<&CameraConfig::clips>},
    {"clip-pre-capture", Where::kAnywhere,
     "seconds of a clip before its event, from the keyframe at or before them (default 5, "
     "at most 60: kept in memory)",
     clip_seconds<&CameraConfig::clip_pre_s>},
    {"clip-post-capture", Where::kAnywhere,
     "seconds of a clip after its last event; events closer together share one (default 5, "
     "at most 60)",
     clip_seconds<&CameraConfig::clip_post_s>},
    {"reconnect-initial", Where::kAnywhere, "seconds before the first retry (default 1)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_seconds(v, 0.01, &c->reconnect_initial_s);
     }},
    {"reconnect-max", Where::kAnywhere, "the retry delay doubles up to this (default 30 s)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_seconds(v, 0.01, &c->reconnect_max_s);
     }},
    {"reconnect-attempts", Where::kAnywhere,
     "retries in a row before the camera is failed: unlimited (default), or N (0: never)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v == "unlimited") return (c->reconnect_attempts = -1), "";
       char *end = nullptr;
       const long n = std::strtol(v.c_str(), &end, 10);
       if (v.empty() || *end != '\0' || n < 0 || n > G_MAXINT)
         return "must be unlimited or a count of 0 or more, not \"" + v + "\"";
       c->reconnect_attempts = n;
       return "";
     }},
    {"cuda-context", Where::kAnywhere,
     "shared (default): one CUDA context per GPU for every camera; per-camera: one each (a "
     "poisoned context stays with its camera, for ~0.5 GB of GPU memory a camera)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       if (v != "shared" && v != "per-camera")
         return "must be shared or per-camera, not \"" + v + "\"";
       c->share_cuda_context = v == "shared";
       return "";
     }},
    // Its rule over a camera's keys: apply_cascade_grouping, below.
    {"cascade-grouping", Where::kAnywhere,
     "auto (default): a cascade detector's raw windows (cudacascade, or cvdetect with a cascade "
     "XML) are grouped as OpenCV's detectMultiScale groups them (cudanms method=group "
     "min-neighbors=3) unless method is given; on: any detector's windows so; off: never "
     "(cudanms's "
     "own default, greedy NMS)",
     [](const std::string &v, CameraConfig *, ServiceConfig *) -> std::string {
       if (v != "auto" && v != "on" && v != "off")
         return "must be auto, on or off, not \"" + v + "\"";
       return "";
     }},
    {"gpu-id", Where::kAnywhere,
     "the camera's GPU, a CUDA device index (placed by the service where not given), set on "
     "every element of the camera that has a gpu-id",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) -> std::string {
       guint64 gpu = 0;
       if (!g_ascii_string_to_unsigned(v.c_str(), 10, 0, G_MAXINT, &gpu, nullptr))
         return "must be a GPU index, 0 or more, not \"" + v + "\"";
       c->gpu_id = static_cast<unsigned>(gpu);
       return "";
     }},
    {"tracker", Where::kAnywhere,
     "true (default): boxtrack gives the kept boxes ids (its properties are keys too: "
     "track-thresh, track-buffer, ...); false: none, and no counting",
     camera_flag<&CameraConfig::tracker>},
    {"stall-timeout", Where::kAnywhere,
     "seconds without a frame (streaming, or since a start) after which the camera is "
     "reconnected (default 10)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_seconds(v, 0.1, &c->stall_timeout_s);
     }},
};

}  // namespace

void apply_cascade_grouping(std::map<std::string, std::string> *values) {
  const std::string &detector = (*values)["detector"];
  const auto given = values->find("cascade-grouping");
  const std::string grouping = given == values->end() ? "auto" : given->second;
  const bool cascade =
      grouping == "on" ||
      (grouping == "auto" &&
       (detector.rfind("cudacascade", 0) == 0 ||
        (detector.rfind("cvdetect", 0) == 0 && detector.find(".xml") != std::string::npos)));
  if (!cascade || values->count("method")) return;
  (*values)["method"] = "group";
  values->emplace("min-neighbors", "3");
}

const Key *find_key(const std::string &name) {
  for (const Key &key : kKeys)
    if (name == key.name) return &key;
  return nullptr;
}

std::string describe_keys() {
  std::string out;
  for (const Key &key : kKeys) {
    const char *where = key.where == Where::kService  ? "[service]"
                        : key.where == Where::kCamera ? "[camera.NAME]"
                                                      : "both";
    out += std::string("  ") + key.name + " (" + where + "): " + key.meaning + "\n";
  }
  out +=
      "  and every writable property of cudanms, by its name (both): iou-threshold, method, "
      "score-threshold, labels-file ... (gst-inspect-1.0 cudanms)\n"
      "  and of boxtrack (track-thresh, track-buffer, min-hits, ...) and boxcount (lines, zones, "
      "normalized, anchor, classes, hysteresis, crossing-frames, loitering-time, track-timeout): "
      "lines and zones count the tracked boxes (gst-inspect-1.0 boxcount)\n";
  return out;
}

}  // namespace cudanms::service
