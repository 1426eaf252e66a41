// The history in a SQLite file: one a host; a supervisor's workers write into the same file
// (SQLite's locking between them, WAL so that readers never wait for a writer).
#include <sqlite3.h>

#include <map>
#include <set>

#include "history_store.h"

namespace cudanms::service {
namespace sqlite_store {  // named: the build joins the room's files into one

constexpr int kBusyMs = 200;  // a statement waits this long for another writer's lock (then
                              // EventHistory tries the batch again)
constexpr SqlTypes kTypes = {"INTEGER PRIMARY KEY", "INTEGER", "REAL", "INTEGER", "0"};
constexpr const char *kIndexes =
    "CREATE INDEX IF NOT EXISTS events_by_time ON events (time_us DESC, seq DESC);"
    "CREATE INDEX IF NOT EXISTS events_by_camera ON events (camera, time_us DESC, seq DESC);";

std::string message_of(sqlite3 *db) { return sqlite3_errmsg(db); }

// A history made before events had pictures or clips gains their columns; another process may
// have just added one.
bool add_picture_columns(sqlite3 *db, char **why) {
  std::set<std::string> has;
  sqlite3_stmt *s = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA table_info(events)", -1, &s, nullptr) == SQLITE_OK)
    while (sqlite3_step(s) == SQLITE_ROW)
      has.insert(reinterpret_cast<const char *>(sqlite3_column_text(s, 1)));
  sqlite3_finalize(s);
  for (const auto &[name, definition] : added_event_columns(kTypes)) {
    if (has.count(name)) continue;
    const std::string add = "ALTER TABLE events ADD COLUMN " + definition;
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
      sqlite3_exec(db, events_table_sql("events", kTypes).c_str(), nullptr, nullptr, &why) !=
          SQLITE_OK ||
      !add_picture_columns(db, &why) ||
      sqlite3_exec(db, kIndexes, nullptr, nullptr, &why) != SQLITE_OK) {
    *error = why ? why : message_of(db);
    sqlite3_free(why);
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

// One connection, its statements prepared once each.
class SqliteConnection : public SqlConnection {
 public:
  explicit SqliteConnection(sqlite3 *db) : db_(db) {}
  ~SqliteConnection() override {
    for (auto &[sql, statement] : prepared_) sqlite3_finalize(statement);
    sqlite3_close(db_);
  }
  bool run(const std::string &sql, const SqlParams &params, const SqlRow &row,
           std::string *error) override {
    sqlite3_stmt *&s = prepared_[sql];
    if (!s && sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      *error = message_of(db_);
      prepared_.erase(sql);
      return false;
    }
    for (size_t i = 0; i < params.size(); i++) {
      const int at = sqlite3_bind_parameter_index(s, ("$" + std::to_string(i + 1)).c_str());
      if (at == 0) continue;  // not in this statement
      if (params[i])
        sqlite3_bind_text(s, at, params[i]->c_str(), static_cast<int>(params[i]->size()),
                          SQLITE_TRANSIENT);
      else
        sqlite3_bind_null(s, at);
    }
    int step;
    std::vector<std::string> columns;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
      if (!row) continue;
      columns.resize(static_cast<size_t>(sqlite3_column_count(s)));
      for (size_t c = 0; c < columns.size(); c++) {
        const unsigned char *text = sqlite3_column_text(s, static_cast<int>(c));
        columns[c] = text ? reinterpret_cast<const char *>(text) : "";
      }
      row(columns);
    }
    if (step != SQLITE_DONE) *error = message_of(db_);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return step == SQLITE_DONE;
  }

 private:
  sqlite3 *const db_;
  std::map<std::string, sqlite3_stmt *> prepared_;
};

}  // namespace sqlite_store

std::unique_ptr<HistoryStore> open_sqlite_history(const std::string &path, std::string *error) {
  sqlite3 *writer = sqlite_store::connect(path, error);
  sqlite3 *reader = writer ? sqlite_store::connect(path, error) : nullptr;
  if (!reader) {
    *error = path + ": " + *error;
    sqlite3_close(writer);
    return nullptr;
  }
  return std::make_unique<HistoryStore>(SqlDialect{"events", "BEGIN IMMEDIATE"},
                                        std::make_unique<sqlite_store::SqliteConnection>(writer),
                                        std::make_unique<sqlite_store::SqliteConnection>(reader));
}

}  // namespace cudanms::service
