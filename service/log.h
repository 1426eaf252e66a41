// The service's log: one line an event on stderr, no colours and no timestamps of its own (the
// journal, or whoever runs it, stamps the lines), so that `journalctl -u cudanms` reads well.
#pragma once

#include <glib.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace cudanms::service {

// What each line starts with: "cudanms-service", or a worker's "cudanms-service[gpu N]".
inline const char *&log_name() {
  static const char *name = "cudanms-service";
  return name;
}

G_GNUC_PRINTF(1, 2) inline void log_line(const char *format, ...) {
  va_list args;
  va_start(args, format);
  gchar *text = g_strdup_vprintf(format, args);
  va_end(args);
  fprintf(stderr, "%s: %s\n", log_name(), text);  // one write a line: lines never interleave
  g_free(text);
}

// A duration as the log words it: "2.5 s", "12 s".
inline std::string seconds_text(double s) {
  gchar *text = g_strdup_printf(s < 10 ? "%.1f s" : "%.0f s", s);
  std::string out = text;
  g_free(text);
  return out;
}

}  // namespace cudanms::service
