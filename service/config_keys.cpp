// The config's own keys: the table of what each means, where it may stand and how its value
// goes into the config, with the checks of their values (gst-launch descriptions, model files,
// folders, topics, addresses). config.cpp reads the file with them.
#include "config_keys.h"

#include <cudanms/bounded_file.h>
#include <gio/gio.h>
#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "etcd.h"
#include "gpulist.h"

namespace cudanms::service {
namespace {

std::string parse_bool(const std::string &value, bool *out) {
  if (value == "true") return (*out = true), "";
  if (value == "false") return (*out = false), "";
  return "must be true or false, not \"" + value + "\"";
}

// A number of seconds of at least `least`.
std::string parse_seconds(const std::string &value, double least, double *out) {
  char *end = nullptr;
  const double v = g_ascii_strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v))
    return "must be a number of seconds, not \"" + value + "\"";
  if (v < least) {
    std::ostringstream why;
    why << "must be at least " << least << " s, not " << value;
    return why.str();
  }
  *out = v;
  return "";
}

// An element of `bin` that takes no input: its factory has no sink pad template.
bool has_source_element(GstElement *bin) {
  bool found = false;
  GstIterator *it = gst_bin_iterate_elements(GST_BIN(bin));
  GValue item = G_VALUE_INIT;
  while (!found && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstElementFactory *factory = gst_element_get_factory(GST_ELEMENT(g_value_get_object(&item)));
    bool takes_input = false;
    for (const GList *t = factory ? gst_element_factory_get_static_pad_templates(factory) : nullptr;
         t; t = t->next)
      takes_input |= static_cast<GstStaticPadTemplate *>(t->data)->direction == GST_PAD_SINK;
    found = factory && !takes_input;
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  return found;
}

// A gst-launch description, parsed as a bin: "" when it parses and has the pads asked for.
std::string check_description(const std::string &text, bool needs_sink, bool needs_src,
                              GstElement **parsed = nullptr) {
  if (text.find_first_not_of(" \t") == std::string::npos) return "is empty";
  GError *error = nullptr;
  GstElement *bin = gst_parse_bin_from_description_full(text.c_str(), TRUE, nullptr,
                                                        GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!bin && needs_src) {
    // It may end in caps (v4l2src ! video/x-raw,width=640,height=480), which gst-launch's
    // grammar takes only between two elements, as they are in the camera's pipeline.
    GError *again = nullptr;
    bin = gst_parse_bin_from_description_full((text + " ! identity").c_str(), TRUE, nullptr,
                                              GST_PARSE_FLAG_FATAL_ERRORS, &again);
    g_clear_error(&again);
    if (bin) g_clear_error(&error);
  }
  if (!bin) {
    std::string why = error ? error->message : "cannot be parsed";
    g_clear_error(&error);
    return why;
  }
  gst_object_ref_sink(bin);
  GstPad *sink = gst_element_get_static_pad(bin, "sink");
  GstPad *src = gst_element_get_static_pad(bin, "src");
  std::string why;
  // A source's first element makes the video (no sink pad template: rtspsrc, v4l2src...); its
  // next may show a free sink pad only because it links to a pad that comes later.
  if (needs_sink && !sink)
    why = "must take video in (its first element has no free sink pad)";
  else if (!needs_sink && !has_source_element(bin))
    why = "must begin with a source element (rtspsrc, v4l2src, videotestsrc...)";
  else if (needs_src && !src)
    why = "must give video out (its last element has no free source pad)";
  if (sink) gst_object_unref(sink);
  if (src) gst_object_unref(src);
  if (why.empty() && parsed) {
    *parsed = bin;
  } else {
    gst_object_unref(bin);
  }
  return why;
}

// A model file that an element of `bin` names in its "model" property (a path: a value with a
// '/' or a '.'; cvdetect's "hog-people" is a built-in model): readable, within the limit.
std::string check_models(GstElement *bin) {
  std::string why;
  GstIterator *it = gst_bin_iterate_recurse(GST_BIN(bin));
  GValue item = G_VALUE_INIT;
  while (why.empty() && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstElement *element = GST_ELEMENT(g_value_get_object(&item));
    GParamSpec *pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(element), "model");
    if (pspec && pspec->value_type == G_TYPE_STRING) {
      gchar *model = nullptr;
      g_object_get(element, "model", &model, NULL);
      const std::string path = model ? model : "";
      g_free(model);
      std::string unreadable;
      if (path.find_first_of("/.") != std::string::npos &&
          !check_bounded_file(path, kModelFileLimit, &unreadable))
        why = "model \"" + path + "\" cannot be read: " + unreadable;
    }
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  return why;
}

// A directory the service writes in: one that exists and is writable, or one it can make (the
// camera makes it when it starts) in the nearest folder that exists.
std::string check_directory(const std::string &path) {
  std::string existing = path;
  while (!g_file_test(existing.c_str(), G_FILE_TEST_EXISTS)) {
    gchar *parent = g_path_get_dirname(existing.c_str());
    const bool top = existing == parent;
    existing = parent;
    g_free(parent);
    if (top) break;
  }
  if (!g_file_test(existing.c_str(), G_FILE_TEST_IS_DIR)) return "not a directory: " + existing;
  if (access(existing.c_str(), W_OK | X_OK) != 0)
    return "cannot write in " + existing + ": " + g_strerror(errno);
  return "";
}

// A site's or a host's name in the fleet's keys.
std::string check_name(const std::string &name) {
  const bool good =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return g_ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
      });
  return good ? "" : "must be 1 to 64 letters, digits, -, _ and ., not \"" + name + "\"";
}

