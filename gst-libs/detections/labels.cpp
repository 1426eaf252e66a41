#include "labels.h"

#include <gst/cudanms/cudanmsmeta.h>

gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label) {
  const gchar *text = nullptr;
  if (!gst_cuda_nms_label_event_parse(event, class_id, &text)) return FALSE;
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

gboolean gst_cv_detection_label_id(const GstStructure *detection, gint *class_id) {
  const GValue *v = detection ? gst_structure_get_value(detection, "label_id") : nullptr;
  if (!v) return FALSE;
  gint64 id = -1;
  if (G_VALUE_HOLDS_INT(v)) id = g_value_get_int(v);
  else if (G_VALUE_HOLDS_UINT(v)) id = g_value_get_uint(v);
  else if (G_VALUE_HOLDS_INT64(v)) id = g_value_get_int64(v);
  else if (G_VALUE_HOLDS_UINT64(v)) id = static_cast<gint64>(MIN(g_value_get_uint64(v), G_MAXUINT64 / 2));
  if (id < 0 || id > G_MAXINT) return FALSE;
  *class_id = static_cast<gint>(id);
  return TRUE;
}
