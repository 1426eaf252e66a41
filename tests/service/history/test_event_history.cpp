// The events' history in a real SQLite file of the test's own: written off the caller's thread,
// each event once by (camera, id), paged newest first with every filter, filters that are text
// only (SQL injection strings find nothing and break nothing), and a database locked by another
// process's transaction that never holds add().
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "event_history.h"

namespace cudanms::service {
namespace {

class History : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = g_dir_make_tmp("history-XXXXXX", nullptr);
    path_ = std::string(dir_) + "/history.sqlite";
  }
  void TearDown() override {
    for (const char *suffix : {"", "-wal", "-shm"}) g_remove((path_ + suffix).c_str());
    g_rmdir(dir_);
    g_free(dir_);
  }
  static HistoryEvent event(const std::string &camera, guint64 id, gint64 time_s,
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
  std::vector<HistoryEvent> page(EventHistory &h, const HistoryQuery &q) {
    std::vector<HistoryEvent> out;
    std::string error;
    EXPECT_TRUE(h.query(q, &out, &error)) << error;
    return out;
  }

  gchar *dir_ = nullptr;
  std::string path_;
};

TEST_F(History, EachEventOnceNewestFirstAndEveryFilter) {
  std::string error;
  auto h = EventHistory::open(path_, &error);
  ASSERT_TRUE(h) << error;
  for (guint64 id = 0; id < 10; id++) h->add(event("door-cam", id, 1000 + id));
  h->add(event("yard", 0, 1005, "zone-entered", "car"));
  h->add(event("yard", 1, 1006, "zone-left", "car"));
  h->add(event("door-cam", 3, 1003));  // delivered again: written over, not added
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  EXPECT_EQ(h->stats().queued, 0u);

  std::vector<HistoryEvent> all = page(*h, HistoryQuery());
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[0].camera, "door-cam");
  EXPECT_EQ(all[0].id, 9u);
  EXPECT_EQ(all[0].host, "host-a");
  EXPECT_EQ(all[0].track_id, 109u);
  EXPECT_EQ(all[0].dwell_s, 0);
  for (size_t i = 1; i < all.size(); i++) EXPECT_GE(all[i - 1].time_us, all[i].time_us);

  HistoryQuery q;
  q.camera = "yard";
  ASSERT_EQ(page(*h, q).size(), 2u);
  q = HistoryQuery();
  q.kind = "zone-left";
  std::vector<HistoryEvent> left = page(*h, q);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_DOUBLE_EQ(left[0].dwell_s, 3.5);
  q = HistoryQuery();
  q.label = "car";
  EXPECT_EQ(page(*h, q)[0].camera, "yard");
  q = HistoryQuery();
  q.since_us = 1002 * G_USEC_PER_SEC, q.until_us = 1005 * G_USEC_PER_SEC;
  EXPECT_EQ(page(*h, q).size(), 3u) << "1002, 1003, 1004: since included, until not";

  // Pages of 4, each from the last event of the one before: every event once, in order.
  std::vector<HistoryEvent> paged;
  q = HistoryQuery();
  q.limit = 4;
  for (int pages = 0; pages < 10; pages++) {
    std::vector<HistoryEvent> p = page(*h, q);
    paged.insert(paged.end(), p.begin(), p.end());
    if (p.size() < 4) break;
    q.before_seq = p.back().seq;
  }
  ASSERT_EQ(paged.size(), all.size());
  for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(paged[i].seq, all[i].seq) << i;

  EXPECT_TRUE(h->has_camera("yard"));
  EXPECT_FALSE(h->has_camera("gate"));
}

TEST_F(History, FiltersAreTextNotSql) {
  std::string error;
  auto h = EventHistory::open(path_, &error);
  ASSERT_TRUE(h) << error;
  const std::string evil = "x' OR '1'='1";
  h->add(event("door-cam", 1, 1000));
  h->add(event(evil, 2, 1001, "zone-left", "'; DROP TABLE events; --"));
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  for (const std::string &s : {std::string("' OR 1=1 --"), std::string("\"; DROP TABLE events;"),
                               std::string("%"), std::string("*")}) {
    HistoryQuery q;
    q.camera = s;
    EXPECT_TRUE(page(*h, q).empty()) << s;
    q = HistoryQuery();
    q.kind = s;
    EXPECT_TRUE(page(*h, q).empty()) << s;
    q = HistoryQuery();
    q.label = s;
    EXPECT_TRUE(page(*h, q).empty()) << s;
  }
  HistoryQuery q;
  q.camera = evil;  // a name with quotes is found as it is
  std::vector<HistoryEvent> found = page(*h, q);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].label, "'; DROP TABLE events; --");
  EXPECT_EQ(page(*h, HistoryQuery()).size(), 2u) << "the table is still there";
}

