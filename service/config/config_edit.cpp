#include "config_edit.h"

#include <cudanms/count.h>
#include <json-glib/json-glib.h>

#include <vector>

#include "element_check.h"

namespace cudanms::service {

namespace {

// Every error of a config, for the operator: one line would hide the one they came to fix.
std::string every(const std::vector<std::string> &errors) {
  std::string out;
  for (const std::string &e : errors) out += (out.empty() ? "" : "; ") + e;
  return out;
}

constexpr const char *kBodyForm =
    "the body must be JSON {\"lines\": \"NAME:x1,y1,x2,y2;...\", "
    "\"zones\": \"NAME:x1,y1 x2,y2 x3,y3 ...;...\"}, either or both";

// The string member `name` of `object`: absent (true, *has false), a string (true), or another
// kind of value (false).
bool string_member(JsonObject *object, const char *name, bool *has, std::string *value) {
  JsonNode *member = json_object_get_member(object, name);
  *has = member != nullptr;
  if (!member) return true;
  if (!JSON_NODE_HOLDS_VALUE(member) || json_node_get_value_type(member) != G_TYPE_STRING)
    return false;
  *value = json_node_get_string(member);
  return true;
}

// Sets `edit`'s keys in `group` of `file`.
void set_shapes(GKeyFile *file, const std::string &group, const ShapesEdit &edit) {
  if (edit.has_lines) g_key_file_set_string(file, group.c_str(), "lines", edit.lines.c_str());
  if (edit.has_zones) g_key_file_set_string(file, group.c_str(), "zones", edit.zones.c_str());
  g_key_file_set_string(file, group.c_str(), "normalized", "true");
}

std::string saved_text(const std::string &camera, const ShapesEdit &edit) {
  std::string text = camera + ":";
  if (edit.has_lines) text += " lines = " + edit.lines;
  if (edit.has_zones) text += std::string(edit.has_lines ? ";" : "") + " zones = " + edit.zones;
  return text;
}

}  // namespace

Reply edit_answer(int status, const std::string &text) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, status == 200 ? "saved" : "error");
  json_builder_add_string_value(b, text.c_str());
  json_builder_end_object(b);
  return {status, "application/json", json_text(b)};
}

Reply read_shapes_edit(const std::string &body, ShapesEdit *edit) {
  JsonParser *parser = json_parser_new();
  bool good =
      json_parser_load_from_data(parser, body.c_str(), static_cast<gssize>(body.size()), nullptr);
  JsonNode *root = good ? json_parser_get_root(parser) : nullptr;
  JsonObject *object = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : nullptr;
  good = object && string_member(object, "lines", &edit->has_lines, &edit->lines) &&
         string_member(object, "zones", &edit->has_zones, &edit->zones) &&
         (edit->has_lines || edit->has_zones);
  g_object_unref(parser);
  if (!good) return edit_answer(400, kBodyForm);
  std::string why;
  std::vector<CountLine> lines;
  std::vector<CountZone> zones;
  if (edit->has_lines && !parse_lines(edit->lines, true, &lines, &why))
    return edit_answer(400, why);
  if (edit->has_zones && !parse_zones(edit->zones, true, &zones, &why))
    return edit_answer(400, why);
  return {0, "", ""};
}

std::string pixel_shapes_kept(const CameraConfig &camera, const ShapesEdit &edit) {
  const auto normalized = camera.elements.find("normalized");
  if (normalized != camera.elements.end() && normalized->second == "true") return "";
  for (const char *key : {"lines", "zones"}) {
    const bool replaced = std::string(key) == "lines" ? edit.has_lines : edit.has_zones;
    const auto kept = camera.elements.find(key);
    if (!replaced && kept != camera.elements.end() && !kept->second.empty())
      return "camera " + camera.name + " counts in pixels (normalized = false): its " + key +
             " would be read in 0..1; give them too, or edit them where the camera is configured";
  }
  return "";
}

