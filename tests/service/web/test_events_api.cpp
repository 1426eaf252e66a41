// GET /api/events without a server: every filter's bad form a 400 with the reason, an unknown
// camera or a host without a history a 404, a page's JSON and its cursor, and injection strings
// in every filter found as text.
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <memory>
#include <string>

#include "events_api.h"

namespace cudanms::service {
namespace {

class EventsApi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = g_dir_make_tmp("events-api-XXXXXX", nullptr);
    path_ = std::string(dir_) + "/history.sqlite";
    std::string error;
    history_ = EventHistory::open(path_, &error);
    ASSERT_TRUE(history_) << error;
    for (guint64 id = 0; id < 5; id++) {
      HistoryEvent e;
      e.camera = "door", e.id = id, e.time_us = (1765000000 + id) * G_USEC_PER_SEC;
      e.kind = "line-crossed", e.name = "entry", e.direction = "in", e.label = "person";
      e.track_id = 40 + id;
      history_->add(e);
    }
    ASSERT_TRUE(history_->flush(5 * G_USEC_PER_SEC));
  }
  void TearDown() override {
    history_.reset();
    for (const char *suffix : {"", "-wal", "-shm"}) g_remove((path_ + suffix).c_str());
    g_rmdir(dir_);
    g_free(dir_);
  }
  Reply get_path(const std::string &path) {
    return events_reply(history_.get(), path,
                        [](const std::string &name) { return name == "yard"; });
  }
  Reply get(const std::string &query) {
    return events_reply(history_.get(), "/api/events" + (query.empty() ? "" : "?" + query),
                        [](const std::string &name) { return name == "yard"; });
  }
  // The page's events' ids, and its next_before (-1: null).
  std::vector<gint64> ids(const Reply &reply, gint64 *next = nullptr) {
    std::vector<gint64> out;
    JsonParser *parser = json_parser_new();
    EXPECT_TRUE(json_parser_load_from_data(parser, reply.body.c_str(), -1, nullptr)) << reply.body;
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    JsonArray *events = json_object_get_array_member(root, "events");
    for (guint i = 0; i < json_array_get_length(events); i++)
      out.push_back(json_object_get_int_member(json_array_get_object_element(events, i), "id"));
    if (next) {
      JsonNode *n = json_object_get_member(root, "next_before");
      *next = JSON_NODE_HOLDS_NULL(n) ? -1 : json_node_get_int(n);
    }
    g_object_unref(parser);
    return out;
  }

  gchar *dir_ = nullptr;
  std::string path_;
  std::unique_ptr<EventHistory> history_;
};

// An event's picture: its URL in the page, its bytes at the URL; none, or a file gone, a 404.
TEST_F(EventsApi, AnEventsPictureIsServedAtItsUrl) {
  const std::string picture = std::string(dir_) + "/door-4.jpg";
  ASSERT_TRUE(g_file_set_contents(picture.c_str(), "\xff\xd8 a jpeg", -1, nullptr));
  HistoryEvent e;
  e.camera = "door", e.id = 4, e.time_us = G_GINT64_CONSTANT(1765000004) * G_USEC_PER_SEC;
  e.kind = "line-crossed", e.name = "entry", e.direction = "in", e.label = "person";
  e.track_id = 44, e.snapshot = picture;
  history_->add(e);
  e.snapshot = "";  // delivered again without it: it keeps its picture
  history_->add(e);
  ASSERT_TRUE(history_->flush(5 * G_USEC_PER_SEC));

  const Reply page = get("limit=2");
  ASSERT_EQ(page.status, 200u);
  // Newest first: event 4 (seq 5) with its picture, event 3 without.
  EXPECT_NE(page.body.find("\"snapshot\" : \"/api/events/5/snapshot\""), std::string::npos)
      << page.body;
  EXPECT_NE(page.body.find("\"snapshot\" : null"), std::string::npos) << page.body;
  ASSERT_TRUE(is_events_path("/api/events/5/snapshot"));
  const Reply jpeg = get_path("/api/events/5/snapshot");
  EXPECT_EQ(jpeg.status, 200u);
  EXPECT_STREQ(jpeg.type.c_str(), "image/jpeg");
  EXPECT_EQ(jpeg.body, "\xff\xd8 a jpeg");
  EXPECT_EQ(get_path("/api/events/4/snapshot").status, 404u);   // no picture
  EXPECT_EQ(get_path("/api/events/99/snapshot").status, 404u);  // no such event
  EXPECT_FALSE(is_events_path("/api/events/x/snapshot"));

  g_remove(picture.c_str());
  const Reply gone = get_path("/api/events/5/snapshot");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_NE(gone.body.find("gone"), std::string::npos) << gone.body;

  // Removed by retention: the event stays, its picture marked gone.
  std::string why;
  ASSERT_TRUE(history_->forget_files({picture}, &why)) << why;
  const Reply after = get("limit=1");
  EXPECT_NE(after.body.find("\"snapshot\" : null"), std::string::npos) << after.body;
  EXPECT_NE(after.body.find("\"snapshot_gone\" : true"), std::string::npos) << after.body;
  EXPECT_EQ(get_path("/api/events/5/snapshot").status, 404u);
  history_->add(e);  // delivered again: still gone
  ASSERT_TRUE(history_->flush(5 * G_USEC_PER_SEC));
  EXPECT_NE(get("limit=1").body.find("\"snapshot_gone\" : true"), std::string::npos);
}

