#include "events_api.h"

#include <glib.h>
#include <json-glib/json-glib.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "config_edit.h"
#include "web.h"

namespace cudanms::service {
namespace {

// ISO 8601 with a zone, or seconds since 1970, into microseconds since 1970.
bool parse_time(const std::string &text, gint64 *us) {
  char *end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0' && std::isfinite(seconds) && std::fabs(seconds) < 1e11) {
    *us = static_cast<gint64>(std::llround(seconds * 1e6));
    return true;
  }
  GDateTime *time = g_date_time_new_from_iso8601(text.c_str(), nullptr);
  if (!time) return false;
  *us = g_date_time_to_unix(time) * G_USEC_PER_SEC + g_date_time_get_microsecond(time);
  g_date_time_unref(time);
  return true;
}

bool parse_count(const std::string &text, gint64 least, gint64 most, gint64 *out) {
  char *end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < least || n > most) return false;
  *out = n;
  return true;
}

// An event's picture or clip: "NAME", its URL (null: none, or gone), and "NAME_gone": it had one,
// removed since (retention) or, a clip, never finished.
void add_event_file(JsonBuilder *b, gint64 seq, const std::string &name, const std::string &file,
                    bool gone) {
  json_builder_set_member_name(b, name.c_str());
  if (file.empty() || gone)
    json_builder_add_null_value(b);
  else
    json_builder_add_string_value(b, ("/api/events/" + std::to_string(seq) + "/" + name).c_str());
  json_builder_set_member_name(b, (name + "_gone").c_str());
  json_builder_add_boolean_value(b, gone);
}

// {"MEMBER": [an object a row, its members added by add_row(b, row)], ...: the builder, its
// object open for what follows the array.
template <typename Row, typename AddRow>
JsonBuilder *rows_json(const char *member, const std::vector<Row> &rows, AddRow add_row) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, member);
  json_builder_begin_array(b);
  for (const Row &row : rows) {
    json_builder_begin_object(b);
    add_row(b, row);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  return b;
}

std::string page_json(const std::vector<HistoryEvent> &events, int limit) {
  JsonBuilder *b = rows_json("events", events, [](JsonBuilder *b, const HistoryEvent &e) {
    add_int(b, "seq", e.seq);
    add_string(b, "camera", e.camera);
    add_string(b, "host", e.host);
    add_event(b, e);
    json_builder_set_member_name(b, "dwell");
    json_builder_add_double_value(b, e.dwell_s);
    add_event_file(b, e.seq, "snapshot", e.snapshot, e.snapshot_gone);
    add_event_file(b, e.seq, "clip", e.clip, e.clip_gone);
  });
  json_builder_set_member_name(b, "next_before");  // null on the last page
  if (static_cast<int>(events.size()) == limit && !events.empty())
    json_builder_add_int_value(b, events.back().seq);
  else
    json_builder_add_null_value(b);
  json_builder_end_object(b);
  return json_text(b);
}

// The query's parameters into *q: "" when they are all of `allowed` and of their form, else why.
std::string parse_query(const std::string &query, const std::set<std::string> &allowed,
                        HistoryQuery *q) {
  GError *error = nullptr;
  GHashTable *params = g_uri_parse_params(query.c_str(), -1, "&", G_URI_PARAMS_NONE, &error);
  if (!params) {
    const std::string why = error->message;
    g_error_free(error);
    return "the query: " + why;
  }
  std::map<std::string, std::string> given;
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, params);
  while (g_hash_table_iter_next(&it, &key, &value))
    given[static_cast<const char *>(key)] = static_cast<const char *>(value);
  g_hash_table_unref(params);

  static const std::set<std::string> kinds = {"line-crossed", "zone-entered", "zone-left",
                                              "zone-loitering"};
  for (const auto &[name, text] : given) {
    gint64 n = 0;
    if (!allowed.count(name)) {
      std::string names;
      for (const std::string &a : allowed) names += (names.empty() ? "" : ", ") + a;
      return "no parameter \"" + name + "\" (" + names + ")";
    }
    if (name == "camera") {
      q->camera = text;
    } else if (name == "kind") {
      if (!kinds.count(text))
        return "kind: line-crossed, zone-entered, zone-left or zone-loitering, not \"" + text +
               "\"";
      q->kind = text;
    } else if (name == "label") {
      q->label = text;
    } else if (name == "since" || name == "until") {
      if (!parse_time(text, &n))
        return name +
               ": not a time (ISO 8601 with its zone, e.g. 2026-12-06T03:00:00Z, or seconds "
               "since 1970): \"" +
               text + "\"";
      (name == "since" ? q->since_us : q->until_us) = n;
    } else if (name == "limit") {
      if (!parse_count(text, 1, 1000, &n)) return "limit: 1 to 1000, not \"" + text + "\"";
      q->limit = static_cast<int>(n);
    } else if (name == "before") {
      if (!parse_count(text, 1, G_MAXINT64, &n))
        return "before: an event's seq, not \"" + text + "\"";
      q->before_seq = n;
    }
  }
  return "";
}

