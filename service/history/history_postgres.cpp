// The history in PostgreSQL (libpq): one database for a fleet's hosts, so that a camera that moves
// keeps one history. Each host connects twice (its writer, its readers under a lock); a connection
// lost is made again before the next statement, and a server that stops answering ends a statement
// within tcp_user_timeout (EventHistory then keeps the events queued and tries again).
#include "history_store.h"

#ifdef CUDANMS_HAVE_POSTGRES
#include <libpq-fe.h>

#include <functional>
#include <mutex>
#endif

namespace cudanms::service {

#ifndef CUDANMS_HAVE_POSTGRES

std::unique_ptr<HistoryStore> open_postgres_history(const std::string &uri, std::string *error) {
  *error =
      history_name(uri) + ": this build has no PostgreSQL client (install libpq-dev, build again)";
  return nullptr;
}

#else

namespace postgres_store {  // named: the build joins the room's files into one

// Made once by whichever host comes first (the advisory lock: two hosts creating the table at
// once would otherwise collide on its type).
constexpr const char *kSchema =
    "SET client_min_messages TO WARNING; BEGIN; SELECT pg_advisory_xact_lock(680068);"
    "CREATE TABLE IF NOT EXISTS cudanms_events ("
    " seq BIGSERIAL PRIMARY KEY,"  // the order events were kept in: the pages' cursor
    " camera TEXT NOT NULL, id BIGINT NOT NULL, time_us BIGINT NOT NULL, kind TEXT NOT NULL,"
    " name TEXT NOT NULL, direction TEXT NOT NULL, label TEXT NOT NULL,"
    " track_id BIGINT NOT NULL, dwell_s DOUBLE PRECISION NOT NULL, host TEXT NOT NULL,"
    " snapshot TEXT NOT NULL DEFAULT '',"             // its picture's file; '': none
    " snapshot_gone BOOLEAN NOT NULL DEFAULT FALSE,"  // the file removed (retention)
    " UNIQUE (camera, id));"
    "CREATE INDEX IF NOT EXISTS cudanms_events_by_time ON cudanms_events (time_us DESC, seq DESC);"
    "CREATE INDEX IF NOT EXISTS cudanms_events_by_camera"
    " ON cudanms_events (camera, time_us DESC, seq DESC);"
    "COMMIT;";
constexpr const char *kUpsert =
    "INSERT INTO cudanms_events (camera, id, time_us, kind, name, direction, label, track_id,"
    " dwell_s, host, snapshot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    " ON CONFLICT (camera, id) DO UPDATE"
    " SET time_us = EXCLUDED.time_us, kind = EXCLUDED.kind, name = EXCLUDED.name,"
    " direction = EXCLUDED.direction, label = EXCLUDED.label, track_id = EXCLUDED.track_id,"
    " dwell_s = EXCLUDED.dwell_s, host = EXCLUDED.host,"
    // An event delivered again without its picture keeps the one it has.
    " snapshot = CASE WHEN EXCLUDED.snapshot <> '' THEN EXCLUDED.snapshot"
    " ELSE cudanms_events.snapshot END";
constexpr const char *kPage =
    "SELECT seq, camera, id, time_us, kind, name, direction, label, track_id, dwell_s, host,"
    " snapshot, snapshot_gone::int FROM cudanms_events"
    " WHERE ($1::text IS NULL OR camera = $1) AND ($2::text IS NULL OR kind = $2)"
    " AND ($3::text IS NULL OR label = $3) AND ($4::bigint IS NULL OR time_us >= $4)"
    " AND ($5::bigint IS NULL OR time_us < $5)"
    " AND ($6::bigint IS NULL OR (time_us, seq) <"
    " (SELECT time_us, seq FROM cudanms_events WHERE seq = $6))"
    " ORDER BY time_us DESC, seq DESC LIMIT $7::int";
constexpr const char *kHourly =
    "SELECT time_us / 3600000000 * 3600 AS hour, camera, name,"
    " SUM(CASE WHEN direction = 'in' THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN direction = 'out' THEN 1 ELSE 0 END) FROM cudanms_events"
    " WHERE kind = 'line-crossed' AND ($1::text IS NULL OR camera = $1)"
    " AND ($2::bigint IS NULL OR time_us >= $2) AND ($3::bigint IS NULL OR time_us < $3)"
    " GROUP BY hour, camera, name ORDER BY hour, camera, name";

std::string message_of(PGconn *c) {
  std::string m = PQerrorMessage(c);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// A statement's parameters as text (NULL where absent), kept alive for the call.
class Params {
 public:
  Params &text(const std::optional<std::string> &v) {
    // PostgreSQL's text is UTF-8: a byte it cannot take would refuse the whole batch again and
    // again.
    if (v) {
      gchar *valid = g_utf8_make_valid(v->c_str(), static_cast<gssize>(v->size()));
      values_.push_back(valid);
      g_free(valid);
    }
    absent_.push_back(!v);
    if (!v) values_.emplace_back();
    return *this;
  }
  Params &number(const std::optional<gint64> &v) {
    return text(v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt);
  }
  Params &real(double v) {
    char text[G_ASCII_DTOSTR_BUF_SIZE];
    return text_of(g_ascii_dtostr(text, sizeof text, v));
  }
  std::vector<const char *> pointers() const {
    std::vector<const char *> out;
    for (size_t i = 0; i < values_.size(); i++)
      out.push_back(absent_[i] ? nullptr : values_[i].c_str());
    return out;
  }

 private:
  Params &text_of(const char *v) { return text(std::string(v)); }
  std::vector<std::string> values_;
  std::vector<bool> absent_;
};

// The URI's own settings win over these (they come after): a server that stops answering (a
// frozen host, a cut network) ends a statement instead of holding it for good.
PGconn *connect(const std::string &uri, std::string *error) {
  const char *keys[] = {"connect_timeout",  "tcp_user_timeout", "keepalives_idle",
                        "application_name", "dbname",           nullptr};
  const char *values[] = {"5", "10000", "5", "cudanms-service", uri.c_str(), nullptr};
  PGconn *c = PQconnectdbParams(keys, values, 1);
  if (!c) {
    *error = "out of memory";
    return nullptr;
  }
  PGresult *made = PQstatus(c) == CONNECTION_OK ? PQexec(c, kSchema) : nullptr;
  const bool ok = made && PQresultStatus(made) == PGRES_COMMAND_OK;
  PQclear(made);
  if (ok) return c;
  *error = message_of(c);
  PQfinish(c);
  return nullptr;
}

class PostgresHistory : public HistoryStore {
 public:
  PostgresHistory(PGconn *writer, PGconn *reader) : writer_(writer), reader_(reader) {}
  ~PostgresHistory() override {
    PQfinish(writer_);
    PQfinish(reader_);
  }
  bool write(const std::vector<HistoryEvent> &batch, std::string *error) override;
  bool page(const HistoryQuery &query, std::vector<HistoryEvent> *out, std::string *error) override;
  bool hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out,
              std::string *error) override;
  bool has_camera(const std::string &camera) override;
  bool snapshot_of(gint64 seq, std::string *path) override;
  bool forget_snapshots(const std::vector<std::string> &paths, std::string *error) override;

 private:
  using Row = std::function<void(const PGresult *, int)>;
  // `sql` with `params` on `c` (made again first when it was lost); each row to `row`.
  static bool run(PGconn *c, const char *sql, const Params &params, const Row &row,
                  std::string *error);
  bool select(const char *sql, const Params &params, const Row &row, std::string *error) {
    std::lock_guard<std::mutex> guard(read_lock_);
    return run(reader_, sql, params, row, error);
  }

  PGconn *const writer_;
  PGconn *const reader_;
  std::mutex read_lock_;
};

bool PostgresHistory::run(PGconn *c, const char *sql, const Params &params, const Row &row,
                          std::string *error) {
  if (PQstatus(c) != CONNECTION_OK) PQreset(c);
  if (PQstatus(c) != CONNECTION_OK) {
    *error = message_of(c);
    return false;
  }
  const std::vector<const char *> values = params.pointers();
  const bool in_transaction = PQtransactionStatus(c) != PQTRANS_IDLE;
  PGresult *r = PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(),
                             nullptr, nullptr, 0);
  // A connection found lost by this statement (a server killed and started again): made again
  // and the statement tried once more, unless it was inside a transaction, which is gone with it.
  if (PQresultStatus(r) == PGRES_FATAL_ERROR && PQstatus(c) == CONNECTION_BAD && !in_transaction) {
    PQclear(r);
    PQreset(c);
    r = PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                     nullptr, 0);
  }
  const ExecStatusType status = PQresultStatus(r);
  const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
  if (ok && row)
    for (int i = 0; i < PQntuples(r); i++) row(r, i);
  if (!ok) *error = message_of(c);
  PQclear(r);
  return ok;
}

