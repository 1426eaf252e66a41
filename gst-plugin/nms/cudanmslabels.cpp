#include "cudanmslabels.h"

#include <cudanms/bounded_file.h>
#include <gst/cudanms/cudanmsmeta.h>

#include "labels.h"

ClassLabels::Table ClassLabels::parse_list(const std::string &text) {
  auto labels = std::make_shared<std::vector<const gchar *>>();
  if (text.find_first_not_of(" \t") == std::string::npos) return labels;
  gchar **names = g_strsplit(text.c_str(), ",", -1);
  for (gchar **name = names; *name; ++name) labels->push_back(g_intern_string(g_strstrip(*name)));
  g_strfreev(names);
  return labels;
}

bool ClassLabels::read_file(const std::string &path, Table *table, std::string *error) {
  std::string contents;
  if (!cudanms::read_bounded_file(path, cudanms::kLabelsFileLimit, &contents, error)) return false;
  auto labels = std::make_shared<std::vector<const gchar *>>();
  gchar **lines = g_strsplit(contents.c_str(), "\n", -1);
  for (gchar **line = lines; *line; ++line) {
    /* A last line ending in a newline leaves an empty piece that is no label. */
    if (**line == '\0' && *(line + 1) == nullptr) break;
    labels->push_back(g_intern_string(g_strstrip(*line)));
  }
  g_strfreev(lines);
  *table = labels;
  return true;
}

bool ClassLabels::learn(GstEvent *event) {
  gint class_id;
  const gchar *label;
  if (!gst_cuda_nms_label_event_parse(event, &class_id, &label)) return false;
  announced_[class_id] = g_intern_string(label);
  return true;
}

const gchar *ClassLabels::lookup(int32_t class_id, GQuark roi_type) const {
  if (table_ && class_id >= 0 && static_cast<size_t>(class_id) < table_->size()) {
    const gchar *label = (*table_)[class_id];
    if (*label) return label;
  }
  if (roi_type != 0) return g_quark_to_string(roi_type);
  const auto it = announced_.find(class_id);
  if (it != announced_.end()) return it->second;
  return gst_cv_interned(std::to_string(class_id)); /* no lock a box (labels.h) */
}

int32_t ClassLabels::published_id(int32_t class_id, GQuark roi_type) const {
  if (class_id >= 0) return class_id;
  const gchar *name = roi_type ? g_quark_to_string(roi_type) : nullptr;
  if (table_ && name) {
    for (size_t i = 0; i < table_->size(); ++i)
      if (g_strcmp0((*table_)[i], name) == 0) return static_cast<int32_t>(i);
  }
  return -1;
}
