// What every history (SQLite's, PostgreSQL's) must do, as test bodies each store's tests run.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "event_history.h"

namespace cudanms::service {

inline HistoryEvent history_event(const std::string &camera, guint64 id, gint64 time_s,
                                  const std::string &kind = "line-crossed",
                                  const std::string &label = "person") {
  HistoryEvent e;
  e.camera = camera, e.id = id, e.time_us = time_s * G_USEC_PER_SEC, e.kind = kind;
  e.name = kind == "line-crossed" ? "door" : "hall";
  e.direction = kind == "line-crossed" ? "in" : "";
  e.label = label, e.track_id = 100 + id, e.host = "host-a";
  if (kind == "zone-left") e.dwell_s = 2.5 + id;
  return e;
}

inline std::vector<HistoryEvent> history_page(EventHistory &h, const HistoryQuery &q) {
  std::vector<HistoryEvent> out;
  std::string error;
  EXPECT_TRUE(h.query(q, &out, &error)) << error;
  return out;
}

// Each event once by (camera, id), newest first, every filter and the pages.
inline void expect_each_event_once_newest_first(const std::string &where) {
  std::string error;
  auto h = EventHistory::open(where, &error);
  ASSERT_TRUE(h) << error;
  for (guint64 id = 0; id < 10; id++) h->add(history_event("door-cam", id, 1000 + id));
  h->add(history_event("yard", 0, 1005, "zone-entered", "car"));
  h->add(history_event("yard", 1, 1006, "zone-left", "car"));
  h->add(history_event("door-cam", 3, 1003));  // delivered again: written over, not added
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  EXPECT_EQ(h->stats().queued, 0u);

  std::vector<HistoryEvent> all = history_page(*h, HistoryQuery());
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[0].camera, "door-cam");
  EXPECT_EQ(all[0].id, 9u);
  EXPECT_EQ(all[0].host, "host-a");
  EXPECT_EQ(all[0].track_id, 109u);
  EXPECT_EQ(all[0].dwell_s, 0);
  for (size_t i = 1; i < all.size(); i++) EXPECT_GE(all[i - 1].time_us, all[i].time_us);

  HistoryQuery q;
  q.camera = "yard";
  ASSERT_EQ(history_page(*h, q).size(), 2u);
  q = HistoryQuery();
  q.kind = "zone-left";
  std::vector<HistoryEvent> left = history_page(*h, q);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_DOUBLE_EQ(left[0].dwell_s, 3.5);
  q = HistoryQuery();
  q.label = "car";
  EXPECT_EQ(history_page(*h, q)[0].camera, "yard");
  q = HistoryQuery();
  q.since_us = 1002 * G_USEC_PER_SEC, q.until_us = 1005 * G_USEC_PER_SEC;
  EXPECT_EQ(history_page(*h, q).size(), 3u) << "1002, 1003, 1004: since included, until not";

  // Pages of 4, each from the last event of the one before: every event once, in order.
  std::vector<HistoryEvent> paged;
  q = HistoryQuery();
  q.limit = 4;
  for (int pages = 0; pages < 10; pages++) {
    std::vector<HistoryEvent> p = history_page(*h, q);
    paged.insert(paged.end(), p.begin(), p.end());
    if (p.size() < 4) break;
    q.before_seq = p.back().seq;
  }
  ASSERT_EQ(paged.size(), all.size());
  for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(paged[i].seq, all[i].seq) << i;

  EXPECT_TRUE(h->has_camera("yard"));
  EXPECT_FALSE(h->has_camera("gate"));
}

// SQL injection strings in every filter find nothing and break nothing.
inline void expect_filters_are_text(const std::string &where) {
  std::string error;
  auto h = EventHistory::open(where, &error);
  ASSERT_TRUE(h) << error;
  const std::string evil = "x' OR '1'='1";
  h->add(history_event("door-cam", 1, 1000));
  h->add(history_event(evil, 2, 1001, "zone-left", "'; DROP TABLE events; --"));
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  for (const std::string &s : {std::string("' OR 1=1 --"), std::string("\"; DROP TABLE events;"),
                               std::string("%"), std::string("*")}) {
    HistoryQuery q;
    q.camera = s;
    EXPECT_TRUE(history_page(*h, q).empty()) << s;
    q = HistoryQuery();
    q.kind = s;
    EXPECT_TRUE(history_page(*h, q).empty()) << s;
    q = HistoryQuery();
    q.label = s;
    EXPECT_TRUE(history_page(*h, q).empty()) << s;
  }
  HistoryQuery q;
  q.camera = evil;  // a name with quotes is found as it is
  std::vector<HistoryEvent> found = history_page(*h, q);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].label, "'; DROP TABLE events; --");
  EXPECT_EQ(history_page(*h, HistoryQuery()).size(), 2u) << "the table is still there";
}

// An event's picture and clip: kept when it is delivered again without them, each found by its
// seq, each marked gone on its own when its file is removed.
inline void expect_files_kept_and_forgotten(const std::string &where) {
  std::string error;
  auto h = EventHistory::open(where, &error);
  ASSERT_TRUE(h) << error;
  HistoryEvent e = history_event("door-cam", 1, 1000);
  e.snapshot = "/events/door-cam/1.jpg", e.clip = "/events/door-cam/1.mp4";
  h->add(e);
  h->add(history_event("door-cam", 1, 1000));  // again, before its files were known
  HistoryEvent shared = history_event("door-cam", 2, 1001);
  shared.clip = e.clip;  // a second event in the same clip
  h->add(shared);
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  std::vector<HistoryEvent> all = history_page(*h, HistoryQuery());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].snapshot, e.snapshot);
  EXPECT_EQ(all[1].clip, e.clip);
  std::string path, host;
  ASSERT_TRUE(h->file_of(all[1].seq, EventFile::kClip, &path, &host));
  EXPECT_EQ(path, e.clip);
  EXPECT_EQ(host, "host-a");
  ASSERT_TRUE(h->forget_files({e.clip}, &error)) << error;
  all = history_page(*h, HistoryQuery());
  for (const HistoryEvent &gone : all) {
    EXPECT_TRUE(gone.clip_gone) << gone.id;
    EXPECT_FALSE(gone.snapshot_gone) << gone.id;
    EXPECT_FALSE(h->file_of(gone.seq, EventFile::kClip, &path, &host)) << gone.id;
  }
  EXPECT_TRUE(h->file_of(all[1].seq, EventFile::kSnapshot, &path, &host));
  EXPECT_EQ(path, e.snapshot);
}

}  // namespace cudanms::service