// An event's clip: its URL in the page; 503 while it is recorded (its temporary file), its bytes
// once whole, 404 with the reason once gone or never finished.
TEST_F(EventsApi, AnEventsClipIsServedOnceWhole) {
  const std::string clip = std::string(dir_) + "/door-4.mp4";
  HistoryEvent e;
  e.camera = "door", e.id = 4, e.time_us = G_GINT64_CONSTANT(1765000004) * G_USEC_PER_SEC;
  e.kind = "line-crossed", e.name = "entry", e.direction = "in", e.label = "person";
  e.track_id = 44, e.clip = clip;
  history_->add(e);
  ASSERT_TRUE(history_->flush(5 * G_USEC_PER_SEC));
  const Reply page = get("limit=2");
  EXPECT_NE(page.body.find("\"clip\" : \"/api/events/5/clip\""), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("\"clip\" : null"), std::string::npos) << page.body;  // event 3
  ASSERT_TRUE(is_events_path("/api/events/5/clip"));

  ASSERT_TRUE(g_file_set_contents((clip + ".part").c_str(), "half", -1, nullptr));
  const Reply recording = get_path("/api/events/5/clip");
  EXPECT_EQ(recording.status, 503u);
  EXPECT_NE(recording.body.find("still being recorded"), std::string::npos) << recording.body;
  ASSERT_EQ(g_rename((clip + ".part").c_str(), clip.c_str()), 0);
  const Reply mp4 = get_path("/api/events/5/clip");
  EXPECT_EQ(mp4.status, 200u);
  EXPECT_STREQ(mp4.type.c_str(), "video/mp4");
  EXPECT_EQ(mp4.file, clip);  // the endpoint reads it, whole or the part a Range asks for
  EXPECT_EQ(get_path("/api/events/4/clip").status, 404u);  // none

  g_remove(clip.c_str());  // a host killed mid-clip: no file, no temporary one
  const Reply unfinished = get_path("/api/events/5/clip");
  EXPECT_EQ(unfinished.status, 404u);
  EXPECT_NE(unfinished.body.find("never finished"), std::string::npos) << unfinished.body;
  std::string why;
  ASSERT_TRUE(history_->forget_files({clip}, &why)) << why;
  EXPECT_NE(get("limit=1").body.find("\"clip_gone\" : true"), std::string::npos);
}

TEST_F(EventsApi, BadFiltersAreTheirReasons) {
  const std::pair<const char *, const char *> cases[] = {
      {"since=yesterday", "since: not a time"},
      {"until=2026-13-01T00:00:00Z", "until: not a time"},
      {"since=2026-12-06T03:00:00", "since: not a time"},  // no zone: which 3 am?
      {"limit=0", "limit: 1 to 1000"},
      {"limit=1001", "limit: 1 to 1000"},
      {"limit=ten", "limit: 1 to 1000"},
      {"before=-3", "before: an event's seq"},
      {"kind=jumped", "kind: line-crossed"},
      {"cmaera=door", "no parameter \\\"cmaera\\\""},  // quotes escaped in JSON
      {"camera=%ZZ", "the query"},
  };
  for (const auto &[query, why] : cases) {
    const Reply reply = get(query);
    EXPECT_EQ(reply.status, 400) << query;
    EXPECT_NE(reply.body.find(why), std::string::npos) << query << ": " << reply.body;
  }
  EXPECT_EQ(get("camera=gate").status, 404);
  EXPECT_NE(get("camera=gate").body.find("no camera \\\"gate\\\""), std::string::npos)
      << get("camera=gate").body;
  EXPECT_EQ(get("camera=yard").status, 200) << "a configured camera without events yet";
  EXPECT_EQ(events_reply(nullptr, "/api/events", [](const std::string &) { return true; }).status,
            404);
}

