#include "config.h"

#include <cudanms/bounded_file.h>
#include <cudanms/count.h>
#include <cudanms/nms.h>
#include <gio/gio.h>
#include <gst/gst.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "config_keys.h"
#include "key_values.h"

namespace cudanms::service {
namespace {

const char *const kCameraPrefix = "camera.";
const char *const kDefaultDetector =
    "cudacascade model=/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml "
    "min-size=40x40 scale-factor=1.1";

// The CUDA devices this process sees; CUDANMS_TEST_GPU_COUNT pretends to that many instead, for
// the service's tests of placement and GPU failures on machines without GPUs (the elements then
// run on the CPU whatever their gpu-id).
int visible_gpu_count() {
  const char *pretend = g_getenv("CUDANMS_TEST_GPU_COUNT");
  if (pretend && *pretend) return static_cast<int>(g_ascii_strtoll(pretend, nullptr, 10));
  return cudanms::cuda_device_count();
}

// Whether the camera's lines and zones are in 0..1 of the frame: its boxcount's normalized, read
// as GStreamer reads a boolean ("true", "yes", "1" ...).
bool counts_normalized(const CameraConfig &camera) {
  const auto found = camera.elements.find("normalized");
  if (found == camera.elements.end()) return false;
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
  const auto found = camera.elements.find(key);
  if (found == camera.elements.end()) return true;
  const bool normalized = counts_normalized(camera);
  return key == "lines" ? cudanms::parse_lines(found->second, normalized, lines, why)
                        : cudanms::parse_zones(found->second, normalized, zones, why);
}

// A shape's points as text, to compare shapes by.
std::string shape_text(const std::vector<cudanms::CountPoint> &points, bool normalized) {
  std::string text;
  for (const cudanms::CountPoint &p : points)
    text += std::to_string(p.x) + "," + std::to_string(p.y) + " ";
  return normalized ? text + "normalized" : text;
}

std::string replace_all(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// A JSON file is one camera's, the first's that names it: `owners` (file -> camera) takes
// `camera`'s, or false with the error.
bool claim_json(std::map<std::string, std::string> *owners, const CameraConfig &camera,
                const std::string &name, std::vector<std::string> *errors) {
  if (camera.json.empty()) return true;
  const auto [owner, fresh] = owners->emplace(camera.json, camera.name);
  if (!fresh)
    errors->push_back(name + ":camera." + camera.name + ":json: camera " + owner->second +
                      " writes " + camera.json + " already");
  return fresh;
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

namespace {

// parse_config's work, a group at a time: [service] first (its keys are every camera's defaults),
// then each [camera.NAME] over them, then what holds across groups.
class ConfigReader {
 public:
  ConfigReader(const std::string &name, int visible_gpus, std::vector<std::string> *errors)
      : name_(name),
        visible_(static_cast<unsigned>(visible_gpus >= 0 ? visible_gpus : visible_gpu_count())),
        errors_(errors) {}

  // [service]: its own keys, and the defaults of every camera (checked once, here).
  void read_service(GKeyFile *file) {
    if (!g_key_file_has_group(file, "service")) return;
    const std::string where = name_ + ":service";
    for (const auto &[key, value] : group_values(file, "service", where, errors_)) {
      std::string why;
      if (!known(key, true, &why)) {
        errors_->push_back(where + ":" + key + ": " + why);
        continue;
      }
      const Key *k = find_key(key);
      CameraConfig scratch;
      why = k && k->where == Where::kService ? k->apply(value, &scratch, &out_)
                                             : apply_camera_key(key, value, &scratch);
      if (why.empty() && scratch.gpu_id) why = missing_gpu(*scratch.gpu_id);
      if (!why.empty()) {
        errors_->push_back(where + ":" + key + ": " + why);
        bad_defaults_.insert(key);
      }
      if (!k || k->where != Where::kService) defaults_[key] = value;
    }
  }

  // A [camera.NAME] group over the defaults: the camera, or its errors.
  void read_camera(GKeyFile *file, const std::string &group) {
    const std::string where = name_ + ":" + group;
    CameraConfig camera;
    camera.name = group.substr(std::string(kCameraPrefix).size());
    if (!valid_camera_name(camera.name)) {
      errors_->push_back(where + ": a camera's name is 1 to 64 letters, digits, - and _");
      return;
    }
    const std::map<std::string, std::string> own =
        group_values(file, group.c_str(), where, errors_);
    std::map<std::string, std::string> values = defaults_;
    for (const auto &[key, value] : own) {
      std::string why;
      if (known(key, false, &why)) {
        values[key] = value;
        camera.own_keys.insert(key);
      } else {
        errors_->push_back(where + ":" + key + ": " + why);
      }
    }
    if (!values.count("detector")) values["detector"] = kDefaultDetector;
    apply_cascade_grouping(&values);
    bool good = values.count("url") + values.count("source") == 1;
    if (!good)
      errors_->push_back(values.count("url") ? where + ":source: give url or source, not both"
                                             : where +
                                                   ": no url (or source): what does this "
                                                   "camera show?");
    for (const auto &[key, raw] : values) {
      const bool inherited = !own.count(key);
      if (inherited && bad_defaults_.count(key)) {  // reported once, in [service]
        good = false;
        continue;
      }
      // Paths and topics may name the camera.
      const std::string value = replace_all(raw, "{camera}", camera.name);
      const std::string why = apply_camera_key(key, value, &camera);
      if (!why.empty()) {
        errors_->push_back((inherited ? name_ + ":service" : where) + ":" + key + ": " + why +
                           (inherited ? " (for camera " + camera.name + ")" : ""));
        good = false;
      }
      camera.settings[key] = value;
    }
    if (own.count("gpu-id") && camera.gpu_id) {
      const std::string why = missing_gpu(*camera.gpu_id);
      if (!why.empty()) {
        errors_->push_back(where + ":gpu-id: " + why);
        good = false;
      }
    }
    good = check_whole(&camera, own, where) && good;
    every_camera_.push_back(camera);
    if (good) out_.cameras.push_back(std::move(camera));
  }

  // Every camera read, those with errors too: what the elements' check looks at.
  const std::vector<CameraConfig> &every_camera() const { return every_camera_; }

  // What holds across groups: the gpus against the visible GPUs, a camera at least, and each
  // camera's MQTT topics from the prefix unless it names its own.
  ServiceConfig finish(GKeyFile *file, gsize n_groups, bool need_camera) {
    if (out_.all_gpus) {
      for (unsigned gpu = 0; gpu < visible_; ++gpu) out_.gpus.push_back(gpu);
    } else {
      for (unsigned gpu : out_.gpus)
        if (const std::string why = missing_gpu(gpu); !why.empty())
          errors_->push_back(name_ + ":service:gpus: " + why);
    }
    const bool no_camera =
        n_groups == 0 || (n_groups == 1 && g_key_file_has_group(file, "service"));
    if (out_.fleet.on() && !no_camera)
      errors_->push_back(name_ +
                         ": a fleet host runs the cameras etcd has (fleet = ...): keep them there "
                         "(cudanms-service fleet import FILE), not in the host's file");
    else if (no_camera && !out_.fleet.on() && need_camera)
      errors_->push_back(name_ + ": no camera: add a [camera.NAME] group with its url");
    if (out_.fleet.on() && out_.fleet.host_id.empty()) out_.fleet.host_id = g_get_host_name();
    check_web_tls();
    check_etcd_tls();
    check_etcd_login();
    read_host_credential();
    for (const CameraConfig &camera : out_.cameras)
      if (camera.clips && out_.snapshots.empty())
        errors_->push_back(name_ + ":camera." + camera.name +
                           ":clips: needs snapshots in [service] (the folder the events' pictures "
                           "and clips go in)");
    for (CameraConfig &camera : out_.cameras) {
      if (out_.mqtt_address.empty()) {
        if (camera.settings.count("mqtt-topic"))
          errors_->push_back(name_ + ":camera." + camera.name +
                             ":mqtt-topic: needs mqtt-address in [service]");
        camera.mqtt_topic.clear();
        continue;
      }
      camera.mqtt_address = out_.mqtt_address;
      if (camera.mqtt_topic.empty()) camera.mqtt_topic = out_.mqtt_prefix + "/" + camera.name;
      camera.status_topic = out_.mqtt_prefix + "/" + camera.name + "/status";
      camera.settings["mqtt-address"] = out_.mqtt_address;
      camera.settings["mqtt-topic"] = camera.mqtt_topic;
    }
    return std::move(out_);
  }

 private:
  // HTTPS's certificate and key together and usable; plain HTTP on loopback unless told.
  void check_web_tls() {
    if (out_.tls_certificate.empty() != out_.tls_key.empty()) {
      errors_->push_back(name_ + ":service: tls-certificate and tls-key go together");
      return;
    }
    if (!out_.tls_certificate.empty()) {
      GError *why = nullptr;
      GTlsCertificate *certificate = g_tls_certificate_new_from_files(out_.tls_certificate.c_str(),
                                                                      out_.tls_key.c_str(), &why);
      if (!certificate) {
        errors_->push_back(name_ +
                           ":service:tls-certificate: cannot use it with tls-key: " + why->message);
        g_error_free(why);
      } else {
        g_object_unref(certificate);
      }
      return;
    }
    if (out_.insecure_listen || beyond_loopback(out_.metrics_address).empty()) return;
    errors_->push_back(
        name_ + ":service:metrics-address: " + out_.metrics_address + " is reached from " +
        beyond_loopback(out_.metrics_address) +
        ": the page and the API would be plain HTTP for anyone on it; give tls-certificate and "
        "tls-key (HTTPS), or insecure-listen = true");
  }

  // etcd's CA and this host's certificate and key: together, and usable.
  void check_etcd_tls() {
    const EtcdTls &tls = out_.fleet.tls;
    if (tls.certificate.empty() != tls.key.empty()) {
      errors_->push_back(name_ + ":service: fleet-certificate and fleet-key go together");
      return;
    }
    GError *why = nullptr;
    if (!tls.ca.empty()) {
      GTlsDatabase *trusted = g_tls_file_database_new(tls.ca.c_str(), &why);
      if (!trusted) errors_->push_back(name_ + ":service:fleet-ca: " + why->message);
      if (trusted) g_object_unref(trusted);
      g_clear_error(&why);
    }
    if (!tls.certificate.empty()) {
      GTlsCertificate *mine =
          g_tls_certificate_new_from_files(tls.certificate.c_str(), tls.key.c_str(), &why);
      if (!mine)
        errors_->push_back(
            name_ + ":service:fleet-certificate: cannot use it with fleet-key: " + why->message);
      if (mine) g_object_unref(mine);
      g_clear_error(&why);
    }
  }

  // host-credential-file's secret, read now: a reload reads it again.
  void read_host_credential() {
    if (out_.host_credential_file.empty()) return;
    std::string why;
    if (!read_secret(out_.host_credential_file, &out_.host_credential, &why))
      errors_->push_back(name_ + ":service:host-credential-file: " + why);
  }

  // etcd's user and password together; the password never in clear beyond this host.
  void check_etcd_login() {
    const EtcdLogin &login = out_.fleet.login;
    if (login.user.empty() != login.password_file.empty()) {
      errors_->push_back(name_ + ":service: fleet-user and fleet-password-file go together");
      return;
    }
    if (!login.on()) return;
    for (const std::string &endpoint : out_.fleet.endpoints) {
      GUri *uri = g_uri_parse(endpoint.c_str(), G_URI_FLAGS_NONE, nullptr);
      const std::string host = uri ? g_uri_get_host(uri) : "";
      const bool plain = uri && g_strcmp0(g_uri_get_scheme(uri), "http") == 0;
      if (uri) g_uri_unref(uri);
      if (plain && host != "127.0.0.1" && host != "::1" && host != "localhost") {
        errors_->push_back(name_ + ":service:fleet: " + endpoint +
                           " is plain HTTP beyond this host: fleet-user's password would cross "
                           "the network in clear; give https:// endpoints");
        return;
      }
    }
  }

  // "" when this process sees GPU `gpu` (a gpu-id or an index of gpus).
  std::string missing_gpu(unsigned long gpu) const {
    if (gpu < visible_) return "";
    return "GPU " + std::to_string(gpu) + " does not exist (" +
           (visible_ ? std::to_string(visible_) + " visible: 0 to " + std::to_string(visible_ - 1)
                     : std::string("no CUDA device visible")) +
           ")";
  }

  // A camera key's value into `camera`: one of the table's, or one for its elements, which
  // check it themselves (element_check.h).
  std::string apply_camera_key(const std::string &key, const std::string &value,
                               CameraConfig *camera) {
    if (const Key *k = find_key(key)) return k->apply(value, camera, &out_);
    camera->elements[key] = value;
    return "";
  }

  bool known(const std::string &key, bool in_service, std::string *why) const {
    const Key *k = find_key(key);
    if (k && in_service && k->where == Where::kCamera) {
      *why = "a camera's own key: it goes in a [camera.NAME] group";
      return false;
    }
    if (k && !in_service && k->where == Where::kService) {
      *why = "a [service] key";
      return false;
    }
    return true;
  }

  // What only the whole camera can say: lines and zones (degenerate lines, polygons that cross
  // themselves, in the units `normalized` gives them), the back-off, a JSON file of its own
  // among the cameras read before it.
  // The lines parsed here are kept as the camera's line_shapes.
  bool check_whole(CameraConfig *parsed, const std::map<std::string, std::string> &own,
                   const std::string &where) {
    const CameraConfig &camera = *parsed;
    const bool normalized = counts_normalized(camera);
    bool good = true;
    for (const char *key : {"lines", "zones"}) {
      std::string why;
      std::vector<cudanms::CountLine> lines;
      std::vector<cudanms::CountZone> zones;
      const bool inherited = !own.count(key);
      if (!parse_shapes(camera, key, &lines, &zones, &why)) {
        errors_->push_back((inherited ? name_ + ":service" : where) + ":" + key + ": " + why +
                           (inherited ? " (for camera " + camera.name + ")" : ""));
        good = false;
      } else if (!camera.tracker && (!lines.empty() || !zones.empty())) {
        errors_->push_back(where + ":" + key + ": counting needs the tracker (tracker = true)");
        good = false;
      }
      for (const cudanms::CountLine &l : lines)
        parsed->line_shapes[l.name] = shape_text({l.a, l.b}, normalized);
    }
    if (camera.reconnect_max_s < camera.reconnect_initial_s) {
      errors_->push_back(where + ":reconnect-max: must be at least reconnect-initial");
      good = false;
    }
    return claim_json(&json_owner_, camera, name_, errors_) && good;
  }

  const std::string name_;
  const unsigned visible_;
  std::vector<std::string> *errors_;
  ServiceConfig out_;
  std::vector<CameraConfig> every_camera_;
  std::map<std::string, std::string> defaults_;
  std::map<std::string, std::string> json_owner_;  // a JSON file's camera
  std::set<std::string> bad_defaults_;
};

}  // namespace

bool parse_config(const std::string &text, const std::string &name, ServiceConfig *config,
                  std::vector<std::string> *errors, int visible_gpus, bool need_camera,
                  const ElementsCheck &check) {
  const size_t errors_before = errors->size();
  find_repeats(text, name, errors);
  GKeyFile *file = g_key_file_new();
  GError *error = nullptr;
  if (!g_key_file_load_from_data(file, text.data(), text.size(), G_KEY_FILE_NONE, &error)) {
    errors->push_back(name + ": " + error->message);
    g_clear_error(&error);
    g_key_file_free(file);
    return false;
  }
  ConfigReader reader(name, visible_gpus, errors);
  reader.read_service(file);
  gsize n_groups = 0;
  gchar **groups = g_key_file_get_groups(file, &n_groups);
  for (gchar **group = groups; *group; ++group) {
    const std::string g = *group;
    if (g == "service") continue;
    if (g.rfind(kCameraPrefix, 0) != 0) {
      errors->push_back(name + ":" + g +
                        ": unknown group (groups are [service] and [camera.NAME])");
      continue;
    }
    reader.read_camera(file, g);
  }
  g_strfreev(groups);
  ServiceConfig out = reader.finish(file, n_groups, need_camera);
  g_key_file_free(file);
  if (check) check(reader.every_camera(), name, errors);
  if (errors->size() > errors_before) return false;
  *config = std::move(out);
  return true;
}

bool load_config(const std::string &path, ServiceConfig *config, std::vector<std::string> *errors,
                 int visible_gpus, std::string *text_read, bool need_camera,
                 const ElementsCheck &check) {
  std::string text, why;
  if (!read_bounded_file(path, kConfigFileLimit, &text, &why)) {
    errors->push_back(path + ": cannot read the config: " + why);
    return false;
  }
  if (!parse_config(text, path, config, errors, visible_gpus, need_camera, check)) return false;
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

bool read_secret(const std::string &path, std::string *secret, std::string *why) {
  gchar *contents = nullptr;
  GError *error = nullptr;
  if (!g_file_get_contents(path.c_str(), &contents, nullptr, &error)) {
    *why = "cannot read " + path + ": " + error->message;
    g_error_free(error);
    return false;
  }
  std::string first = contents;
  g_free(contents);
  first = first.substr(0, first.find_first_of("\r\n"));
  if (first.empty()) {
    *why = path + " is empty";
    return false;
  }
  *secret = std::move(first);
  return true;
}

bool cameras_run_together(const std::vector<CameraConfig> &cameras, const std::string &name,
                          std::vector<std::string> *errors) {
  std::map<std::string, std::string> json_owner;
  bool good = true;
  for (const CameraConfig &camera : cameras)
    good = claim_json(&json_owner, camera, name, errors) && good;
  return good;
}

bool valid_camera_name(const std::string &name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return g_ascii_isalnum(c) || c == '-' || c == '_'; });
}

bool ServiceConfig::per_gpu_workers() const {
  return workers == "per-gpu" || (workers.empty() && gpus.size() > 1);
}

bool CameraConfig::counting() const {
  for (const char *key : {"lines", "zones"}) {
    const auto found = elements.find(key);
    if (found != elements.end() && found->second.find_first_not_of(" ;") != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace cudanms::service
