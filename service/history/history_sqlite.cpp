// The history in a SQLite file: one a host; a supervisor's workers write into the same file
// (SQLite's locking between them, WAL so that readers never wait for a writer).
#include <sqlite3.h>

#include <functional>
#include <mutex>
#include <set>

#include "history_store.h"

namespace cudanms::service {
namespace sqlite_store {  // named: the build joins the room's files into one

constexpr int kBusyMs = 200;  // a statement waits this long for another writer's lock (then
                              // EventHistory tries the batch again)
constexpr const char *kSchema =
    "CREATE TABLE IF NOT EXISTS events ("
    " seq INTEGER PRIMARY KEY,"  // the order events were kept in: the pages' cursor
    " camera TEXT NOT NULL, id INTEGER NOT NULL, time_us INTEGER NOT NULL, kind TEXT NOT NULL,"
    " name TEXT NOT NULL, direction TEXT NOT NULL, label TEXT NOT NULL,"
    " track_id INTEGER NOT NULL, dwell_s REAL NOT NULL, host TEXT NOT NULL,"
    " snapshot TEXT NOT NULL DEFAULT '',"         // its picture's file; '': none
    " snapshot_gone INTEGER NOT NULL DEFAULT 0,"  // the file removed (retention)
    " UNIQUE (camera, id));"
    "CREATE INDEX IF NOT EXISTS events_by_time ON events (time_us DESC, seq DESC);"
    "CREATE INDEX IF NOT EXISTS events_by_camera ON events (camera, time_us DESC, seq DESC);";
constexpr const char *kUpsert =
    "INSERT INTO events (camera, id, time_us, kind, name, direction, label, track_id, dwell_s,"
    " host, snapshot) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    " ON CONFLICT (camera, id) DO UPDATE"
    " SET time_us = excluded.time_us, kind = excluded.kind, name = excluded.name,"
    " direction = excluded.direction, label = excluded.label, track_id = excluded.track_id,"
    " dwell_s = excluded.dwell_s, host = excluded.host,"
    // An event delivered again without its picture keeps the one it has.
    " snapshot = CASE WHEN excluded.snapshot != '' THEN excluded.snapshot ELSE snapshot END";
constexpr const char *kPage =
    "SELECT seq, camera, id, time_us, kind, name, direction, label, track_id, dwell_s, host,"
    " snapshot, snapshot_gone FROM events"
    " WHERE (?1 IS NULL OR camera = ?1) AND (?2 IS NULL OR kind = ?2)"
    " AND (?3 IS NULL OR label = ?3) AND (?4 IS NULL OR time_us >= ?4)"
    " AND (?5 IS NULL OR time_us < ?5)"
    " AND (?6 IS NULL OR (time_us, seq) < (SELECT time_us, seq FROM events WHERE seq = ?6))"
    " ORDER BY time_us DESC, seq DESC LIMIT ?7";

constexpr const char *kHourly =
    "SELECT time_us / 3600000000 * 3600 AS hour, camera, name,"
    " SUM(direction = 'in'), SUM(direction = 'out') FROM events"
    " WHERE kind = 'line-crossed' AND (?1 IS NULL OR camera = ?1)"
    " AND (?2 IS NULL OR time_us >= ?2) AND (?3 IS NULL OR time_us < ?3)"
    " GROUP BY hour, camera, name ORDER BY hour, camera, name";

std::string message_of(sqlite3 *db) { return sqlite3_errmsg(db); }

// A history made before events had pictures gains their columns; another process may have
// just added one.
bool add_picture_columns(sqlite3 *db, char **why) {
  std::set<std::string> has;
  sqlite3_stmt *s = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA table_info(events)", -1, &s, nullptr) == SQLITE_OK)
    while (sqlite3_step(s) == SQLITE_ROW)
      has.insert(reinterpret_cast<const char *>(sqlite3_column_text(s, 1)));
  sqlite3_finalize(s);
  for (const auto &[name, type] :
       {std::pair<const char *, const char *>{"snapshot", "TEXT"}, {"snapshot_gone", "INTEGER"}}) {
    if (has.count(name)) continue;
    const std::string add = std::string("ALTER TABLE events ADD COLUMN ") + name + " " + type +
                            " NOT NULL DEFAULT " + (type[0] == 'T' ? "''" : "0");
    if (sqlite3_exec(db, add.c_str(), nullptr, nullptr, why) == SQLITE_OK) continue;
    if (!*why || std::string(*why).find("duplicate column") == std::string::npos) return false;
    sqlite3_free(*why);
    *why = nullptr;
  }
  return true;
}

// A connection to `path` in WAL mode with the table; nullptr with the reason.
sqlite3 *connect(const std::string &path, std::string *error) {
  sqlite3 *db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    *error = db ? message_of(db) : "out of memory";
    sqlite3_close(db);
    return nullptr;
  }
  sqlite3_busy_timeout(db, kBusyMs);
  char *why = nullptr;
  if (sqlite3_exec(db, "PRAGMA journal_mode = WAL;", nullptr, nullptr, &why) != SQLITE_OK ||
      sqlite3_exec(db, kSchema, nullptr, nullptr, &why) != SQLITE_OK ||
      !add_picture_columns(db, &why)) {
    *error = why ? why : message_of(db);
    sqlite3_free(why);
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

void bind_text(sqlite3_stmt *s, int at, const std::optional<std::string> &v) {
  if (v)
    sqlite3_bind_text(s, at, v->c_str(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
  else
    sqlite3_bind_null(s, at);
}

void bind_int(sqlite3_stmt *s, int at, const std::optional<gint64> &v) {
  if (v)
    sqlite3_bind_int64(s, at, *v);
  else
    sqlite3_bind_null(s, at);
}

std::string column_text(sqlite3_stmt *s, int at) {
  const unsigned char *text = sqlite3_column_text(s, at);
  return text ? reinterpret_cast<const char *>(text) : "";
}

// Two connections: the writer's, and the readers' under read_lock_ (WAL: readers never wait for
// the writer).
class SqliteHistory : public HistoryStore {
 public:
  SqliteHistory(sqlite3 *writer, sqlite3 *reader) : writer_(writer), reader_(reader) {}
  ~SqliteHistory() override {
    sqlite3_close(writer_);
    sqlite3_close(reader_);
  }
  bool write(const std::vector<HistoryEvent> &batch, std::string *error) override;
  bool page(const HistoryQuery &query, std::vector<HistoryEvent> *out, std::string *error) override;
  bool hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out,
              std::string *error) override;
  bool has_camera(const std::string &camera) override;
  bool snapshot_of(gint64 seq, std::string *path) override;
  bool forget_snapshots(const std::vector<std::string> &paths, std::string *error) override;

 private:
  // `sql` on the reader: its parameters bound by `bind`, each row to `row`.
  bool select(const char *sql, const std::function<void(sqlite3_stmt *)> &bind,
              const std::function<void(sqlite3_stmt *)> &row, std::string *error);

  sqlite3 *const writer_;
  sqlite3 *const reader_;
  std::mutex read_lock_;
};

bool SqliteHistory::write(const std::vector<HistoryEvent> &batch, std::string *error) {
  if (sqlite3_exec(writer_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    *error = message_of(writer_);
    return false;
  }
  sqlite3_stmt *s = nullptr;
  bool ok = sqlite3_prepare_v2(writer_, kUpsert, -1, &s, nullptr) == SQLITE_OK;
  for (size_t i = 0; ok && i < batch.size(); i++) {
    const HistoryEvent &e = batch[i];
    sqlite3_reset(s);
    bind_text(s, 1, e.camera);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(e.id));
    sqlite3_bind_int64(s, 3, e.time_us);
    bind_text(s, 4, e.kind);
    bind_text(s, 5, e.name);
    bind_text(s, 6, e.direction);
    bind_text(s, 7, e.label);
    sqlite3_bind_int64(s, 8, static_cast<sqlite3_int64>(e.track_id));
    sqlite3_bind_double(s, 9, e.dwell_s);
    bind_text(s, 10, e.host);
    bind_text(s, 11, e.snapshot);
    ok = sqlite3_step(s) == SQLITE_DONE;
  }
  if (!ok) *error = message_of(writer_);
  sqlite3_finalize(s);
  if (ok && sqlite3_exec(writer_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK) return true;
  if (ok) *error = message_of(writer_);
  sqlite3_exec(writer_, "ROLLBACK", nullptr, nullptr, nullptr);
  return false;
}

bool SqliteHistory::select(const char *sql, const std::function<void(sqlite3_stmt *)> &bind,
                           const std::function<void(sqlite3_stmt *)> &row, std::string *error) {
  std::lock_guard<std::mutex> guard(read_lock_);
  sqlite3_stmt *s = nullptr;
  if (sqlite3_prepare_v2(reader_, sql, -1, &s, nullptr) != SQLITE_OK) {
    *error = message_of(reader_);
    return false;
  }
  bind(s);
  int step;
  while ((step = sqlite3_step(s)) == SQLITE_ROW) row(s);
  if (step != SQLITE_DONE) *error = message_of(reader_);
  sqlite3_finalize(s);
  return step == SQLITE_DONE;
}

bool SqliteHistory::page(const HistoryQuery &query, std::vector<HistoryEvent> *out,
                         std::string *error) {
  out->clear();
  auto bind = [&](sqlite3_stmt *s) {
    bind_text(s, 1, query.camera);
    bind_text(s, 2, query.kind);
    bind_text(s, 3, query.label);
    bind_int(s, 4, query.since_us);
    bind_int(s, 5, query.until_us);
    bind_int(s, 6, query.before_seq);
    sqlite3_bind_int(s, 7, query.limit);
  };
  auto row = [&](sqlite3_stmt *s) {
    HistoryEvent e;
    e.seq = sqlite3_column_int64(s, 0);
    e.camera = column_text(s, 1);
    e.id = static_cast<guint64>(sqlite3_column_int64(s, 2));
    e.time_us = sqlite3_column_int64(s, 3);
    e.kind = column_text(s, 4);
    e.name = column_text(s, 5);
    e.direction = column_text(s, 6);
    e.label = column_text(s, 7);
    e.track_id = static_cast<guint64>(sqlite3_column_int64(s, 8));
    e.dwell_s = sqlite3_column_double(s, 9);
    e.host = column_text(s, 10);
    e.snapshot = column_text(s, 11);
    e.snapshot_gone = sqlite3_column_int(s, 12) != 0;
    out->push_back(std::move(e));
  };
  return select(kPage, bind, row, error);
}

bool SqliteHistory::hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out,
                           std::string *error) {
  out->clear();
  auto bind = [&](sqlite3_stmt *s) {
    bind_text(s, 1, query.camera);
    bind_int(s, 2, query.since_us);
    bind_int(s, 3, query.until_us);
  };
  auto row = [&](sqlite3_stmt *s) {
    HourlyCrossings h;
    h.hour_s = sqlite3_column_int64(s, 0);
    h.camera = column_text(s, 1);
    h.line = column_text(s, 2);
    h.in = static_cast<guint64>(sqlite3_column_int64(s, 3));
    h.out = static_cast<guint64>(sqlite3_column_int64(s, 4));
    out->push_back(std::move(h));
  };
  return select(kHourly, bind, row, error);
}

bool SqliteHistory::snapshot_of(gint64 seq, std::string *path) {
  path->clear();
  std::string error;
  select(
      "SELECT snapshot FROM events WHERE seq = ?1 AND snapshot_gone = 0",
      [&](sqlite3_stmt *s) { sqlite3_bind_int64(s, 1, seq); },
      [&](sqlite3_stmt *s) { *path = column_text(s, 0); }, &error);
  return !path->empty();
}

bool SqliteHistory::forget_snapshots(const std::vector<std::string> &paths, std::string *error) {
  std::lock_guard<std::mutex> guard(read_lock_);
  sqlite3_stmt *s = nullptr;
  if (sqlite3_exec(reader_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(reader_, "UPDATE events SET snapshot_gone = 1 WHERE snapshot = ?1", -1, &s,
                         nullptr) != SQLITE_OK) {
    *error = message_of(reader_);
    sqlite3_exec(reader_, "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  }
  bool ok = true;
  for (size_t i = 0; ok && i < paths.size(); i++) {
    sqlite3_reset(s);
    bind_text(s, 1, paths[i]);
    ok = sqlite3_step(s) == SQLITE_DONE;
  }
  sqlite3_finalize(s);
  if (ok && sqlite3_exec(reader_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK) return true;
  *error = message_of(reader_);
  sqlite3_exec(reader_, "ROLLBACK", nullptr, nullptr, nullptr);
  return false;
}

bool SqliteHistory::has_camera(const std::string &camera) {
  bool found = false;
  std::string error;
  select(
      "SELECT 1 FROM events WHERE camera = ?1 LIMIT 1",
      [&](sqlite3_stmt *s) { bind_text(s, 1, camera); }, [&](sqlite3_stmt *) { found = true; },
      &error);
  return found;
}

}  // namespace sqlite_store

std::unique_ptr<HistoryStore> open_sqlite_history(const std::string &path, std::string *error) {
  sqlite3 *writer = sqlite_store::connect(path, error);
  if (!writer) {
    *error = path + ": " + *error;
    return nullptr;
  }
  sqlite3 *reader = sqlite_store::connect(path, error);
  if (!reader) {
    *error = path + ": " + *error;
    sqlite3_close(writer);
    return nullptr;
  }
  return std::make_unique<sqlite_store::SqliteHistory>(writer, reader);
}

}  // namespace cudanms::service
