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