gint64 number_at(const PGresult *r, int row, int column) {
  return g_ascii_strtoll(PQgetvalue(r, row, column), nullptr, 10);
}

bool PostgresHistory::write(const std::vector<HistoryEvent> &batch, std::string *error) {
  if (!run(writer_, "BEGIN", Params(), nullptr, error)) return false;
  bool ok = true;
  for (size_t i = 0; ok && i < batch.size(); i++) {
    const HistoryEvent &e = batch[i];
    Params p;
    p.text(e.camera).number(static_cast<gint64>(e.id)).number(e.time_us).text(e.kind);
    p.text(e.name).text(e.direction).text(e.label).number(static_cast<gint64>(e.track_id));
    p.real(e.dwell_s).text(e.host).text(e.snapshot);
    ok = run(writer_, kUpsert, p, nullptr, error);
  }
  if (ok && run(writer_, "COMMIT", Params(), nullptr, error)) return true;
  std::string ignored;
  run(writer_, "ROLLBACK", Params(), nullptr, &ignored);
  return false;
}

bool PostgresHistory::page(const HistoryQuery &query, std::vector<HistoryEvent> *out,
                           std::string *error) {
  out->clear();
  Params p;
  p.text(query.camera).text(query.kind).text(query.label).number(query.since_us);
  p.number(query.until_us).number(query.before_seq).number(query.limit);
  return select(
      kPage, p,
      [&](const PGresult *r, int i) {
        HistoryEvent e;
        e.seq = number_at(r, i, 0);
        e.camera = PQgetvalue(r, i, 1);
        e.id = static_cast<guint64>(number_at(r, i, 2));
        e.time_us = number_at(r, i, 3);
        e.kind = PQgetvalue(r, i, 4);
        e.name = PQgetvalue(r, i, 5);
        e.direction = PQgetvalue(r, i, 6);
        e.label = PQgetvalue(r, i, 7);
        e.track_id = static_cast<guint64>(number_at(r, i, 8));
        e.dwell_s = g_ascii_strtod(PQgetvalue(r, i, 9), nullptr);
        e.host = PQgetvalue(r, i, 10);
        e.snapshot = PQgetvalue(r, i, 11);
        e.snapshot_gone = number_at(r, i, 12) != 0;
        out->push_back(std::move(e));
      },
      error);
}

