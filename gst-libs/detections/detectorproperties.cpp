#include "detectorproperties.h"

bool parse_window_size(const gchar *text, gint *width, gint *height) {
  gchar *end = nullptr;
  const guint64 w = g_ascii_strtoull(text, &end, 10);
  if (end == text || (*end != 'x' && *end != 'X')) return false;
  const gchar *h_text = end + 1;
  const guint64 h = g_ascii_strtoull(h_text, &end, 10);
  if (end == h_text || *end != '\0' || w > G_MAXINT || h > G_MAXINT) return false;
  *width = static_cast<gint>(w);
  *height = static_cast<gint>(h);
  return true;
}