TEST_F(EventsApi, PagesNewestFirstWithTheirCursor) {
  gint64 next = 0;
  EXPECT_EQ(ids(get("camera=door&limit=2"), &next), (std::vector<gint64>{4, 3}));
  ASSERT_GT(next, 0);
  EXPECT_EQ(ids(get("camera=door&limit=2&before=" + std::to_string(next)), &next),
            (std::vector<gint64>{2, 1}));
  EXPECT_EQ(ids(get("camera=door&limit=2&before=" + std::to_string(next)), &next),
            (std::vector<gint64>{0}));
  EXPECT_EQ(next, -1) << "the last page";
  // Times as ISO 8601 and as seconds since 1970: [1765000001, 1765000003).
  EXPECT_EQ(ids(get("since=1765000001&until=2025-12-06T05:46:43Z")), (std::vector<gint64>{2, 1}));
  EXPECT_EQ(ids(get("kind=line-crossed&label=person")).size(), 5u);
  EXPECT_TRUE(ids(get("label=car")).empty());
}

// The page's chart: each line's crossings per hour, in and out apart.
TEST_F(EventsApi, HourlyCrossingsPerLine) {
  HistoryEvent out;
  out.camera = "door", out.id = 10, out.time_us = 1765000000LL * G_USEC_PER_SEC + 3600000000LL;
  out.kind = "line-crossed", out.name = "entry", out.direction = "out", out.label = "person";
  history_->add(out);
  HistoryEvent zone = out;
  zone.id = 11, zone.kind = "zone-entered", zone.name = "hall", zone.direction = "";
  history_->add(zone);  // no crossing: not charted
  ASSERT_TRUE(history_->flush(5 * G_USEC_PER_SEC));
  const Reply reply = get_path("/api/events/hourly?camera=door");
  ASSERT_EQ(reply.status, 200) << reply.body;
  JsonParser *parser = json_parser_new();
  ASSERT_TRUE(json_parser_load_from_data(parser, reply.body.c_str(), -1, nullptr));
  JsonArray *hours =
      json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "hours");
  ASSERT_EQ(json_array_get_length(hours), 2u) << reply.body;
  JsonObject *first = json_array_get_object_element(hours, 0);
  EXPECT_EQ(json_object_get_int_member(first, "hour"), 1765000000 / 3600 * 3600);
  EXPECT_STREQ(json_object_get_string_member(first, "line"), "entry");
  EXPECT_EQ(json_object_get_int_member(first, "in"), 5);
  EXPECT_EQ(json_object_get_int_member(first, "out"), 0);
  JsonObject *second = json_array_get_object_element(hours, 1);
  EXPECT_EQ(json_object_get_int_member(second, "hour") - json_object_get_int_member(first, "hour"),
            3600);
  EXPECT_EQ(json_object_get_int_member(second, "out"), 1);
  g_object_unref(parser);
  EXPECT_EQ(get_path("/api/events/hourly?kind=zone-left").status, 400) << "not its filter";
  EXPECT_EQ(get_path("/api/events/hourly?since=soon").status, 400);
  EXPECT_EQ(get_path("/api/events/hourly?camera=gate").status, 404);
  EXPECT_TRUE(is_events_path("/api/events/hourly?camera=door"));
  EXPECT_FALSE(is_events_path("/api/eventsx"));
  EXPECT_FALSE(is_events_path("/api/events/other"));
}

TEST_F(EventsApi, InjectionStringsInEveryFilterAreText) {
  for (const char *evil : {"'%20OR%201=1%20--", "door'%3B%20DROP%20TABLE%20events%3B%20--",
                           "%22)%20OR%20(%221%22=%221"}) {
    for (const char *filter : {"camera", "label"}) {
      const Reply reply = get(std::string(filter) + "=" + evil);
      EXPECT_TRUE(reply.status == 200 || reply.status == 404) << filter << evil;
      if (reply.status == 200) {
        EXPECT_TRUE(ids(reply).empty()) << filter << evil;
      }
    }
    EXPECT_EQ(get(std::string("kind=") + evil).status, 400);
    EXPECT_EQ(get(std::string("since=") + evil).status, 400);
    EXPECT_EQ(get(std::string("before=") + evil).status, 400);
  }
  EXPECT_EQ(ids(get("")).size(), 5u) << "the history is whole";
}

}  // namespace
}  // namespace cudanms::service
