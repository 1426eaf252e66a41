// Where a history is kept: a SQLite file of the host's own, or a PostgreSQL database that the
// hosts of a fleet share, so that a camera that moves keeps one history. EventHistory queues the
// events and writes them through a store on its writer thread; the store answers questions on
// any other thread. One store's statements and logic (history_store.cpp) over either database's
// connection. SQL with bound parameters only. No GStreamer.
#pragma once

#include <glib.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

// An event's files: its picture, its clip.
enum class EventFile { kSnapshot, kClip };

// One in the history.
struct HistoryEvent : CountEvent {
  std::string camera;
  std::string host;            // the host that counted it ("" for one not in a fleet)
  std::string snapshot;        // its picture's file (the camera's outputs make it); "" for none
  bool snapshot_gone = false;  // that file removed since (retention)
  std::string clip;            // its clip's file (event_clips.h); "" for none
  bool clip_gone = false;      // that file removed since, or never finished
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

using SqlParams = std::vector<std::optional<std::string>>;
using SqlRow = std::function<void(const std::vector<std::string> &columns)>;

// A database connection as a store uses it: SQLite's (history_sqlite.cpp) or PostgreSQL's
// (history_postgres.cpp). The statements use $1..$N and CAST, which both databases take; every
// parameter is given as text (or NULL) and every column read as text.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // `sql` with `params` ($1 the first); each row's columns to `row` (none: no rows wanted).
  virtual bool run(const std::string &sql, const SqlParams &params, const SqlRow &row,
                   std::string *error) = 0;
};

// A database's names for the events' table's types.
struct SqlTypes {
  const char *seq;      // an increasing key: SQLite's INTEGER PRIMARY KEY, PostgreSQL's BIGSERIAL
  const char *integer;  // 64 bits
  const char *real;     // a double
  const char *flag;     // a boolean, and its false
  const char *no;
};
// The events' table `table` in `types`, made if it is not there: one list of columns for both
// databases, so that a column is added once.
std::string events_table_sql(const std::string &table, const SqlTypes &types);
// The columns added since the first histories (events' pictures, their clips), each as
// (name, "NAME TYPE NOT NULL DEFAULT ..."): what a table made before them gains.
std::vector<std::pair<std::string, std::string>> added_event_columns(const SqlTypes &types);

struct SqlDialect {
  std::string table;  // SQLite's events (older files have it), PostgreSQL's cudanms_events
  std::string begin;  // a write's transaction: SQLite's BEGIN IMMEDIATE takes the lock at once
};

// The statements and the logic of a history, the same over either database.
class HistoryStore {
 public:
  // Writes on `writer` (EventHistory's writer thread alone), reads on `reader`.
  HistoryStore(const SqlDialect &dialect, std::unique_ptr<SqlConnection> writer,
               std::unique_ptr<SqlConnection> reader);
  // A batch in one transaction, each event once by (camera, id): one delivered again is written
  // over. The writer's alone.
  bool write(const std::vector<HistoryEvent> &batch, std::string *error);
  // The rest: any thread, one at a time (the store's own lock).
  bool page(const HistoryQuery &query, std::vector<HistoryEvent> *out, std::string *error);
  bool hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out, std::string *error);
  bool has_camera(const std::string &camera);
  bool file_of(gint64 seq, EventFile file, std::string *path, std::string *host);
  bool forget_files(const std::vector<std::string> &paths, std::string *error);

 private:
  bool read(const std::string &sql, const SqlParams &params, const SqlRow &row, std::string *error);

  const SqlDialect dialect_;
  const std::string upsert_, page_, hourly_;
  const std::unique_ptr<SqlConnection> writer_;
  const std::unique_ptr<SqlConnection> reader_;
  std::mutex read_lock_;
};

// `where` a PostgreSQL connection URI (postgresql://...): that database; else the SQLite file at
// that path. Made with its table where there is none; nullptr with the reason.
std::unique_ptr<HistoryStore> open_history_store(const std::string &where, std::string *error);
bool is_postgres_uri(const std::string &where);
// `where` as logs and errors show it: a URI's password left out.
std::string history_name(const std::string &where);

// Each kind's own (history_sqlite.cpp, history_postgres.cpp).
std::unique_ptr<HistoryStore> open_sqlite_history(const std::string &path, std::string *error);
std::unique_ptr<HistoryStore> open_postgres_history(const std::string &uri, std::string *error);

}  // namespace cudanms::service
