#include "config.h"

#include <cudanms/bounded_file.h>
#include <cudanms/count.h>
#include <cudanms/nms.h>
#include <gio/gio.h>
#include <gst/gst.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "gpulist.h"

namespace cudanms::service {
namespace {

const char *const kCameraPrefix = "camera.";
const char *const kDefaultDetector =
    "cudacascade model=/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml "
    "min-size=40x40 scale-factor=1.1";

// Where a key may stand.
enum class Where { kService, kCamera, kAnywhere };

// A key's value into the config; "" when it is good, else the reason.
using Apply = std::string (*)(const std::string &value, CameraConfig *camera,
                              ServiceConfig *service);

struct Key {
  const char *name;
  Where where;
  const char *meaning;
  Apply apply;
};

std::string parse_bool(const std::string &value, bool *out) {
  if (value == "true") return (*out = true), "";
  if (value == "false") return (*out = false), "";
  return "must be true or false, not \"" + value + "\"";
}

// The CUDA devices this process sees; CUDANMS_TEST_GPU_COUNT pretends to that many instead, for
// the service's tests of placement and GPU failures on machines without GPUs (the elements then
// run on the CPU whatever their gpu-id).
int visible_gpu_count() {
  const char *pretend = g_getenv("CUDANMS_TEST_GPU_COUNT");
  if (pretend && *pretend) return static_cast<int>(g_ascii_strtoll(pretend, nullptr, 10));
  return cudanms::cuda_device_count();
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

// " (MIN to MAX)" of a numeric property; "" for others.
std::string range_of(GParamSpec *pspec) {
  std::ostringstream range;
  range << " (";
  if (G_IS_PARAM_SPEC_INT(pspec)) {
    range << G_PARAM_SPEC_INT(pspec)->minimum << " to " << G_PARAM_SPEC_INT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_UINT(pspec)) {
    range << G_PARAM_SPEC_UINT(pspec)->minimum << " to " << G_PARAM_SPEC_UINT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_INT64(pspec)) {
    range << G_PARAM_SPEC_INT64(pspec)->minimum << " to " << G_PARAM_SPEC_INT64(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_UINT64(pspec)) {
    range << G_PARAM_SPEC_UINT64(pspec)->minimum << " to " << G_PARAM_SPEC_UINT64(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_FLOAT(pspec)) {
    range << G_PARAM_SPEC_FLOAT(pspec)->minimum << " to " << G_PARAM_SPEC_FLOAT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_DOUBLE(pspec)) {
    range << G_PARAM_SPEC_DOUBLE(pspec)->minimum << " to " << G_PARAM_SPEC_DOUBLE(pspec)->maximum;
  } else {
    return "";
  }
  range << ")";
  return range.str();
}

// `value` for the property `pspec`, as gst-launch would set it: "" when it is valid.
std::string check_property(GParamSpec *pspec, const std::string &value) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, pspec->value_type);
  std::string why;
  if (!gst_value_deserialize(&v, value.c_str())) {
    why = std::string("is not a valid ") + g_type_name(pspec->value_type) + ": \"" + value + "\"";
    if (G_IS_PARAM_SPEC_ENUM(pspec)) {
      why = "must be one of";
      GEnumClass *e = G_PARAM_SPEC_ENUM(pspec)->enum_class;
      for (guint i = 0; i < e->n_values; ++i)
        why += std::string(i ? ", " : " ") + e->values[i].value_nick;
      why += ", not \"" + value + "\"";
    }
  } else if (g_param_value_validate(pspec, &v)) {
    why = "is out of range: \"" + value + "\"" + range_of(pspec);
  }
  g_value_unset(&v);
  return why;
}

// Whether the camera's lines and zones are in 0..1 of the frame: its boxcount's normalized, read
// as GStreamer reads a boolean ("true", "yes", "1" ...).
bool counts_normalized(const CameraConfig &camera) {
  const auto found = camera.count.find("normalized");
  if (found == camera.count.end()) return false;
  GValue v = G_VALUE_INIT;
  g_value_init(&v, G_TYPE_BOOLEAN);
  const bool normalized =
      gst_value_deserialize(&v, found->second.c_str()) && g_value_get_boolean(&v);
  g_value_unset(&v);
  return normalized;
}

// The camera's lines or zones (`key`), parsed as its boxcount will parse them; none without the
// key.
bool parse_shapes(const CameraConfig &camera, const std::string &key,
                  std::vector<cudanms::CountLine> *lines, std::vector<cudanms::CountZone> *zones,
                  std::string *why) {
  const auto found = camera.count.find(key);
  if (found == camera.count.end()) return true;
  const bool normalized = counts_normalized(camera);
  return key == "lines" ? cudanms::parse_lines(found->second, normalized, lines, why)
                        : cudanms::parse_zones(found->second, normalized, zones, why);
}

// The element class a factory makes, or null when its plugin is not found.
GObjectClass *element_class(const char *factory_name) {
  GstElementFactory *factory = gst_element_factory_find(factory_name);
  if (!factory) return nullptr;
  GstPluginFeature *loaded = gst_plugin_feature_load(GST_PLUGIN_FEATURE(factory));
  gst_object_unref(factory);
  if (!loaded) return nullptr;
  const GType type = gst_element_factory_get_element_type(GST_ELEMENT_FACTORY(loaded));
  gst_object_unref(loaded);
  return type ? G_OBJECT_CLASS(g_type_class_ref(type)) : nullptr;
}

// The writable properties of an element class that a config may set, by name.
std::map<std::string, GParamSpec *> settable_properties(GObjectClass *klass) {
  std::map<std::string, GParamSpec *> out;
  if (!klass) return out;
  guint n = 0;
  GParamSpec **specs = g_object_class_list_properties(klass, &n);
  for (guint i = 0; i < n; ++i) {
    const GParamFlags flags = specs[i]->flags;
    if (!(flags & G_PARAM_WRITABLE) || (flags & G_PARAM_CONSTRUCT_ONLY)) continue;
    const std::string name = g_param_spec_get_name(specs[i]);
    if (name != "name" && name != "parent") out[name] = specs[i];
  }
  g_free(specs);
  return out;
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

const Key *find_key(const std::string &name) {
  for (const Key &key : kKeys)
    if (name == key.name) return &key;
  return nullptr;
}

std::string replace_all(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

bool valid_camera_name(const std::string &name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return g_ascii_isalnum(c) || c == '-' || c == '_'; });
}

// Groups and keys given twice, which GKeyFile would merge without a word: one error each.
void find_repeats(const std::string &text, const std::string &file,
                  std::vector<std::string> *errors) {
  std::map<std::string, int> group_line;
  std::map<std::string, int> key_line;
  std::string group;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    gchar *stripped = g_strstrip(g_strdup(line.c_str()));
    const std::string s = stripped;
    g_free(stripped);
    if (s.empty() || s[0] == '#') continue;
    if (s.front() == '[' && s.back() == ']') {
      group = s.substr(1, s.size() - 2);
      auto [seen, fresh] = group_line.emplace(group, number);
      if (!fresh)
        errors->push_back(file + ":" + group + ": given twice (lines " +
                          std::to_string(seen->second) + " and " + std::to_string(number) + ")");
      key_line.clear();
      continue;
    }
    const size_t equals = s.find('=');
    if (equals == std::string::npos) continue;  // GKeyFile's own error names it
    gchar *key = g_strstrip(g_strndup(s.c_str(), equals));
    auto [seen, fresh] = key_line.emplace(key, number);
    if (!fresh)
      errors->push_back(file + ":" + group + ":" + key + ": given twice (lines " +
                        std::to_string(seen->second) + " and " + std::to_string(number) + ")");
    g_free(key);
  }
}

// The keys of a group with their values, or the reason it cannot be read.
std::map<std::string, std::string> group_values(GKeyFile *file, const char *group,
                                                const std::string &where,
                                                std::vector<std::string> *errors) {
  std::map<std::string, std::string> values;
  gchar **keys = g_key_file_get_keys(file, group, nullptr, nullptr);
  for (gchar **key = keys; key && *key; ++key) {
    GError *error = nullptr;
    gchar *value = g_key_file_get_string(file, group, *key, &error);
    if (value) {
      values[*key] = value;
    } else {
      errors->push_back(where + ":" + *key + ": " + error->message);
      g_clear_error(&error);
    }
    g_free(value);
  }
  g_strfreev(keys);
  return values;
}

}  // namespace

bool parse_config(const std::string &text, const std::string &name, ServiceConfig *config,
                  std::vector<std::string> *errors, int visible_gpus) {
  const size_t errors_before = errors->size();
  const unsigned visible =
      static_cast<unsigned>(visible_gpus >= 0 ? visible_gpus : visible_gpu_count());
  // "" when this process sees GPU `value` (a gpu-id or an index of gpus).
  auto missing_gpu = [visible](unsigned long gpu) -> std::string {
    if (gpu < visible) return "";
    return "GPU " + std::to_string(gpu) + " does not exist (" +
           (visible ? std::to_string(visible) + " visible: 0 to " + std::to_string(visible - 1)
                    : std::string("no CUDA device visible")) +
           ")";
  };
  find_repeats(text, name, errors);
  GKeyFile *file = g_key_file_new();
  GError *error = nullptr;
  if (!g_key_file_load_from_data(file, text.data(), text.size(), G_KEY_FILE_NONE, &error)) {
    errors->push_back(name + ": " + error->message);
    g_clear_error(&error);
    g_key_file_free(file);
    return false;
  }
  ServiceConfig out;
  GObjectClass *nms_class = element_class("cudanms");
  const std::map<std::string, GParamSpec *> nms_properties = settable_properties(nms_class);
  GObjectClass *track_class = element_class("boxtrack");
  GObjectClass *count_class = element_class("boxcount");
  std::map<std::string, GParamSpec *> track_properties = settable_properties(track_class);
  std::map<std::string, GParamSpec *> count_properties = settable_properties(count_class);
  // The service carries these on itself across a camera's connections.
  track_properties.erase("next-id");
  count_properties.erase("counts");
  for (const auto &[element, klass] :
       {std::pair{"cudanms", nms_class}, std::pair{"boxtrack", track_class},
        std::pair{"boxcount", count_class}})
    if (!klass)
      errors->push_back(name + ": the " + element +
                        " element is not installed (set GST_PLUGIN_PATH to "
                        "the build's plugins folder, or install the plugin)");

  // A camera key's value into `camera`: one of the table's, or a property of cudanms, boxtrack
  // or boxcount.
  auto apply_camera_key = [&](const std::string &key, const std::string &value,
                              CameraConfig *camera) -> std::string {
    if (const Key *k = find_key(key)) return k->apply(value, camera, &out);
    for (const auto &[properties, settings] : {std::pair{&track_properties, &camera->track},
                                               std::pair{&count_properties, &camera->count}}) {
      const auto property = properties->find(key);
      if (property == properties->end()) continue;
      const std::string why = check_property(property->second, value);
      if (why.empty()) (*settings)[key] = value;
      return why;
    }
    // Unknown also where the config itself implies it (a cascade's method) and no cudanms
    // element was found to say what it means.
    const auto property = nms_properties.find(key);
    if (property == nms_properties.end()) return std::string("unknown key");
    const std::string why = check_property(property->second, value);
    if (why.empty() && key == "gpu-id")
      camera->gpu_id = static_cast<unsigned>(g_ascii_strtoull(value.c_str(), nullptr, 10));
    else if (why.empty())
      camera->nms[key] = value;
    if (why.empty() && key == "labels-file") {
      std::string contents, unreadable;
      if (!read_bounded_file(value, kLabelsFileLimit, &contents, &unreadable))
        return "cannot read \"" + value + "\": " + unreadable;
    }
    return why;
  };
  auto known = [&](const std::string &key, bool in_service, std::string *why) {
    const Key *k = find_key(key);
    if (!k && !nms_properties.count(key) && !track_properties.count(key) &&
        !count_properties.count(key)) {
      *why = "unknown key";
      return false;
    }
    if (k && in_service && k->where == Where::kCamera) {
      *why = "a camera's own key: it goes in a [camera.NAME] group";
      return false;
    }
    if (k && !in_service && k->where == Where::kService) {
      *why = "a [service] key";
      return false;
    }
    return true;
  };

  // [service]: its own keys, and the defaults of every camera (checked once, here).
  std::map<std::string, std::string> defaults;
  std::set<std::string> bad_defaults;
  if (g_key_file_has_group(file, "service")) {
    const std::string where = name + ":service";
    for (const auto &[key, value] : group_values(file, "service", where, errors)) {
      std::string why;
      if (!known(key, true, &why)) {
        errors->push_back(where + ":" + key + ": " + why);
        continue;
      }
      const Key *k = find_key(key);
      CameraConfig scratch;
      why = k && k->where == Where::kService ? k->apply(value, &scratch, &out)
                                             : apply_camera_key(key, value, &scratch);
      if (why.empty() && scratch.gpu_id) why = missing_gpu(*scratch.gpu_id);
      if (!why.empty()) {
        errors->push_back(where + ":" + key + ": " + why);
        bad_defaults.insert(key);
      }
      if (!k || k->where != Where::kService) defaults[key] = value;
    }
  }

  gsize n_groups = 0;
  gchar **groups = g_key_file_get_groups(file, &n_groups);
  std::map<std::string, std::string> json_owner;
  for (gchar **group = groups; *group; ++group) {
    const std::string g = *group;
    const std::string where = name + ":" + g;
    if (g == "service") continue;
    if (g.rfind(kCameraPrefix, 0) != 0) {
      errors->push_back(where + ": unknown group (groups are [service] and [camera.NAME])");
      continue;
    }
    CameraConfig camera;
    camera.name = g.substr(std::string(kCameraPrefix).size());
    if (!valid_camera_name(camera.name)) {
      errors->push_back(where + ": a camera's name is 1 to 64 letters, digits, - and _");
      continue;
    }
    const std::map<std::string, std::string> own = group_values(file, *group, where, errors);
    std::map<std::string, std::string> values = defaults;
    for (const auto &[key, value] : own) {
      std::string why;
      if (known(key, false, &why)) {
        values[key] = value;
      } else {
        errors->push_back(where + ":" + key + ": " + why);
      }
    }
    if (!values.count("detector")) values["detector"] = kDefaultDetector;
    // A cascade's windows are grouped as detectMultiScale groups them (OpenCV's faces), unless
    // the camera or the service names a method.
    const std::string &detector = values["detector"];
    const bool cascade =
        detector.rfind("cudacascade", 0) == 0 ||
        (detector.rfind("cvdetect", 0) == 0 && detector.find(".xml") != std::string::npos);
    if (cascade && !values.count("method")) {
      values["method"] = "group";
      values.emplace("min-neighbors", "3");
    }
    bool good = values.count("url") + values.count("source") == 1;
    if (!good)
      errors->push_back(values.count("url") ? where + ":source: give url or source, not both"
                                            : where +
                                                  ": no url (or source): what does this "
                                                  "camera show?");
    for (const auto &[key, raw] : values) {
      const bool inherited = !own.count(key);
      if (inherited && bad_defaults.count(key)) {  // reported once, in [service]
        good = false;
        continue;
      }
      // Paths and topics may name the camera.
      const std::string value = replace_all(raw, "{camera}", camera.name);
      const std::string why = apply_camera_key(key, value, &camera);
      if (!why.empty()) {
        errors->push_back((inherited ? name + ":service" : where) + ":" + key + ": " + why +
                          (inherited ? " (for camera " + camera.name + ")" : ""));
        good = false;
      }
      camera.settings[key] = value;
    }
    if (own.count("gpu-id") && camera.gpu_id) {
      const std::string why = missing_gpu(*camera.gpu_id);
      if (!why.empty()) {
        errors->push_back(where + ":gpu-id: " + why);
        good = false;
      }
    }
    // Lines and zones: checked whole (degenerate lines, polygons that cross themselves), in the
    // units `normalized` gives them.
    for (const char *key : {"lines", "zones"}) {
      std::string why;
      std::vector<cudanms::CountLine> lines;
      std::vector<cudanms::CountZone> zones;
      const bool inherited = !own.count(key);
      if (!parse_shapes(camera, key, &lines, &zones, &why)) {
        errors->push_back((inherited ? name + ":service" : where) + ":" + key + ": " + why +
                          (inherited ? " (for camera " + camera.name + ")" : ""));
        good = false;
      } else if (!camera.tracker && (!lines.empty() || !zones.empty())) {
        errors->push_back(where + ":" + key + ": counting needs the tracker (tracker = true)");
        good = false;
      }
    }
    if (camera.reconnect_max_s < camera.reconnect_initial_s) {
      errors->push_back(where + ":reconnect-max: must be at least reconnect-initial");
      good = false;
    }
    if (!camera.json.empty()) {
      auto [owner, fresh] = json_owner.emplace(camera.json, camera.name);
      if (!fresh) {
        errors->push_back(where + ":json: camera " + owner->second + " writes " + camera.json +
                          " already");
        good = false;
      }
    }
    if (good) out.cameras.push_back(std::move(camera));
  }
  g_strfreev(groups);
  if (out.all_gpus) {
    for (unsigned gpu = 0; gpu < visible; ++gpu) out.gpus.push_back(gpu);
  } else {
    for (unsigned gpu : out.gpus)
      if (const std::string why = missing_gpu(gpu); !why.empty())
        errors->push_back(name + ":service:gpus: " + why);
  }
  if (n_groups == 0 || (n_groups == 1 && g_key_file_has_group(file, "service")))
    errors->push_back(name + ": no camera: add a [camera.NAME] group with its url");

  // MQTT: each camera's topics, from the prefix unless it names its own.
  for (CameraConfig &camera : out.cameras) {
    if (out.mqtt_address.empty()) {
      if (camera.settings.count("mqtt-topic"))
        errors->push_back(name + ":camera." + camera.name +
                          ":mqtt-topic: needs mqtt-address in [service]");
      camera.mqtt_topic.clear();
      continue;
    }
    camera.mqtt_address = out.mqtt_address;
    if (camera.mqtt_topic.empty()) camera.mqtt_topic = out.mqtt_prefix + "/" + camera.name;
    camera.status_topic = out.mqtt_prefix + "/" + camera.name + "/status";
    camera.settings["mqtt-address"] = out.mqtt_address;
    camera.settings["mqtt-topic"] = camera.mqtt_topic;
  }
  for (GObjectClass *klass : {nms_class, track_class, count_class})
    if (klass) g_type_class_unref(klass);
  g_key_file_free(file);
  if (errors->size() > errors_before) return false;
  *config = std::move(out);
  return true;
}

bool load_config(const std::string &path, ServiceConfig *config, std::vector<std::string> *errors,
                 int visible_gpus, std::string *text_read) {
  std::string text, why;
  if (!read_bounded_file(path, kConfigFileLimit, &text, &why)) {
    errors->push_back(path + ": cannot read the config: " + why);
    return false;
  }
  if (!parse_config(text, path, config, errors, visible_gpus)) return false;
  if (text_read) *text_read = std::move(text);
  return true;
}

std::string config_for_urls(const std::vector<std::string> &urls,
                            const std::map<std::string, std::string> &service_keys) {
  GKeyFile *file = g_key_file_new();
  for (const auto &[key, value] : service_keys)
    g_key_file_set_string(file, "service", key.c_str(), value.c_str());
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string group = std::string(kCameraPrefix) + "cam" + std::to_string(i + 1);
    g_key_file_set_string(file, group.c_str(), "url", urls[i].c_str());
  }
  gchar *text = g_key_file_to_data(file, nullptr, nullptr);
  std::string out = text;
  g_free(text);
  g_key_file_free(file);
  return out;
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
      "normalized, anchor, classes, hysteresis, track-timeout): lines and zones count the "
      "tracked boxes (gst-inspect-1.0 boxcount)\n";
  return out;
}

bool ServiceConfig::per_gpu_workers() const {
  return workers == "per-gpu" || (workers.empty() && gpus.size() > 1);
}

bool CameraConfig::counting() const {
  for (const char *key : {"lines", "zones"}) {
    const auto found = count.find(key);
    if (found != count.end() && found->second.find_first_not_of(" ;") != std::string::npos)
      return true;
  }
  return false;
}

std::map<std::string, std::string> counting_shapes(const CameraConfig &camera, const char *key) {
  std::map<std::string, std::string> out;
  std::vector<cudanms::CountLine> lines;
  std::vector<cudanms::CountZone> zones;
  std::string why;
  if (!parse_shapes(camera, key, &lines, &zones, &why)) return out;
  auto point_text = [](const cudanms::CountPoint &p) {
    return std::to_string(p.x) + "," + std::to_string(p.y) + " ";
  };
  for (const auto &l : lines) out[l.name] = point_text(l.a) + point_text(l.b);
  for (const auto &z : zones)
    for (const auto &p : z.polygon) out[z.name] += point_text(p);
  if (counts_normalized(camera))
    for (auto &[name, text] : out) text += "normalized";
  return out;
}

}  // namespace cudanms::service
