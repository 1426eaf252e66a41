// What SQLite's and PostgreSQL's histories share: the statements and the store's logic
// (history_sql.cpp), over a connection each kind makes (history_sqlite.cpp,
// history_postgres.cpp). The statements use $1..$N and CAST, which both databases take; every
// parameter is given as text (or NULL) and every column read as text.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "history_store.h"

namespace cudanms::service {

using SqlParams = std::vector<std::optional<std::string>>;
using SqlRow = std::function<void(const std::vector<std::string> &columns)>;

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // `sql` with `params` ($1 the first); each row's columns to `row` (none: no rows wanted).
  virtual bool run(const std::string &sql, const SqlParams &params, const SqlRow &row,
                   std::string *error) = 0;
};

struct SqlDialect {
  std::string table;  // SQLite's events (older files have it), PostgreSQL's cudanms_events
  std::string begin;  // a write's transaction: SQLite's BEGIN IMMEDIATE takes the lock at once
};

// Writes on `writer` (EventHistory's writer thread alone), reads on `reader` under a lock.
std::unique_ptr<HistoryStore> make_sql_history(const SqlDialect &dialect,
                                               std::unique_ptr<SqlConnection> writer,
                                               std::unique_ptr<SqlConnection> reader);

}  // namespace cudanms::service
