#include "web.h"

#include <glib.h>
#include <json-glib/json-glib.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace cudanms::service {

namespace {

void add_counts(JsonBuilder *b, const CountingState &counting) {
  json_builder_set_member_name(b, "lines");
  json_builder_begin_object(b);
  for (const auto &[line, in_out] : counting.lines) {
    json_builder_set_member_name(b, line.c_str());
    json_builder_begin_object(b);
    add_int(b, "in", static_cast<gint64>(in_out.first));
    add_int(b, "out", static_cast<gint64>(in_out.second));
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "crossings");
  json_builder_begin_array(b);
  for (const auto &[key, n] : counting.crossings) {
    const auto &[line, direction, label] = key;
    json_builder_begin_object(b);
    add_string(b, "line", line);
    add_string(b, "direction", direction);
    add_string(b, "label", label);
    add_int(b, "count", static_cast<gint64>(n));
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "occupancy");
  json_builder_begin_array(b);
  for (const auto &[key, n] : counting.occupancy) {
    json_builder_begin_object(b);
    add_string(b, "zone", key.first);
    add_string(b, "label", key.second);
    add_int(b, "objects", static_cast<gint64>(n));
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "loitering");
  json_builder_begin_object(b);
  for (const auto &[zone, n] : counting.loitering) add_int(b, zone.c_str(), static_cast<gint64>(n));
  json_builder_end_object(b);
}

void add_events(JsonBuilder *b, const std::vector<RecentEvent> &events) {
  json_builder_set_member_name(b, "events");
  json_builder_begin_array(b);
  for (const RecentEvent &e : events) {
    json_builder_begin_object(b);
    add_event(b, e);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

// Where the page's files are: installed, else (a build run from its tree) the source's.
std::string web_dir() {
  static const std::string dir = [] {
    const std::string installed = CUDANMS_WEB_DIR;
    if (g_file_test((installed + "/index.html").c_str(), G_FILE_TEST_EXISTS)) return installed;
    return std::string(CUDANMS_SOURCE_WEB_DIR);
  }();
  return dir;
}

}  // namespace

std::string without_credentials(const std::string &text) {
  static const std::regex userinfo(R"(([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@)");
  return std::regex_replace(text, userinfo, "$1");
}

std::string host_name(const std::string &host_id) {
  return host_id.empty() ? g_get_host_name() : host_id;
}

namespace {

// Camera `c` into `b`'s open object, shown on `host`. A camera that runs has its state and GPU;
// one of a fleet that this document only knows from etcd (site_cameras()) has `unrun_state`,
// and `page`: its host's page, if any.
void add_camera(JsonBuilder *b, const CameraSnapshot &c, const std::string &host,
                const std::string &unrun_state = "", const std::string &page = "",
                JsonNode *kept_events = nullptr) {
  json_builder_set_member_name(b, c.name.c_str());
  json_builder_begin_object(b);
  add_string(b, "state", unrun_state.empty() ? state_name(c.state) : unrun_state);
  json_builder_set_member_name(b, "enabled");
  json_builder_add_boolean_value(b, c.enabled);
  add_int(b, "state_seconds", static_cast<gint64>(c.state_seconds));
  add_string(b, "host", host);
  if (!page.empty()) add_string(b, "page", page);
  add_string(b, "gpu", !unrun_state.empty() ? "" : c.gpu >= 0 ? std::to_string(c.gpu) : "cpu");
  add_string(b, "device", c.device);
  json_builder_set_member_name(b, "frames_per_second");
  json_builder_add_double_value(b, c.frames_per_second);
  add_int(b, "frames", static_cast<gint64>(c.counts.frames));
  add_int(b, "reconnects", static_cast<gint64>(c.reconnects));
  add_string(b, "last_error", without_credentials(c.last_error));
  add_string(b, "pictures_failing", c.counts.pictures_failing);
  add_string(b, "clips_failing", c.counts.clips_failing);
  add_int(b, "snapshot", static_cast<gint64>(c.snapshot_number));
  json_builder_set_member_name(b, "shapes");  // the lines and zones as configured
  json_builder_begin_object(b);
  add_string(b, "lines", c.lines);
  add_string(b, "zones", c.zones);
  json_builder_set_member_name(b, "normalized");
  json_builder_add_boolean_value(b, c.normalized);
  json_builder_end_object(b);
  add_counts(b, c.counting);
  if (kept_events) {
    json_builder_set_member_name(b, "events");
    json_builder_add_value(b, json_node_copy(kept_events));
  } else {
    add_events(b, c.events);
  }
  json_builder_end_object(b);
}

JsonBuilder *begin_cameras() {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "cameras");
  json_builder_begin_object(b);
  return b;
}

std::string end_cameras(JsonBuilder *b) {
  json_builder_end_object(b);
  json_builder_end_object(b);
  return json_text(b);
}

}  // namespace

std::string render_cameras(const std::vector<CameraSnapshot> &cameras, const std::string &host) {
  JsonBuilder *b = begin_cameras();
  for (const CameraSnapshot &c : cameras) add_camera(b, c, host);
  return end_cameras(b);
}

JsonObject *cameras_of(JsonParser *parser, const std::string &doc) {
  if (!json_parser_load_from_data(parser, doc.c_str(), -1, nullptr)) return nullptr;
  JsonNode *root = json_parser_get_root(parser);
  JsonObject *object = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : nullptr;
  JsonNode *cameras = object ? json_object_get_member(object, "cameras") : nullptr;
  return cameras && JSON_NODE_HOLDS_OBJECT(cameras) ? json_node_get_object(cameras) : nullptr;
}

namespace {

// The cameras of `doc` (an /api/cameras document) into `b`'s open object, those not `seen`
// before; `host` and `page`, where not "", set on each.
void add_cameras(JsonBuilder *b, const std::string &doc, const std::string &host,
                 const std::string &page, std::set<std::string> *seen) {
  JsonParser *parser = json_parser_new();
  JsonObject *cameras = cameras_of(parser, doc);
  JsonObjectIter it;
  const gchar *name = nullptr;
  JsonNode *camera = nullptr;
  if (cameras) json_object_iter_init(&it, cameras);
  while (cameras && json_object_iter_next(&it, &name, &camera)) {
    if (!JSON_NODE_HOLDS_OBJECT(camera) || !seen->insert(name).second) continue;
    JsonNode *copy = json_node_copy(camera);
    if (!host.empty())
      json_object_set_string_member(json_node_get_object(copy), "host", host.c_str());
    if (!page.empty())
      json_object_set_string_member(json_node_get_object(copy), "page", page.c_str());
    json_builder_set_member_name(b, name);
    json_builder_add_value(b, copy);
  }
  g_object_unref(parser);
}

}  // namespace

std::string merge_cameras(const std::vector<WorkerAnswer> &answers, const std::string &host) {
  JsonBuilder *b = begin_cameras();
  std::set<std::string> seen;
  for (const WorkerAnswer &answer : answers) add_cameras(b, answer.body, host, "", &seen);
  return end_cameras(b);
}

namespace {

// Each camera's events in `answers` (/api/host/cameras documents, the newest last), each event
// marked with the camera's host then; new references.
std::map<std::string, JsonNode *> events_of(const std::vector<HostCameras> &answers) {
  std::map<std::string, JsonNode *> out;
  for (const HostCameras &answer : answers) {
    JsonParser *parser = json_parser_new();
    JsonObject *cameras = cameras_of(parser, answer.body);
    JsonObjectIter it;
    const gchar *name = nullptr;
    JsonNode *camera = nullptr;
    if (cameras) json_object_iter_init(&it, cameras);
    while (cameras && json_object_iter_next(&it, &name, &camera)) {
      if (!JSON_NODE_HOLDS_OBJECT(camera)) continue;
      JsonObject *o = json_node_get_object(camera);
      JsonNode *events = json_object_get_member(o, "events");
      if (!events || !JSON_NODE_HOLDS_ARRAY(events)) continue;
      const char *host =
          json_object_has_member(o, "host") ? json_object_get_string_member(o, "host") : nullptr;
      JsonNode *marked = json_node_copy(events);
      JsonArray *list = json_node_get_array(marked);
      for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonNode *event = json_array_get_element(list, i);
        if (JSON_NODE_HOLDS_OBJECT(event))
          json_object_set_string_member(json_node_get_object(event), "host", host ? host : "");
      }
      auto [at, fresh] = out.emplace(name, marked);
      if (!fresh) {  // a newer answer's
        json_node_unref(at->second);
        at->second = marked;
      }
    }
    g_object_unref(parser);
  }
  return out;
}

}  // namespace

