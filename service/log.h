// The service's log: one line an event on stderr, no colours and no timestamps of its own (the
// journal, or whoever runs it, stamps the lines), so that `journalctl -u cudanms` reads well.
#pragma once

#include <glib.h>

#include <cstdarg>
#include <cstdio>

namespace cudanms::service {

G_GNUC_PRINTF(1, 2) inline void log_line(const char *format, ...) {
  va_list args;
  va_start(args, format);
  gchar *text = g_strdup_vprintf(format, args);
  va_end(args);
  fprintf(stderr, "cudanms-service: %s\n", text);  // one write a line: lines never interleave
  g_free(text);
}

}  // namespace cudanms::service
