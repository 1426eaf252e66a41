// Counting, exact: people with known paths through the whole chain a user runs,
//   appsrc ! cudanms ! boxtrack ! boxcount ! jsonmetawriter ! fakesink,
// and the events and counts of the JSON lines against the truth, scenario by scenario. The
// table of truth and outcome is printed (docs/elements.md quotes it).
#include <glib/gstdio.h>
#include <gst/app/gstappsrc.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "track_support.h"

namespace cudanms::testing {
namespace {

// The line y = 240 from x = 100 to 540: s = 440 (py - 240), so walking down is "in".
constexpr char kLines[] = "door:100,240,540,240";
constexpr char kZones[] = "waiting:100,400 540,400 540,470 100,470";
constexpr double kLoiteringTime = 1.0;  // seconds: 25 frames at 25 frames/s

// Where each person is on each frame (NaN x: not detected), and the score of the detection.
struct Walker {
  std::function<Person(int frame)> at;
};

Person missing() { return {NAN, NAN, 0}; }

// Straight from (x0, y0) at frame f0 to (x1, y1) at frame f1; not there outside [f0, f1].
std::function<Person(int)> straight(float x0, float y0, float x1, float y1, int f0, int f1) {
  return [=](int f) {
    if (f < f0 || f > f1) return missing();
    const float t = static_cast<float>(f - f0) / static_cast<float>(f1 - f0);
    return Person{x0 + t * (x1 - x0), y0 + t * (y1 - y0)};
  };
}

struct Scenario {
  const char *name;
  std::vector<Walker> walkers;
  int frames;
  // The truth.
  std::vector<std::string> events;  // "line-crossed door in", "zone-entered waiting", ...
  guint64 in, out;
  guint64 waiting_at_end;  // occupancy of the zone after the last frame
  guint64 loitering_at_end = 0;
};

struct Outcome {
  std::vector<std::string> events;
  std::set<gint64> event_tracks;
  guint64 in = 0, out = 0, waiting = 0, loitering = 0;
  guint64 labelled_in = 0, labelled_out = 0;  // the sums of the door's counts by label
  std::vector<double> dwell_s;  // of the zone-left and zone-loitering events, in order
};

// The scenario through the chain; what its JSON lines say.
Outcome run(const Scenario &s) {
  init_track_elements_once();
  gchar *dir = g_dir_make_tmp("counting-XXXXXX", nullptr);
  const std::string json = std::string(dir) + "/out.jsonl";
  const std::string launch = std::string("appsrc name=src format=time caps=\"") + kCaps +
                             "\" ! cudanms ! boxtrack ! boxcount lines=\"" + kLines +
                             "\" zones=\"" + kZones + "\" loitering-time=" +
                             std::to_string(kLoiteringTime) + " ! jsonmetawriter location=" + json +
                             " ! fakesink sync=false";
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(launch.c_str(), &error);
  EXPECT_NE(pipeline, nullptr) << (error ? error->message : "");
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  for (int f = 0; f < s.frames; f++) {
    std::vector<Person> people;
    for (const Walker &w : s.walkers) {
      const Person p = w.at(f);
      if (!std::isnan(p.x)) people.push_back(p);
    }
    EXPECT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), frame_of(people, f * kFrame)), GST_FLOW_OK);
  }
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  EXPECT_TRUE(end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS);
  if (end) gst_message_unref(end);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(src);
  gst_object_unref(pipeline);

  Outcome o;
  gchar *text = nullptr;
  EXPECT_TRUE(g_file_get_contents(json.c_str(), &text, nullptr, nullptr));
  std::istringstream lines(text ? text : "");
  std::string line;
  int frames = 0;
  while (std::getline(lines, line)) {
    frames++;
    JsonParser *parser = json_parser_new();
    EXPECT_TRUE(json_parser_load_from_data(parser, line.c_str(), -1, nullptr)) << line;
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    JsonArray *events = json_object_get_array_member(root, "events");
    for (guint i = 0; i < json_array_get_length(events); i++) {
      JsonObject *e = json_array_get_object_element(events, i);
      std::string event = std::string(json_object_get_string_member(e, "kind")) + " " +
                          json_object_get_string_member(e, "name");
      if (json_object_has_member(e, "direction"))
        event += std::string(" ") + json_object_get_string_member(e, "direction");
      o.events.push_back(event);
      o.event_tracks.insert(json_object_get_int_member(e, "track_id"));
      if (json_object_has_member(e, "dwell_s"))
        o.dwell_s.push_back(json_object_get_double_member(e, "dwell_s"));
    }
    JsonObject *counts = json_object_get_object_member(root, "counts");
    JsonObject *door =
        json_object_get_object_member(json_object_get_object_member(counts, "lines"), "door");
    o.in = json_object_get_int_member(door, "in");
    o.out = json_object_get_int_member(door, "out");
    JsonObject *by_label = json_object_get_object_member(door, "labels");
    o.labelled_in = o.labelled_out = 0;
    GList *labels = json_object_get_members(by_label);
    for (GList *l = labels; l; l = l->next) {
      JsonObject *n = json_object_get_object_member(by_label, static_cast<const char *>(l->data));
      o.labelled_in += json_object_get_int_member(n, "in");
      o.labelled_out += json_object_get_int_member(n, "out");
    }
    g_list_free(labels);
    JsonObject *waiting =
        json_object_get_object_member(json_object_get_object_member(counts, "zones"), "waiting");
    o.waiting = json_object_get_int_member_with_default(waiting, "0", 0);
    o.loitering = json_object_get_int_member(
        json_object_get_object_member(counts, "loitering"), "waiting");
    g_object_unref(parser);
  }
  EXPECT_EQ(frames, s.frames);
  g_free(text);
  g_unlink(json.c_str());
  g_rmdir(dir);
  g_free(dir);
  return o;
}