std::string site_cameras(const std::string &here, const std::vector<HostCameras> &others,
                         const std::vector<SiteCamera> &site,
                         const std::vector<HostCameras> &gone) {
  JsonBuilder *b = begin_cameras();
  std::set<std::string> seen;
  add_cameras(b, here, "", "", &seen);
  for (const HostCameras &host : others) add_cameras(b, host.body, "", host.url + "/", &seen);
  std::map<std::string, JsonNode *> last_events = events_of(gone);
  for (const SiteCamera &camera : site) {
    if (seen.count(camera.name)) continue;
    CameraSnapshot c;
    c.name = camera.name;
    c.enabled = camera.enabled;
    c.last_error = !camera.error.empty()  ? camera.error
                   : camera.owner.empty() ? "no host runs it: none has room, or none is up"
                                          : "its host did not answer";
    const auto events = last_events.find(camera.name);
    add_camera(b, c, camera.owner, camera.owner.empty() ? "unplaced" : "unanswered",
               camera.owner_url.empty() ? "" : camera.owner_url + "/",
               events == last_events.end() ? nullptr : events->second);
  }
  for (auto &[name, events] : last_events) json_node_unref(events);
  return end_cameras(b);
}

Reply snapshot_reply(const Snapshot &snapshot) {
  Reply reply;
  if (!snapshot.jpeg) {
    reply.status = 503;
    reply.type = "text/plain; charset=utf-8";
    reply.body = "no picture yet\n";
    return reply;
  }
  reply.type = kJpegType;
  reply.body = *snapshot.jpeg;
  return reply;
}

