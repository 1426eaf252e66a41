#include "counting_file.h"

#include <json-glib/json-glib.h>

#include "metrics.h"

namespace cudanms::service {
namespace {

std::string string_at(JsonArray *array, guint i) {
  JsonNode *node = json_array_get_element(array, i);
  const char *text = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_string(node) : nullptr;
  return text ? text : "";
}

}  // namespace

bool save_counting(const std::string &path, const CountingState &state,
                   const std::map<std::string, std::string> &line_shapes, std::string *error) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "next_track_id");
  json_builder_add_int_value(b, static_cast<gint64>(state.next_track_id));
  json_builder_set_member_name(b, "lines");
  json_builder_begin_object(b);
  for (const auto &[name, counts] : state.lines) {
    json_builder_set_member_name(b, name.c_str());
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "in");
    json_builder_add_int_value(b, static_cast<gint64>(counts.first));
    json_builder_set_member_name(b, "out");
    json_builder_add_int_value(b, static_cast<gint64>(counts.second));
    const auto shape = line_shapes.find(name);
    json_builder_set_member_name(b, "shape");
    json_builder_add_string_value(b, shape == line_shapes.end() ? "" : shape->second.c_str());
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "crossings");  // [line, direction, label, count]
  json_builder_begin_array(b);
  for (const auto &[key, n] : state.crossings) {
    json_builder_begin_array(b);
    json_builder_add_string_value(b, std::get<0>(key).c_str());
    json_builder_add_string_value(b, std::get<1>(key).c_str());
    json_builder_add_string_value(b, std::get<2>(key).c_str());
    json_builder_add_int_value(b, static_cast<gint64>(n));
    json_builder_end_array(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  const std::string text = json_text(b);
  GError *gerror = nullptr;
  if (g_file_set_contents(path.c_str(), text.c_str(), static_cast<gssize>(text.size()), &gerror))
    return true;
  *error = gerror->message;
  g_clear_error(&gerror);
  return false;
}

bool load_counting(const std::string &path, CountingState *state,
                   std::map<std::string, std::string> *line_shapes) {
  JsonParser *parser = json_parser_new();
  bool good = json_parser_load_from_file(parser, path.c_str(), nullptr);
  JsonNode *root = good ? json_parser_get_root(parser) : nullptr;
  good = root && JSON_NODE_HOLDS_OBJECT(root);
  CountingState out;
  std::map<std::string, std::string> shapes;
  if (good) {
    JsonObject *o = json_node_get_object(root);
    out.next_track_id =
        static_cast<guint64>(std::max<gint64>(json_object_get_int_member_with_default(
                                                  o, "next_track_id", 1),
                                              1));
    JsonObject *lines = json_object_has_member(o, "lines")
                            ? json_object_get_object_member(o, "lines")
                            : nullptr;
    GList *names = lines ? json_object_get_members(lines) : nullptr;
    for (GList *n = names; n; n = n->next) {
      const char *name = static_cast<const char *>(n->data);
      JsonNode *line = json_object_get_member(lines, name);
      if (!JSON_NODE_HOLDS_OBJECT(line)) continue;
      JsonObject *l = json_node_get_object(line);
      out.lines[name] = {
          static_cast<guint64>(json_object_get_int_member_with_default(l, "in", 0)),
          static_cast<guint64>(json_object_get_int_member_with_default(l, "out", 0))};
      shapes[name] = json_object_get_string_member_with_default(l, "shape", "");
    }
    g_list_free(names);
    JsonArray *crossings = json_object_has_member(o, "crossings")
                               ? json_object_get_array_member(o, "crossings")
                               : nullptr;
    for (guint i = 0; crossings && i < json_array_get_length(crossings); ++i) {
      JsonNode *node = json_array_get_element(crossings, i);
      if (!JSON_NODE_HOLDS_ARRAY(node)) continue;
      JsonArray *c = json_node_get_array(node);
      if (json_array_get_length(c) != 4) continue;
      out.crossings[{string_at(c, 0), string_at(c, 1), string_at(c, 2)}] =
          static_cast<guint64>(json_array_get_int_element(c, 3));
    }
  }
  g_object_unref(parser);
  if (!good) return false;
  *state = std::move(out);
  *line_shapes = std::move(shapes);
  return true;
}

}  // namespace cudanms::service
