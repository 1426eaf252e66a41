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
#include "history_cases.h"

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
    return history_event(camera, id, time_s, kind, label);
  }
  std::vector<HistoryEvent> page(EventHistory &h, const HistoryQuery &q) {
    return history_page(h, q);
  }

  gchar *dir_ = nullptr;
  std::string path_;
};

TEST_F(History, EachEventOnceNewestFirstAndEveryFilter) {
  expect_each_event_once_newest_first(path_);
}

TEST_F(History, FiltersAreTextNotSql) { expect_filters_are_text(path_); }

TEST_F(History, PicturesAndClipsAreKeptAndForgotten) { expect_files_kept_and_forgotten(path_); }

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
  pictured.clip = std::string(dir_) + "/door-cam/8.mp4";
  h->add(pictured);
  ASSERT_TRUE(h->flush(5 * G_USEC_PER_SEC));
  const auto events = page(*h, {});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].snapshot, pictured.snapshot);
  EXPECT_EQ(events[0].clip, pictured.clip);
  EXPECT_EQ(events[1].id, 7u);
  EXPECT_EQ(events[1].snapshot, "");
  std::string path, host;
  EXPECT_TRUE(h->file_of(events[0].seq, EventFile::kSnapshot, &path, &host));
  EXPECT_EQ(path, pictured.snapshot);
  EXPECT_EQ(host, pictured.host);
  EXPECT_FALSE(h->file_of(events[1].seq, EventFile::kSnapshot, &path, &host));
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