bool shapes_edited(const std::string &keys, const ShapesEdit &edit, std::string *edited,
                   std::string *why) {
  GKeyFile *file = g_key_file_new();
  const std::string document = "[camera]\n" + keys;
  GError *error = nullptr;
  const bool read = g_key_file_load_from_data(file, document.c_str(), document.size(),
                                              G_KEY_FILE_KEEP_COMMENTS, &error);
  gsize groups = 0;
  if (read) g_strfreev(g_key_file_get_groups(file, &groups));
  if (read && groups != 1) {
    *why = "holds a [group] line: a camera's keys are alone there";
  } else if (read) {
    set_shapes(file, "camera", edit);
    gchar *data = g_key_file_to_data(file, nullptr, nullptr);
    const std::string text = data;
    g_free(data);
    *edited = text.substr(text.find('\n') + 1);  // below the group's line
  } else {
    *why = error->message;
    g_clear_error(&error);
  }
  g_key_file_free(file);
  return read && groups == 1;
}

Reply save_camera_shapes(const std::string &config_path, const std::string &camera,
                         const ShapesEdit &edit) {
  ServiceConfig now;
  std::vector<std::string> errors;
  if (!load_checked_config(config_path, &now, &errors))
    return edit_answer(409, config_path + " cannot be read as it is now: " + every(errors));
  const CameraConfig *current = nullptr;
  for (const CameraConfig &c : now.cameras)
    if (c.name == camera) current = &c;
  if (!current) return edit_answer(404, "no camera " + camera + " in " + config_path);
  if (const std::string why = pixel_shapes_kept(*current, edit); !why.empty())
    return edit_answer(409, why);

  GKeyFile *file = g_key_file_new();
  GError *error = nullptr;
  gchar *text = nullptr;
  if (g_key_file_load_from_file(file, config_path.c_str(), G_KEY_FILE_KEEP_COMMENTS, &error)) {
    set_shapes(file, "camera." + camera, edit);
    text = g_key_file_to_data(file, nullptr, nullptr);
  }
  g_key_file_free(file);
  if (!text) {
    const std::string reason = error ? error->message : "unknown error";
    g_clear_error(&error);
    return edit_answer(500, "cannot read " + config_path + ": " + reason);
  }
  // What the service would make of the file, before it is written.
  ServiceConfig next;
  errors.clear();
  const bool readable = parse_checked_config(text, config_path, &next, &errors);
  std::string why;
  if (readable && !g_file_set_contents(config_path.c_str(), text, -1, &error)) {
    why = std::string("cannot write ") + config_path + ": " + error->message;
    g_clear_error(&error);
  }
  g_free(text);
  if (!readable) return edit_answer(400, every(errors));
  if (!why.empty()) return edit_answer(500, why);
  return edit_answer(200, saved_text(camera, edit));
}

std::string shapes_camera(const std::string &path) {
  const std::string prefix = "/api/cameras/", suffix = "/shapes";
  if (path.size() <= prefix.size() + suffix.size() || path.rfind(prefix, 0) != 0 ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string escaped =
      path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  gchar *name = g_uri_unescape_string(escaped.c_str(), "/");
  const std::string out = name ? name : "";
  g_free(name);
  return out;
}

Reply check_web_auth(const std::string &web_auth, const std::string &authorization) {
  if (web_auth.empty())
    return edit_answer(403, "changes from the page need web-auth = KEY in the config's [service]");
  if (!bearer_matches(authorization, web_auth)) return edit_answer(401, "a wrong or missing key");
  return {0, "", ""};
}

Reply read_change(const std::string &path, const std::string &body,
                  const std::string &authorization, const std::string &web_auth,
                  std::string *camera, ShapesEdit *edit) {
  *camera = shapes_camera(path);
  if (camera->empty()) return edit_answer(404, "no such change: " + path);
  Reply allowed = check_web_auth(web_auth, authorization);
  if (allowed.status != 0) return allowed;
  return read_shapes_edit(body, edit);
}

Reply change_config(const std::string &path, const std::string &body,
                    const std::string &authorization, const std::string &web_auth,
                    const std::string &config_file, const std::string &no_file) {
  std::string camera;
  ShapesEdit edit;
  Reply reply = read_change(path, body, authorization, web_auth, &camera, &edit);
  if (reply.status != 0) return reply;
  if (config_file.empty()) return edit_answer(409, no_file);
  return save_camera_shapes(config_file, camera, edit);
}

}  // namespace cudanms::service