bool PostgresHistory::hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out,
                             std::string *error) {
  out->clear();
  Params p;
  p.text(query.camera).number(query.since_us).number(query.until_us);
  return select(
      kHourly, p,
      [&](const PGresult *r, int i) {
        HourlyCrossings h;
        h.hour_s = number_at(r, i, 0);
        h.camera = PQgetvalue(r, i, 1);
        h.line = PQgetvalue(r, i, 2);
        h.in = static_cast<guint64>(number_at(r, i, 3));
        h.out = static_cast<guint64>(number_at(r, i, 4));
        out->push_back(std::move(h));
      },
      error);
}

bool PostgresHistory::has_camera(const std::string &camera) {
  bool found = false;
  std::string error;
  select(
      "SELECT 1 FROM cudanms_events WHERE camera = $1 LIMIT 1", Params().text(camera),
      [&](const PGresult *, int) { found = true; }, &error);
  return found;
}

bool PostgresHistory::snapshot_of(gint64 seq, std::string *path) {
  path->clear();
  std::string error;
  select(
      "SELECT snapshot FROM cudanms_events WHERE seq = $1 AND NOT snapshot_gone",
      Params().number(seq), [&](const PGresult *r, int i) { *path = PQgetvalue(r, i, 0); }, &error);
  return !path->empty();
}

bool PostgresHistory::forget_snapshots(const std::vector<std::string> &paths, std::string *error) {
  std::lock_guard<std::mutex> guard(read_lock_);
  if (!run(reader_, "BEGIN", Params(), nullptr, error)) return false;
  bool ok = true;
  for (size_t i = 0; ok && i < paths.size(); i++)
    ok = run(reader_, "UPDATE cudanms_events SET snapshot_gone = TRUE WHERE snapshot = $1",
             Params().text(paths[i]), nullptr, error);
  if (ok && run(reader_, "COMMIT", Params(), nullptr, error)) return true;
  std::string ignored;
  run(reader_, "ROLLBACK", Params(), nullptr, &ignored);
  return false;
}

}  // namespace postgres_store

std::unique_ptr<HistoryStore> open_postgres_history(const std::string &uri, std::string *error) {
  PGconn *writer = postgres_store::connect(uri, error);
  PGconn *reader = writer ? postgres_store::connect(uri, error) : nullptr;
  if (!reader) {
    *error = history_name(uri) + ": " + *error;
    if (writer) PQfinish(writer);
    return nullptr;
  }
  return std::make_unique<postgres_store::PostgresHistory>(writer, reader);
}

#endif

}  // namespace cudanms::service