std::string hourly_json(const std::vector<HourlyCrossings> &hours) {
  JsonBuilder *b = rows_json("hours", hours, [](JsonBuilder *b, const HourlyCrossings &h) {
    add_int(b, "hour", h.hour_s);
    add_string(b, "camera", h.camera);
    add_string(b, "line", h.line);
    add_int(b, "in", static_cast<gint64>(h.in));
    add_int(b, "out", static_cast<gint64>(h.out));
  });
  json_builder_end_object(b);
  return json_text(b);
}

// "/api/events/SEQ/snapshot" or ".../clip": SEQ and which file; else 0.
gint64 file_seq(const std::string &route, EventFile *file) {
  const std::string prefix = "/api/events/";
  for (const auto &[suffix, kind] :
       {std::pair<std::string, EventFile>{"/snapshot", EventFile::kSnapshot},
        {"/clip", EventFile::kClip}}) {
    if (route.size() <= prefix.size() + suffix.size() || route.rfind(prefix, 0) != 0 ||
        route.compare(route.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    gint64 seq = 0;
    if (!parse_count(route.substr(prefix.size(), route.size() - prefix.size() - suffix.size()), 1,
                     G_MAXINT64, &seq))
      return 0;
    *file = kind;
    return seq;
  }
  return 0;
}

// An event's picture, as its file holds it, or its clip's file (the endpoint answers a Range
// request from it, so that a browser seeks in a clip).
Reply event_file_reply(EventHistory *history, gint64 seq, EventFile file) {
  const bool clip = file == EventFile::kClip;
  const std::string what =
      std::string(clip ? "clip" : "picture") + " of event " + std::to_string(seq);
  std::string path, host;
  if (!history->file_of(seq, file, &path, &host))
    return edit_answer(404, "no " + what + " (none was made, or it was removed)");
  if (clip) {
    if (g_file_test(path.c_str(), G_FILE_TEST_IS_REGULAR))
      return {200, kMp4Type, "", path};  // the endpoint reads what a Range asks for
    // A clip is renamed whole once its last event's post-capture has passed and it is muxed.
    if (g_file_test((path + ".part").c_str(), G_FILE_TEST_EXISTS))
      return edit_answer(503,
                         "the " + what + " is still being recorded: ask again in a few seconds");
    return edit_answer(
        404, "the " + what + " is gone (removed, or never finished: its host stopped mid-clip)");
  }
  gchar *bytes = nullptr;
  gsize length = 0;
  if (!g_file_get_contents(path.c_str(), &bytes, &length, nullptr))
    return edit_answer(404, "the " + what + " is gone");
  Reply reply{200, kJpegType, std::string(bytes, length)};
  g_free(bytes);
  return reply;
}

}  // namespace

bool is_events_path(const std::string &path) {
  EventFile file = EventFile::kSnapshot;
  if (path.rfind("/api/events", 0) != 0) return false;
  const std::string rest = path.substr(std::string("/api/events").size());
  return rest.empty() || rest[0] == '?' || rest == "/hourly" || rest.rfind("/hourly?", 0) == 0 ||
         file_seq(path.substr(0, path.find('?')), &file) != 0;
}

std::string event_file_elsewhere(EventHistory *history, const std::string &path,
                                 const std::string &here) {
  EventFile kind = EventFile::kSnapshot;
  const gint64 seq = history ? file_seq(path.substr(0, path.find('?')), &kind) : 0;
  std::string file, host;
  if (!seq || !history->file_of(seq, kind, &file, &host) || host == here) return "";
  return host;
}

Reply events_reply(EventHistory *history, const std::string &path,
                   const std::function<bool(const std::string &)> &known_camera) {
  if (!history) return edit_answer(404, "this host keeps no history ([service] history)");
  const size_t mark = path.find('?');
  const std::string route = path.substr(0, mark);
  const std::string query = mark == std::string::npos ? "" : path.substr(mark + 1);
  EventFile file = EventFile::kSnapshot;
  if (const gint64 seq = file_seq(route, &file)) return event_file_reply(history, seq, file);
  const bool hourly = route == "/api/events/hourly";
  HistoryQuery q;
  const std::string bad =
      hourly ? parse_query(query, {"camera", "since", "until"}, &q)
             : parse_query(query, {"camera", "kind", "label", "since", "until", "limit", "before"},
                           &q);
  if (!bad.empty()) return edit_answer(400, bad);
  if (q.camera && !known_camera(*q.camera) && !history->has_camera(*q.camera))
    return edit_answer(404, "no camera \"" + *q.camera + "\"");
  std::string why;
  if (hourly) {
    std::vector<HourlyCrossings> hours;
    if (!history->hourly(q, &hours, &why)) return edit_answer(503, "the history: " + why);
    return {200, kHealthType, hourly_json(hours)};
  }
  std::vector<HistoryEvent> events;
  if (!history->query(q, &events, &why)) return edit_answer(503, "the history: " + why);
  return {200, kHealthType, page_json(events, q.limit)};
}

}  // namespace cudanms::service
