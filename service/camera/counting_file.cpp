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

guint64 count_member(JsonObject *o, const char *name, gint64 least) {
  return static_cast<guint64>(
      std::max<gint64>(json_object_get_int_member_with_default(o, name, least), least));
}

}  // namespace

std::string counting_json(const CountingState &state,
                          const std::map<std::string, std::string> &line_shapes, bool undelivered) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "next_track_id");
  json_builder_add_int_value(b, static_cast<gint64>(state.next_track_id));
  json_builder_set_member_name(b, "next_event_id");
  json_builder_add_int_value(b, static_cast<gint64>(state.next_event_id));
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
  if (undelivered && !state.undelivered.empty()) {
    json_builder_set_member_name(b, "undelivered");  // [id, message]
    json_builder_begin_array(b);
    for (const auto &[id, message] : state.undelivered) {
      json_builder_begin_array(b);
      json_builder_add_int_value(b, static_cast<gint64>(id));
      json_builder_add_string_value(b, message.c_str());
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
  }
  json_builder_end_object(b);
  return json_text(b);
}

bool parse_counting(const std::string &text, CountingState *state,
                    std::map<std::string, std::string> *line_shapes) {
  JsonParser *parser = json_parser_new();
  bool good =
      json_parser_load_from_data(parser, text.data(), static_cast<gssize>(text.size()), nullptr);
  JsonNode *root = good ? json_parser_get_root(parser) : nullptr;
  good = root && JSON_NODE_HOLDS_OBJECT(root);
  CountingState out;
  std::map<std::string, std::string> shapes;
  if (good) {
    JsonObject *o = json_node_get_object(root);
    out.next_track_id = count_member(o, "next_track_id", 1);
    out.next_event_id = count_member(o, "next_event_id", 1);
    JsonObject *lines =
        json_object_has_member(o, "lines") ? json_object_get_object_member(o, "lines") : nullptr;
    GList *names = lines ? json_object_get_members(lines) : nullptr;
    for (GList *n = names; n; n = n->next) {
      const char *name = static_cast<const char *>(n->data);
      JsonNode *line = json_object_get_member(lines, name);
      if (!JSON_NODE_HOLDS_OBJECT(line)) continue;
      JsonObject *l = json_node_get_object(line);
      out.lines[name] = {count_member(l, "in", 0), count_member(l, "out", 0)};
      shapes[name] = json_object_get_string_member_with_default(l, "shape", "");
    }
    g_list_free(names);
    for (const char *member : {"crossings", "undelivered"}) {
      JsonNode *node = json_object_get_member(o, member);
      JsonArray *items = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : nullptr;
      for (guint i = 0; items && i < json_array_get_length(items); ++i) {
        JsonNode *item = json_array_get_element(items, i);
        if (!JSON_NODE_HOLDS_ARRAY(item)) continue;
        JsonArray *c = json_node_get_array(item);
        const guint n = json_array_get_length(c);
        if (member[0] == 'c' && n == 4)
          out.crossings[{string_at(c, 0), string_at(c, 1), string_at(c, 2)}] =
              static_cast<guint64>(json_array_get_int_element(c, 3));
        else if (member[0] == 'u' && n == 2)
          out.undelivered[static_cast<guint64>(json_array_get_int_element(c, 0))] = string_at(c, 1);
      }
    }
  }
  g_object_unref(parser);
  if (!good) return false;
  *state = std::move(out);
  *line_shapes = std::move(shapes);
  return true;
}

bool save_counting(const std::string &path, const CountingState &state,
                   const std::map<std::string, std::string> &line_shapes, std::string *error) {
  const std::string text = counting_json(state, line_shapes);
  GError *gerror = nullptr;
  if (g_file_set_contents(path.c_str(), text.c_str(), static_cast<gssize>(text.size()), &gerror))
    return true;
  *error = gerror->message;
  g_clear_error(&gerror);
  return false;
}

bool load_counting(const std::string &path, CountingState *state,
                   std::map<std::string, std::string> *line_shapes) {
  gchar *text = nullptr;
  gsize length = 0;
  if (!g_file_get_contents(path.c_str(), &text, &length, nullptr)) return false;
  const bool good = parse_counting(std::string(text, length), state, line_shapes);
  g_free(text);
  return good;
}

}  // namespace cudanms::service
