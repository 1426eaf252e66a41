#include "config_edit.h"

#include <cudanms/count.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include <vector>

#include "config.h"

namespace cudanms::service {

namespace {

Reply answer(int status, const std::string &text) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, status == 200 ? "saved" : "error");
  json_builder_add_string_value(b, text.c_str());
  json_builder_end_object(b);
  return {status, "application/json", json_text(b)};
}

// The "lines" member of the body, or false with the reason.
bool lines_of(const std::string &body, std::string *lines, std::string *why) {
  JsonParser *parser = json_parser_new();
  bool good =
      json_parser_load_from_data(parser, body.c_str(), static_cast<gssize>(body.size()), nullptr);
  JsonNode *root = good ? json_parser_get_root(parser) : nullptr;
  JsonObject *object = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : nullptr;
  JsonNode *member = object ? json_object_get_member(object, "lines") : nullptr;
  good =
      member && JSON_NODE_HOLDS_VALUE(member) && json_node_get_value_type(member) == G_TYPE_STRING;
  if (good) *lines = json_node_get_string(member);
  g_object_unref(parser);
  if (!good) *why = "the body must be JSON {\"lines\": \"NAME:x1,y1,x2,y2;...\"}";
  return good;
}

}  // namespace

std::string lines_camera(const std::string &path) {
  const std::string prefix = "/api/cameras/", suffix = "/lines";
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
    return answer(403, "changes from the page need web-auth = KEY in the config's [service]");
  if (authorization != "Bearer " + web_auth) return answer(401, "a wrong or missing key");
  return {0, "", ""};
}

Reply save_camera_lines(const std::string &config_path, const std::string &camera,
                        const std::string &body) {
  std::string lines, why;
  if (!lines_of(body, &lines, &why)) return answer(400, why);
  std::vector<CountLine> parsed;
  if (!parse_lines(lines, true, &parsed, &why)) return answer(400, why);

  ServiceConfig now;
  std::vector<std::string> errors;
  if (!load_config(config_path, &now, &errors))
    return answer(409, config_path + " cannot be read as it is now: " + errors.front());
  const CameraConfig *current = nullptr;
  for (const CameraConfig &c : now.cameras)
    if (c.name == camera) current = &c;
  if (!current) return answer(404, "no camera " + camera + " in " + config_path);
  const auto normalized = current->count.find("normalized");
  const bool in_pixels = normalized == current->count.end() || normalized->second != "true";
  if (in_pixels && (current->count.count("lines") || current->count.count("zones")))
    return answer(409, "camera " + camera +
                           " counts in pixels (normalized = false): edit its lines in " +
                           config_path);

  GKeyFile *file = g_key_file_new();
  GError *error = nullptr;
  const std::string group = "camera." + camera;
  gchar *text = nullptr;
  if (g_key_file_load_from_file(file, config_path.c_str(), G_KEY_FILE_KEEP_COMMENTS, &error)) {
    g_key_file_set_string(file, group.c_str(), "lines", lines.c_str());
    g_key_file_set_string(file, group.c_str(), "normalized", "true");
    text = g_key_file_to_data(file, nullptr, nullptr);
  }
  g_key_file_free(file);
  if (!text) {
    const std::string reason = error ? error->message : "unknown error";
    g_clear_error(&error);
    return answer(500, "cannot read " + config_path + ": " + reason);
  }
  // What the service would make of the file, before it is written.
  ServiceConfig next;
  errors.clear();
  const bool readable = parse_config(text, config_path, &next, &errors);
  if (readable && !g_file_set_contents(config_path.c_str(), text, -1, &error)) {
    why = std::string("cannot write ") + config_path + ": " + error->message;
    g_clear_error(&error);
  }
  g_free(text);
  if (!readable) return answer(400, errors.front());
  if (!why.empty()) return answer(500, why);
  return answer(200, camera + ": lines = " + lines);
}

Reply change_config(const std::string &path, const std::string &body,
                    const std::string &authorization, const std::string &web_auth,
                    const std::string &config_file, const std::string &no_file) {
  const std::string camera = lines_camera(path);
  if (camera.empty()) return answer(404, "no such change: " + path);
  Reply allowed = check_web_auth(web_auth, authorization);
  if (allowed.status != 0) return allowed;
  if (config_file.empty()) return answer(409, no_file);
  return save_camera_lines(config_file, camera, body);
}

}  // namespace cudanms::service
