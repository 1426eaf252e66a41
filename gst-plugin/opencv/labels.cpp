#include "labels.h"

#include <cstring>

#define LABEL_EVENT_PREFIX "cudanms-label-"

GstEvent *gst_cv_label_event_new(gint class_id, const gchar *label) {
  gchar *name = g_strdup_printf(LABEL_EVENT_PREFIX "%d", class_id);
  GstStructure *s = gst_structure_new(name, "class-id", G_TYPE_INT, class_id, "label",
                                      G_TYPE_STRING, label, NULL);
  g_free(name);
  return gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM_STICKY, s);
}

gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label) {
  if (GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_DOWNSTREAM_STICKY) return FALSE;
  const GstStructure *s = gst_event_get_structure(event);
  if (!s || !g_str_has_prefix(gst_structure_get_name(s), LABEL_EVENT_PREFIX)) return FALSE;
  const gchar *text = gst_structure_get_string(s, "label");
  if (!text || !gst_structure_get_int(s, "class-id", class_id)) return FALSE;
  *label = text;
  return TRUE;
}

std::string gst_cv_label_lookup(const std::map<gint, std::string> &labels, gint class_id,
                                const gchar *fallback) {
  auto it = labels.find(class_id);
  if (it != labels.end()) return it->second;
  if (fallback && *fallback) return fallback;
  return std::to_string(class_id);
}