// Another process holds the database's write lock (a transaction left open): events keep being
// added at once, wait in the queue (counted), and are all written once the lock goes.
TEST_F(History, ALockedDatabaseNeverHoldsAdd) {
  std::string error;
  auto h = EventHistory::open(path_, &error, 1000);
  ASSERT_TRUE(h) << error;
  sqlite3 *other = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const gint64 start = g_get_monotonic_time();
  for (guint64 id = 0; id < 1200; id++) h->add(event("door-cam", id, 1000 + id));
  const gint64 adding_us = g_get_monotonic_time() - start;
  EXPECT_LT(adding_us, 500 * 1000) << "add() waited for the database";
  g_usleep(600 * 1000);  // the writer tried and failed meanwhile
  HistoryStats stats = h->stats();
  EXPECT_EQ(stats.written, 0u);
  EXPECT_EQ(stats.queued, 1000u);
  EXPECT_EQ(stats.dropped, 200u) << "past the queue's bound";
  EXPECT_GE(stats.failures, 1u);
  EXPECT_FALSE(stats.last_error.empty());
  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  ASSERT_TRUE(h->flush(10 * G_USEC_PER_SEC));
  stats = h->stats();
  EXPECT_EQ(stats.written, 1000u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(page(*h, HistoryQuery()).size(), 100u) << "the default page";
}

// Written by one history, read by another on the same file (a supervisor reading what its
// workers wrote), and kept across a restart.
TEST_F(History, AnotherProcessReadsWhatOneWrote) {
  std::string error;
  {
    auto writer = EventHistory::open(path_, &error);
    ASSERT_TRUE(writer) << error;
    writer->add(event("door-cam", 7, 1000));
  }  // written before it closes
  auto reader = EventHistory::open(path_, &error);
  ASSERT_TRUE(reader) << error;
  std::vector<HistoryEvent> all = page(*reader, HistoryQuery());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, 7u);
}

// A history written before events had pictures: opened, it gains their column, its events kept.
TEST_F(History, AnOlderHistoryGainsPicturesAndKeepsItsEvents) {
  sqlite3 *db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE events (seq INTEGER PRIMARY KEY, camera TEXT NOT NULL,"
                         " id INTEGER NOT NULL, time_us INTEGER NOT NULL, kind TEXT NOT NULL,"
                         " name TEXT NOT NULL, direction TEXT NOT NULL, label TEXT NOT NULL,"
                         " track_id INTEGER NOT NULL, dwell_s REAL NOT NULL, host TEXT NOT NULL,"
                         " UNIQUE (camera, id));"
                         "INSERT INTO events VALUES (1, 'door-cam', 7, 1000000000, 'line-crossed',"
                         " 'door', 'in', 'person', 107, 0, 'host-a');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  std::string error;
  auto h = EventHistory::open(path_, &error);
  ASSERT_TRUE(h) << error;
  HistoryEvent pictured = event("door-cam", 8, 1001);
  pictured.snapshot = std::string(dir_) + "/door-cam/8.jpg";
  h->add(pictured);
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  const auto events = page(*h, {});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].snapshot, pictured.snapshot);
  EXPECT_EQ(events[1].id, 7u);
  EXPECT_EQ(events[1].snapshot, "");
  std::string path;
  EXPECT_TRUE(h->snapshot_of(events[0].seq, &path));
  EXPECT_EQ(path, pictured.snapshot);
  EXPECT_FALSE(h->snapshot_of(events[1].seq, &path));
  h.reset();
  ASSERT_TRUE(EventHistory::open(path_, &error)) << error;  // opened again: nothing to add
}

TEST_F(History, AFileThatIsNoDatabaseIsAnError) {
  ASSERT_TRUE(g_file_set_contents(path_.c_str(),
                                  "not a database, but long enough to be read as "
                                  "one and found to be none at all.............",
                                  -1, nullptr));
  std::string error;
  EXPECT_FALSE(EventHistory::open(path_, &error));
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_FALSE(EventHistory::open(std::string(dir_) + "/no/such/dir/h.sqlite", &error));
}

}  // namespace
}  // namespace cudanms::service
