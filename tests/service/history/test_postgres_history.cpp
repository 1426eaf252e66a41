// The events' history in a real PostgreSQL server the test starts itself (Debian's
// postgresql-15, initdb in a folder of its own, 127.0.0.1 and a free port): what the SQLite
// history does, a server stopped and killed mid-stream that never holds add() and loses no
// event, and two hosts writing one camera's events (a camera that moved) into one history.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "event_history.h"
#include "history_cases.h"
#include "pipelines/script_support.h"
#include "support/postgres_server.h"

namespace cudanms::service {
namespace {

using cudanms::testing::PostgresServer;
using cudanms::testing::TempDir;

class PostgresHistory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresServer::bin_dir().empty())
      GTEST_SKIP() << "no PostgreSQL server (Debian's postgresql-15: ./run.sh test installs it)";
    server_ = std::make_unique<PostgresServer>(dir_.path);
    std::string why;
    ASSERT_TRUE(server_->start(&why)) << why;
  }

  TempDir dir_;
  std::unique_ptr<PostgresServer> server_;
};

TEST_F(PostgresHistory, EachEventOnceNewestFirstAndEveryFilter) {
  expect_each_event_once_newest_first(server_->uri());
}

TEST_F(PostgresHistory, FiltersAreTextNotSql) { expect_filters_are_text(server_->uri()); }

TEST_F(PostgresHistory, PicturesAndClipsAreKeptAndForgotten) {
  expect_files_kept_and_forgotten(server_->uri());
}

// Events added all along while the server is stopped (SIGSTOP: its connections stay, nothing
// answers) and then killed (SIGKILL) and started again: add() never waits for it, the events
// wait in the queue, and every one is in the history once after, none twice.
TEST_F(PostgresHistory, AServerStoppedOrKilledNeverHoldsAddAndLosesNoEvent) {
  std::string error;
  auto h = EventHistory::open(server_->uri(), &error);
  ASSERT_TRUE(h) << error;
  std::atomic<bool> adding{true};
  std::atomic<gint64> slowest_add_us{0};
  std::atomic<guint64> added{0};
  std::thread camera([&] {
    for (guint64 id = 0; adding; id++) {
      const gint64 start = g_get_monotonic_time();
      h->add(history_event("door", id, 1000 + static_cast<gint64>(id)));
      const gint64 took = g_get_monotonic_time() - start;
      if (took > slowest_add_us) slowest_add_us = took;
      added = id + 1;
      g_usleep(2000);  // ~500 events/s
    }
  });
  g_usleep(500000);
  server_->pause();
  g_usleep(2 * G_USEC_PER_SEC);
  const guint64 queued_while_stopped = h->stats().queued;
  server_->resume();
  g_usleep(500000);
  server_->kill();
  g_usleep(1500000);
  const HistoryStats while_down = h->stats();
  std::string why;
  ASSERT_TRUE(server_->start(&why)) << why;
  g_usleep(500000);
  adding = false;
  camera.join();
  ASSERT_TRUE(h->flush(20 * G_USEC_PER_SEC)) << "queued " << h->stats().queued;

  EXPECT_GT(queued_while_stopped, 100u) << "the stopped server's events should have waited";
  EXPECT_GT(while_down.failures, 0u) << "the killed server should have refused batches";
  EXPECT_EQ(h->stats().dropped, 0u);
  EXPECT_LT(slowest_add_us.load(), G_USEC_PER_SEC) << "add() waited for the database";
  HistoryQuery all;
  all.limit = 1000;
  std::set<guint64> ids;
  std::vector<HistoryEvent> page;
  for (;;) {
    page = history_page(*h, all);
    for (const HistoryEvent &e : page) EXPECT_TRUE(ids.insert(e.id).second) << "twice: " << e.id;
    if (page.size() < 1000) break;
    all.before_seq = page.back().seq;
  }
  ASSERT_EQ(ids.size(), added.load());
  EXPECT_EQ(*ids.rbegin() + 1, added.load()) << "ids 0.. each once";
  std::printf(
      "%llu events, %llu queued while the server was stopped, %llu batches refused "
      "while it was down, slowest add() %lld us\n",
      static_cast<unsigned long long>(added.load()),
      static_cast<unsigned long long>(queued_while_stopped),
      static_cast<unsigned long long>(while_down.failures),
      static_cast<long long>(slowest_add_us.load()));
}

// A camera counted on host a, then moved to host b, which delivers its last events again: one
// history of the camera on either host's page, each event once, the redelivered ones b's.
TEST_F(PostgresHistory, ACameraThatMovesKeepsOneHistory) {
  std::string error;
  auto a = EventHistory::open(server_->uri(), &error);
  ASSERT_TRUE(a) << error;
  auto b = EventHistory::open(server_->uri(), &error);
  ASSERT_TRUE(b) << error;
  for (guint64 id = 0; id < 100; id++) a->add(history_event("door", id, 1000 + id));
  ASSERT_TRUE(a->flush(5 * G_USEC_PER_SEC));
  for (guint64 id = 90; id < 150; id++) {
    HistoryEvent e = history_event("door", id, 1000 + id);
    e.host = "host-b";
    b->add(e);
  }
  ASSERT_TRUE(b->flush(5 * G_USEC_PER_SEC));
  HistoryQuery q;
  q.camera = "door";
  q.limit = 1000;
  for (EventHistory *h : {a.get(), b.get()}) {
    const std::vector<HistoryEvent> seen = history_page(*h, q);
    ASSERT_EQ(seen.size(), 150u);
    std::set<guint64> ids;
    for (const HistoryEvent &e : seen) {
      ids.insert(e.id);
      EXPECT_EQ(e.host, e.id >= 90 ? "host-b" : "host-a") << e.id;
    }
    EXPECT_EQ(ids.size(), 150u);
  }
}

// A server that is not there, and a password: the error says where, without the password.
TEST_F(PostgresHistory, AnAbsentServerIsAnErrorWithoutThePassword) {
  const int port = cudanms::testing::free_port();
  const std::string uri =
      "postgresql://cudanms:hunter2@127.0.0.1:" + std::to_string(port) + "/postgres";
  std::string error;
  EXPECT_FALSE(EventHistory::open(uri, &error));
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << error;
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
}

}  // namespace
}  // namespace cudanms::service
