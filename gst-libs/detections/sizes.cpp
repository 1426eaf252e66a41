#include "sizes.h"

gboolean gst_cv_parse_size(const gchar *text, gint *width, gint *height) {
  if (!text) return FALSE;
  gchar *end = nullptr;
  const guint64 w = g_ascii_strtoull(text, &end, 10);
  if (end == text || (*end != 'x' && *end != 'X')) return FALSE;
  const gchar *h_text = end + 1;
  const guint64 h = g_ascii_strtoull(h_text, &end, 10);
  if (end == h_text || *end != '\0' || w > G_MAXINT || h > G_MAXINT) return FALSE;
  *width = static_cast<gint>(w);
  *height = static_cast<gint>(h);
  return TRUE;
}
