#include "history_store.h"

#include <regex>

namespace cudanms::service {
namespace {

constexpr const char *kUpsert =
    "INSERT INTO {t} (camera, id, time_us, kind, name, direction, label, track_id, dwell_s,"
    " host, snapshot, clip) VALUES ($1, CAST($2 AS BIGINT), CAST($3 AS BIGINT), $4, $5, $6,"
    " $7, CAST($8 AS BIGINT), CAST($9 AS DOUBLE PRECISION), $10, $11, $12)"
    " ON CONFLICT (camera, id) DO UPDATE"
    " SET time_us = excluded.time_us, kind = excluded.kind, name = excluded.name,"
    " direction = excluded.direction, label = excluded.label, track_id = excluded.track_id,"
    " dwell_s = excluded.dwell_s, host = excluded.host,"
    // An event delivered again without its picture or clip keeps the one it has.
    " snapshot = CASE WHEN excluded.snapshot <> '' THEN excluded.snapshot ELSE {t}.snapshot END,"
    " clip = CASE WHEN excluded.clip <> '' THEN excluded.clip ELSE {t}.clip END";
constexpr const char *kPage =
    "SELECT seq, camera, id, time_us, kind, name, direction, label, track_id, dwell_s, host,"
    " snapshot, CAST(snapshot_gone AS INTEGER), clip, CAST(clip_gone AS INTEGER) FROM {t}"
    " WHERE (CAST($1 AS TEXT) IS NULL OR camera = $1) AND (CAST($2 AS TEXT) IS NULL OR kind = $2)"
    " AND (CAST($3 AS TEXT) IS NULL OR label = $3)"
    " AND (CAST($4 AS BIGINT) IS NULL OR time_us >= CAST($4 AS BIGINT))"
    " AND (CAST($5 AS BIGINT) IS NULL OR time_us < CAST($5 AS BIGINT))"
    " AND (CAST($6 AS BIGINT) IS NULL OR (time_us, seq) <"
    " (SELECT time_us, seq FROM {t} WHERE seq = CAST($6 AS BIGINT)))"
    " ORDER BY time_us DESC, seq DESC LIMIT CAST($7 AS INTEGER)";
constexpr const char *kHourly =
    "SELECT time_us / 3600000000 * 3600 AS hour, camera, name,"
    " SUM(CASE WHEN direction = 'in' THEN 1 ELSE 0 END),"
    " SUM(CASE WHEN direction = 'out' THEN 1 ELSE 0 END) FROM {t}"
    " WHERE kind = 'line-crossed' AND (CAST($1 AS TEXT) IS NULL OR camera = $1)"
    " AND (CAST($2 AS BIGINT) IS NULL OR time_us >= CAST($2 AS BIGINT))"
    " AND (CAST($3 AS BIGINT) IS NULL OR time_us < CAST($3 AS BIGINT))"
    " GROUP BY hour, camera, name ORDER BY hour, camera, name";

std::string on_table(const std::string &sql, const std::string &table) {
  std::string out = sql;
  for (size_t at = out.find("{t}"); at != std::string::npos; at = out.find("{t}", at))
    out.replace(at, 3, table);
  return out;
}

std::optional<std::string> number(const std::optional<gint64> &v) {
  return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}

std::string real(double v) {
  char text[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_dtostr(text, sizeof text, v);
}

gint64 number_of(const std::string &text) { return g_ascii_strtoll(text.c_str(), nullptr, 10); }

}  // namespace

std::string events_table_sql(const std::string &table, const SqlTypes &t) {
  // seq: the order events were kept in, the pages' cursor.
  std::string sql = "CREATE TABLE IF NOT EXISTS " + table + " (seq " + t.seq + ",";
  const std::string integer = std::string(" ") + t.integer + " NOT NULL,";
  sql += " camera TEXT NOT NULL, id" + integer + " time_us" + integer;
  sql += " kind TEXT NOT NULL, name TEXT NOT NULL, direction TEXT NOT NULL, label TEXT NOT NULL,";
  sql += " track_id" + integer + " dwell_s " + t.real + " NOT NULL, host TEXT NOT NULL,";
  for (const auto &[name, definition] : added_event_columns(t)) sql += " " + definition + ",";
  return sql + " UNIQUE (camera, id));";
}

std::vector<std::pair<std::string, std::string>> added_event_columns(const SqlTypes &t) {
  const std::string flag = std::string(" ") + t.flag + " NOT NULL DEFAULT " + t.no;
  return {{"snapshot", "snapshot TEXT NOT NULL DEFAULT ''"},  // its picture's file; '': none
          {"snapshot_gone", "snapshot_gone" + flag},          // the file removed (retention)
          {"clip", "clip TEXT NOT NULL DEFAULT ''"},          // its clip's file; '': none
          {"clip_gone", "clip_gone" + flag}};                 // removed, or never finished
}

HistoryStore::HistoryStore(const SqlDialect &dialect, std::unique_ptr<SqlConnection> writer,
                           std::unique_ptr<SqlConnection> reader)
    : dialect_(dialect),
      upsert_(on_table(kUpsert, dialect.table)),
      page_(on_table(kPage, dialect.table)),
      hourly_(on_table(kHourly, dialect.table)),
      writer_(std::move(writer)),
      reader_(std::move(reader)) {}

bool HistoryStore::write(const std::vector<HistoryEvent> &batch, std::string *error) {
  if (!writer_->run(dialect_.begin, {}, nullptr, error)) return false;
  bool ok = true;
  for (size_t i = 0; ok && i < batch.size(); i++) {
    const HistoryEvent &e = batch[i];
    ok = writer_->run(
        upsert_,
        {e.camera, std::to_string(static_cast<gint64>(e.id)), std::to_string(e.time_us), e.kind,
         e.name, e.direction, e.label, std::to_string(static_cast<gint64>(e.track_id)),
         real(e.dwell_s), e.host, e.snapshot, e.clip},
        nullptr, error);
  }
  if (ok && writer_->run("COMMIT", {}, nullptr, error)) return true;
  std::string ignored;
  writer_->run("ROLLBACK", {}, nullptr, &ignored);
  return false;
}

bool HistoryStore::page(const HistoryQuery &q, std::vector<HistoryEvent> *out, std::string *error) {
  out->clear();
  return read(
      page_,
      {q.camera, q.kind, q.label, number(q.since_us), number(q.until_us), number(q.before_seq),
       std::to_string(q.limit)},
      [&](const std::vector<std::string> &c) {
        HistoryEvent e;
        e.seq = number_of(c[0]);
        e.camera = c[1];
        e.id = static_cast<guint64>(number_of(c[2]));
        e.time_us = number_of(c[3]);
        e.kind = c[4];
        e.name = c[5];
        e.direction = c[6];
        e.label = c[7];
        e.track_id = static_cast<guint64>(number_of(c[8]));
        e.dwell_s = g_ascii_strtod(c[9].c_str(), nullptr);
        e.host = c[10];
        e.snapshot = c[11];
        e.snapshot_gone = number_of(c[12]) != 0;
        e.clip = c[13];
        e.clip_gone = number_of(c[14]) != 0;
        out->push_back(std::move(e));
      },
      error);
}

bool HistoryStore::hourly(const HistoryQuery &q, std::vector<HourlyCrossings> *out,
                          std::string *error) {
  out->clear();
  return read(
      hourly_, {q.camera, number(q.since_us), number(q.until_us)},
      [&](const std::vector<std::string> &c) {
        out->push_back({number_of(c[0]), c[1], c[2], static_cast<guint64>(number_of(c[3])),
                        static_cast<guint64>(number_of(c[4]))});
      },
      error);
}

bool HistoryStore::has_camera(const std::string &camera) {
  bool found = false;
  std::string error;
  read(
      "SELECT 1 FROM " + dialect_.table + " WHERE camera = $1 LIMIT 1", {camera},
      [&](const std::vector<std::string> &) { found = true; }, &error);
  return found;
}

bool HistoryStore::file_of(gint64 seq, EventFile file, std::string *path, std::string *host) {
  path->clear();
  std::string error;
  const std::string column = file == EventFile::kSnapshot ? "snapshot" : "clip";
  read(
      "SELECT " + column + ", host FROM " + dialect_.table +
          " WHERE seq = CAST($1 AS BIGINT) AND NOT " + column + "_gone",
      {std::to_string(seq)}, [&](const std::vector<std::string> &c) { *path = c[0], *host = c[1]; },
      &error);
  return !path->empty();
}

bool HistoryStore::forget_files(const std::vector<std::string> &paths, std::string *error) {
  std::lock_guard<std::mutex> guard(read_lock_);
  if (!reader_->run(dialect_.begin, {}, nullptr, error)) return false;
  bool ok = true;
  const std::string forget_picture =
      "UPDATE " + dialect_.table + " SET snapshot_gone = TRUE WHERE snapshot = $1";
  const std::string forget_clip =
      "UPDATE " + dialect_.table + " SET clip_gone = TRUE WHERE clip = $1";
  for (size_t i = 0; ok && i < paths.size(); i++)
    ok = reader_->run(forget_picture, {paths[i]}, nullptr, error) &&
         reader_->run(forget_clip, {paths[i]}, nullptr, error);
  if (ok && reader_->run("COMMIT", {}, nullptr, error)) return true;
  std::string ignored;
  reader_->run("ROLLBACK", {}, nullptr, &ignored);
  return false;
}

bool HistoryStore::read(const std::string &sql, const SqlParams &params, const SqlRow &row,
                        std::string *error) {
  std::lock_guard<std::mutex> guard(read_lock_);
  return reader_->run(sql, params, row, error);
}

bool is_postgres_uri(const std::string &where) {
  return where.rfind("postgresql://", 0) == 0 || where.rfind("postgres://", 0) == 0;
}

std::string history_name(const std::string &where) {
  if (!is_postgres_uri(where)) return where;
  // postgresql://user:password@host/db: the password left out of logs and errors.
  static const std::regex password("^(postgres(ql)?://[^:@/]*):[^@/]*@");
  return std::regex_replace(where, password, "$1:***@");
}

std::unique_ptr<HistoryStore> open_history_store(const std::string &where, std::string *error) {
  return is_postgres_uri(where) ? open_postgres_history(where, error)
                                : open_sqlite_history(where, error);
}

}  // namespace cudanms::service
