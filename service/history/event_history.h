// The history room: the counting events a host saw (line crossed, zone entered, left, loitered),
// kept so that an operator can look back on them (issue 68: searched and paged here, each with
// its picture where the host makes them, removed past their bounds (picture_retention.h); clips
// to come).
//
// In SQLite, one file a host (a supervisor's workers write into the same file), or in PostgreSQL,
// one database for a fleet's hosts (history_store.h). Each event once by (camera, id): the ids a
// camera's counts carry, so that an event delivered again (at least once) is written over, not
// added. Writes run on a thread of their own in batches, one transaction each; add() never waits
// for the database: a database locked, slow or unwritable leaves events in a bounded queue (their
// number and the ones dropped past the bound are counted) and they are written once it answers.
#pragma once

#include <glib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "history_store.h"

namespace cudanms::service {

struct HistoryStats {
  guint64 written = 0;   // events written (an event delivered again counts again)
  guint64 queued = 0;    // waiting for the database now
  guint64 dropped = 0;   // past the queue's bound, lost
  guint64 failures = 0;  // batches the database refused (then tried again)
  std::string last_error;
};

class EventHistory {
 public:
  static constexpr size_t kDefaultQueue = 100000;
  // The history at `where` (history_store.h: a SQLite file, or a PostgreSQL URI); nullptr with
  // the reason when it cannot be opened or is no history.
  static std::unique_ptr<EventHistory> open(const std::string &where, std::string *error,
                                            size_t queue_limit = kDefaultQueue);
  // What is queued written first: for as long as the database takes, 5 s at most once it fails
  // (the rest counted as dropped).
  ~EventHistory();
  EventHistory(const EventHistory &) = delete;
  EventHistory &operator=(const EventHistory &) = delete;

  // Queued for the writer: false (counted as dropped) when the queue is full. Never waits for
  // the database.
  bool add(HistoryEvent event);
  // Until every event added before the call is written (or `timeout_us` passed): true when it is.
  bool flush(gint64 timeout_us);
  // A page of events, newest first (SQL with bound parameters only); false with the reason.
  bool query(const HistoryQuery &query, std::vector<HistoryEvent> *out, std::string *error);
  // Each line's crossings per hour (UTC), oldest first, of `query`'s camera (or every camera)
  // and times (its other filters and its page are not used); false with the reason.
  bool hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out, std::string *error);
  // Whether any event of `camera` is kept.
  bool has_camera(const std::string &camera);
  // The picture's or the clip's file of the event at `seq` (*path) and the host that made it
  // (*host: on its disk; "" for one not in a fleet); false: no such event, or it has none, or it
  // is gone.
  bool file_of(gint64 seq, EventFile file, std::string *path, std::string *host);
  // The events whose pictures or clips are these files marked as gone (their files removed, or
  // a clip never finished); false with the reason when the database refused.
  bool forget_files(const std::vector<std::string> &paths, std::string *error);
  HistoryStats stats() const;

 private:
  EventHistory(std::unique_ptr<HistoryStore> store, size_t queue_limit);
  void write_batches();  // the writer thread

  const std::unique_ptr<HistoryStore> store_;
  const size_t queue_limit_;
  mutable std::mutex lock_;  // guards what follows
  std::condition_variable woken_, written_;
  std::deque<HistoryEvent> queue_;
  guint64 added_ = 0, done_ = 0;  // events added, and taken out of the queue written
  HistoryStats stats_;
  bool stopping_ = false;
  gint64 stopped_us_ = 0;
  std::thread thread_;
};

// A host's history at `where` ("": none), or nullptr with the reason logged: a history that
// cannot be opened leaves the cameras running, their events unkept.
std::shared_ptr<EventHistory> open_host_history(const std::string &where);

}  // namespace cudanms::service
