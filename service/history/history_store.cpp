#include "history_store.h"

#include <regex>

namespace cudanms::service {

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