// A topic, or a topic prefix, the service publishes to: no wildcards.
std::string check_topic(const std::string &topic) {
  if (topic.empty()) return "is empty";
  if (topic.find_first_of("+#") != std::string::npos)
    return "must not hold the wildcards + or #: \"" + topic + "\"";
  return "";
}

// "HOST:PORT" with an IP address or localhost, as the metrics server listens.
std::string check_listen_address(const std::string &address) {
  if (address.empty()) return "";
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char *end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return "must be HOST:PORT (port 0 to 65535; 0 picks a free one), not \"" + address + "\"";
  if (host != "localhost") {
    GInetAddress *ip = g_inet_address_new_from_string(host.c_str());
    if (!ip) return "the host must be an IP address or localhost, not \"" + host + "\"";
    g_object_unref(ip);
  }
  return "";
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
    {"web-auth", Where::kService,
     "a key the operator's page must give (Authorization: Bearer KEY) to change the config; "
     "none (default): the page changes nothing",
     [](const std::string &v, CameraConfig *, ServiceConfig *s) -> std::string {
       if (!v.empty() && v.size() < 8)
         return "must be at least 8 characters, not " + std::to_string(v.size());
       s->web_auth = v;
       return "";
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
     "etcd's endpoints, http://HOST:PORT[,...]: this host runs its share of the site's cameras, "
     "kept in etcd, instead of cameras of its own (docs/fleet.md)",
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
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       const std::string why = check_description(v, false, true);
       if (why.empty()) c->source = v;
       return why;
     }},
    {"enabled", Where::kAnywhere, "false: the camera is configured but not run",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_bool(v, &c->enabled);
     }},
    {"detector", Where::kAnywhere,
     "the detector, a gst-launch description (default: OpenCV's frontal-face cascade on "
     "cudacascade, 40 px and up)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       GstElement *bin = nullptr;
       std::string why = check_description(v, true, true, &bin);
       if (bin) {
         why = check_models(bin);
         gst_object_unref(bin);
       }
       if (why.empty()) c->detector = v;
       return why;
     }},
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
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       const std::string why = check_description(v, true, true);
       if (why.empty()) c->record_encoder = v;
       return why;
     }},
    {"record-boxes", Where::kAnywhere, "draw the kept boxes into the recording (default true)",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_bool(v, &c->record_boxes);
     }},
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
    {"tracker", Where::kAnywhere,
     "true (default): boxtrack gives the kept boxes ids (its properties are keys too: "
     "track-thresh, track-buffer, ...); false: none, and no counting",
     [](const std::string &v, CameraConfig *c, ServiceConfig *) {
       return parse_bool(v, &c->tracker);
     }},
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
      "score-threshold, labels-file, gpu-id (also the detector's) ... (gst-inspect-1.0 "
      "cudanms)\n"
      "  and of boxtrack (track-thresh, track-buffer, min-hits, ...) and boxcount (lines, zones, "
      "normalized, anchor, classes, hysteresis, crossing-frames, loitering-time, track-timeout): "
      "lines and zones count the tracked boxes (gst-inspect-1.0 boxcount)\n";
  return out;
}

}  // namespace cudanms::service
