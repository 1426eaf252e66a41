// The history room: the counting events a host saw (line crossed, zone entered, left, loitered),
// kept in SQLite so that an operator can look back on them (issue 68: searched and paged here,
// each with its picture where the host makes them, removed past their bounds
// (picture_retention.h); clips and PostgreSQL to come).
//
// One file a host; a supervisor's workers write into the same file (SQLite's locking between
// them, WAL so that readers never wait for a writer). Each event once by (camera, id): the ids a
// camera's counts carry, so that an event delivered again (at least once) is written over, not
// added. Writes run on a thread of their own in batches, one transaction each; add() never waits
// for the database: a database locked, slow or unwritable leaves events in a bounded queue (their
// number and the ones dropped past the bound are counted) and they are written once it answers.
#pragma once

#include <glib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace cudanms::service {

// A counting event as a camera's outputs keep it (the page lists the newest, web.h).
struct CountEvent {
  guint64 id = 0;         // the camera's event id
  gint64 time_us = 0;     // g_get_real_time() when counted
  std::string kind;       // line-crossed, zone-entered, zone-left, zone-loitering
  std::string name;       // the line's or the zone's
  std::string direction;  // a line's: in or out
  std::string label;
  guint64 track_id = 0;
  double dwell_s = 0;  // zone-left, zone-loitering: seconds since the track entered the zone
};

// One in the history.
struct HistoryEvent : CountEvent {
  std::string camera;
  std::string host;            // the host that counted it ("" for one not in a fleet)
  std::string snapshot;        // its picture's file (the camera's outputs make it); "" for none
  bool snapshot_gone = false;  // that file removed since (retention)
  gint64 seq = 0;              // set by query(): its place in the history, the pages' cursor
};

// A page of the history, newest first; every filter optional.
struct HistoryQuery {
  std::optional<std::string> camera, kind, label;
  std::optional<gint64> since_us, until_us;  // time_us >= since, < until
  std::optional<gint64> before_seq;          // older than this event (the last of a page)
  int limit = 100;
};

// A line's crossings in one hour (UTC), as the page charts them.
struct HourlyCrossings {
  gint64 hour_s = 0;  // the hour's start, seconds since 1970
  std::string camera, line;
  guint64 in = 0, out = 0;
};

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
  // The history in the SQLite file at `path` (made with its table where there is none); nullptr
  // with the reason when it cannot be opened or is no history.
  static std::unique_ptr<EventHistory> open(const std::string &path, std::string *error,
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
  // The picture's file of the event at `seq` (*path; false: no such event, or it has none, or
  // it is gone).
  bool snapshot_of(gint64 seq, std::string *path);
  // The events whose pictures are these files marked as gone (their files removed); false with
  // the reason when the database refused.
  bool forget_snapshots(const std::vector<std::string> &paths, std::string *error);
  HistoryStats stats() const;

 private:
  EventHistory(sqlite3 *writer, sqlite3 *reader, size_t queue_limit);
  void write_batches();  // the writer thread
  // `sql` on the reader: its parameters bound by `bind`, each row to `row`.
  bool select(const char *sql, const std::function<void(sqlite3_stmt *)> &bind,
              const std::function<void(sqlite3_stmt *)> &row, std::string *error);
  bool write(const std::vector<HistoryEvent> &batch, std::string *error);

  sqlite3 *const writer_;  // the writer thread's connection
  sqlite3 *const reader_;  // query()'s, under read_lock_
  std::mutex read_lock_;
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

// A host's history at `path` ("": none), or nullptr with the reason logged: a history that
// cannot be opened leaves the cameras running, their events unkept.
std::shared_ptr<EventHistory> open_host_history(const std::string &path);

}  // namespace cudanms::service