std::string snapshot_camera(const std::string &path) {
  const std::string prefix = "/snapshot/";
  if (path.rfind(prefix, 0) != 0) return "";
  gchar *name = g_uri_unescape_string(path.c_str() + prefix.size(), "/");
  const std::string out = name ? name : "";
  g_free(name);
  return out;
}

Reply not_found(const std::string &path) {
  return {404, "text/plain; charset=utf-8", "no such page: " + path + "\n"};
}

Reply page_file(const std::string &path) {
  static const std::map<std::string, std::pair<const char *, const char *>> files = {
      {"/", {"index.html", "text/html; charset=utf-8"}},
      {"/index.html", {"index.html", "text/html; charset=utf-8"}},
      {"/app.js", {"app.js", "text/javascript; charset=utf-8"}},
      {"/style.css", {"style.css", "text/css; charset=utf-8"}},
  };
  Reply reply;
  const auto file = files.find(path);
  std::ifstream in;
  if (file != files.end()) in.open(web_dir() + "/" + file->second.first, std::ios::binary);
  if (file == files.end() || !in.is_open()) {
    reply.status = 404;
    reply.type = "text/plain; charset=utf-8";
    reply.body = file == files.end() ? "no such page: " + path + "\n"
                                     : "the page's " + std::string(file->second.first) +
                                           " is not installed in " + web_dir() + "\n";
    return reply;
  }
  std::ostringstream text;
  text << in.rdbuf();
  reply.type = file->second.second;
  reply.body = text.str();
  return reply;
}

}  // namespace cudanms::service