std::string joined(const std::vector<std::string> &v) {
  std::string out;
  for (const std::string &s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  out.push_back({"in and out",
                 {{straight(200, 150, 200, 330, 0, 45)}, {straight(400, 330, 400, 150, 0, 45)}},
                 50,
                 {"line-crossed door in", "line-crossed door out"},
                 1,
                 1,
                 0});
  // Down to the line, 30 frames jittering 6 px either side of it, then on down.
  out.push_back({"jitter on the line",
                 {{[](int f) {
                   if (f < 20) return Person{300, 160.0f + 4 * f};
                   if (f < 50) return Person{300, f % 2 ? 234.0f : 246.0f};
                   return Person{300, 246.0f + 4 * (f - 50)};
                 }}},
                 70,
                 {"line-crossed door in"},
                 1,
                 0,
                 0});
  // Not detected for 8 frames, the crossing among them.
  out.push_back({"missed while crossing",
                 {{[](int f) {
                   if (f >= 16 && f < 24) return missing();
                   return Person{300, 160.0f + 5 * f};
                 }}},
                 36,
                 {"line-crossed door in"},
                 1,
                 0,
                 0});
  // Two people walking through each other on the line, one down, one up.
  out.push_back({"paths crossing",
                 {{straight(150, 140, 450, 340, 0, 60)}, {straight(450, 340, 150, 140, 0, 60)}},
                 61,
                 {"line-crossed door in", "line-crossed door out"},
                 1,
                 1,
                 0});
  // Down to 2 px before the line, then back up.
  out.push_back({"turning back before the line",
                 {{[](int f) {
                   return f < 20 ? Person{300, 160.0f + 4 * f} : Person{300, 236.0f - 4 * (f - 20)};
                 }}},
                 40,
                 {},
                 0,
                 0,
                 0});
  // Scores of 0.3 for 12 frames around the crossing: ByteTrack's low boxes keep the track.
  out.push_back({"low scores mid-track",
                 {{[](int f) {
                   Person p{300, 160.0f + 4 * f};
                   if (f >= 14 and f < 26) p.score = 0.3f;
                   return p;
                 }}},
                 40,
                 {"line-crossed door in"},
                 1,
                 0,
                 0});
  // Two into the waiting zone: one stays (and loiters after kLoiteringTime), one leaves again
  // before that.
  out.push_back(
      {"zone",
       {{[](int f) {
          return Person{200, 200.0f + 5 * std::min(f, 48)};
        }},
        {[](int f) {
          return f < 48 ? Person{450, 200.0f + 5 * f} : Person{450, 440.0f - 5 * (f - 48)};
        }}},
       96,
       {"line-crossed door in", "line-crossed door in", "zone-entered waiting",
        "zone-entered waiting", "zone-left waiting", "zone-loitering waiting",
        "line-crossed door out"},
       2,
       1,
       1,
       1});
  return out;
}

TEST(CountingChain, EventsAndCountsEqualTheTruth) {
  std::ostringstream table;
  table << "| scenario | events (truth) | events (chain) | in | out | in the zone |\n"
        << "|---|---|---|---|---|---|\n";
  for (const Scenario &s : scenarios()) {
    SCOPED_TRACE(s.name);
    const Outcome o = run(s);
    std::vector<std::string> want = s.events, got = o.events;
    // Events of one frame come in the order of the boxes: compare them as a multiset when
    // several happen on a frame, their order otherwise (the scenarios keep frames apart).
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(o.in, s.in);
    EXPECT_EQ(o.out, s.out);
    EXPECT_EQ(o.labelled_in, s.in);  // every track here is a person: one label
    EXPECT_EQ(o.labelled_out, s.out);
    EXPECT_EQ(o.waiting, s.waiting_at_end);
    EXPECT_EQ(o.loitering, s.loitering_at_end);
    if (s.loitering_at_end) {  // the one who left stayed less than the loitering time
      ASSERT_EQ(o.dwell_s.size(), 2u);
      EXPECT_GT(o.dwell_s[0], 0.1);
      EXPECT_LT(o.dwell_s[0], kLoiteringTime);
      EXPECT_DOUBLE_EQ(o.dwell_s[1], kLoiteringTime);  // 25 frames of 40 ms
    }
    EXPECT_EQ(o.event_tracks.size(), s.walkers.size() == 1 && !s.events.empty() ? 1u
                                     : s.events.empty()                         ? 0u
                                                                                : s.walkers.size());
    table << "| " << s.name << " | " << joined(s.events) << " | " << joined(o.events) << " | "
          << o.in << " / " << s.in << " | " << o.out << " / " << s.out << " | " << o.waiting
          << " / " << s.waiting_at_end << " |\n";
  }
  std::cout << table.str();
}

}  // namespace
}  // namespace cudanms::testing
