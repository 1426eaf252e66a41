// The history in PostgreSQL (libpq): one database for a fleet's hosts, so that a camera that moves
// keeps one history. Each host connects twice (its writer, its readers under a lock); a connection
// lost is made again before the next statement, and a server that stops answering ends a statement
// within tcp_user_timeout (EventHistory then keeps the events queued and tries again).
#include "history_store.h"

#ifdef CUDANMS_HAVE_POSTGRES
#include <libpq-fe.h>
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
// once would otherwise collide on its type); a table made before some columns gains them.
std::string schema_sql() {
  constexpr SqlTypes kTypes = {"BIGSERIAL PRIMARY KEY", "BIGINT", "DOUBLE PRECISION", "BOOLEAN",
                               "FALSE"};
  std::string sql =
      "SET client_min_messages TO WARNING; BEGIN; SELECT pg_advisory_xact_lock(680068);" +
      events_table_sql("cudanms_events", kTypes);
  for (const auto &[name, definition] : added_event_columns(kTypes))
    sql += "ALTER TABLE cudanms_events ADD COLUMN IF NOT EXISTS " + definition + ";";
  return sql +
         "CREATE INDEX IF NOT EXISTS cudanms_events_by_time ON cudanms_events (time_us DESC, seq "
         "DESC);"
         "CREATE INDEX IF NOT EXISTS cudanms_events_by_camera"
         " ON cudanms_events (camera, time_us DESC, seq DESC);"
         "COMMIT;";
}

std::string message_of(PGconn *c) {
  std::string m = PQerrorMessage(c);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

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
  PGresult *made = PQstatus(c) == CONNECTION_OK ? PQexec(c, schema_sql().c_str()) : nullptr;
  const bool ok = made && PQresultStatus(made) == PGRES_COMMAND_OK;
  PQclear(made);
  if (ok) return c;
  *error = message_of(c);
  PQfinish(c);
  return nullptr;
}

// One connection, made again before a statement when it was lost.
class PostgresConnection : public SqlConnection {
 public:
  explicit PostgresConnection(PGconn *c) : c_(c) {}
  ~PostgresConnection() override { PQfinish(c_); }
  bool run(const std::string &sql, const SqlParams &params, const SqlRow &row,
           std::string *error) override {
    if (PQstatus(c_) != CONNECTION_OK) PQreset(c_);
    if (PQstatus(c_) != CONNECTION_OK) {
      *error = message_of(c_);
      return false;
    }
    // PostgreSQL's text is UTF-8: a byte it cannot take would refuse the whole batch again and
    // again.
    std::vector<std::string> texts;
    std::vector<const char *> values;
    texts.reserve(params.size());
    for (const std::optional<std::string> &p : params) {
      gchar *valid = p ? g_utf8_make_valid(p->c_str(), static_cast<gssize>(p->size())) : nullptr;
      texts.push_back(valid ? valid : "");
      g_free(valid);
      values.push_back(p ? texts.back().c_str() : nullptr);
    }
    const bool in_transaction = PQtransactionStatus(c_) != PQTRANS_IDLE;
    PGresult *r = exec(sql, values);
    // A connection found lost by this statement (a server killed and started again): made
    // again and the statement tried once more, unless it was inside a transaction, which is
    // gone with it.
    if (PQresultStatus(r) == PGRES_FATAL_ERROR && PQstatus(c_) == CONNECTION_BAD &&
        !in_transaction) {
      PQclear(r);
      PQreset(c_);
      r = exec(sql, values);
    }
    const ExecStatusType status = PQresultStatus(r);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    std::vector<std::string> columns(static_cast<size_t>(ok ? PQnfields(r) : 0));
    for (int i = 0; ok && row && i < PQntuples(r); i++) {
      for (size_t c = 0; c < columns.size(); c++)
        columns[c] = PQgetvalue(r, i, static_cast<int>(c));
      row(columns);
    }
    if (!ok) *error = message_of(c_);
    PQclear(r);
    return ok;
  }

 private:
  PGresult *exec(const std::string &sql, const std::vector<const char *> &values) {
    return PQexecParams(c_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0);
  }

  PGconn *const c_;
};

}  // namespace postgres_store

std::unique_ptr<HistoryStore> open_postgres_history(const std::string &uri, std::string *error) {
  PGconn *writer = postgres_store::connect(uri, error);
  PGconn *reader = writer ? postgres_store::connect(uri, error) : nullptr;
  if (!reader) {
    *error = history_name(uri) + ": " + *error;
    if (writer) PQfinish(writer);
    return nullptr;
  }
  return std::make_unique<HistoryStore>(
      SqlDialect{"cudanms_events", "BEGIN"},
      std::make_unique<postgres_store::PostgresConnection>(writer),
      std::make_unique<postgres_store::PostgresConnection>(reader));
}

#endif

}  // namespace cudanms::service
