#include "labels.h"

#include <gst/cudanms/cudanmsmeta.h>

#include <unordered_map>

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

const GstCvRoiFields &gst_cv_roi_fields() {
  static const GstCvRoiFields fields = {
      g_quark_from_static_string("detection"), g_quark_from_static_string("confidence"),
      g_quark_from_static_string("label"),     g_quark_from_static_string("label_id"),
      g_quark_from_static_string("members"),   g_quark_from_static_string("x_min"),
      g_quark_from_static_string("y_min"),     g_quark_from_static_string("x_max"),
      g_quark_from_static_string("y_max"),     g_quark_from_static_string("object_id"),
      g_quark_from_static_string("id")};
  return fields;
}

GQuark gst_cv_quark(std::string_view name) {
  /* Keyed by the quarks' own strings, which live as long as the process: a box's lookup hashes
   * its label and copies nothing. */
  thread_local std::unordered_map<std::string_view, GQuark> known;
  auto found = known.find(name);
  if (found != known.end()) return found->second;
  const GQuark quark = g_quark_from_string(std::string(name).c_str());
  known.emplace(g_quark_to_string(quark), quark);
  return quark;
}

const gchar *gst_cv_interned(std::string_view name) {
  return g_quark_to_string(gst_cv_quark(name)); /* a quark's string is interned */
}

gboolean gst_cv_detection_label_id(const GstStructure *detection, gint *class_id) {
  const GValue *v =
      detection ? gst_structure_id_get_value(detection, gst_cv_roi_fields().label_id) : nullptr;
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
