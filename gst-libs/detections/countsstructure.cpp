#include "countsstructure.h"

namespace {

GstStructure *line_structure(const cudanms::LineCounts &c) {
  return gst_structure_new("line", "in", G_TYPE_UINT64, static_cast<guint64>(c.in), "out",
                           G_TYPE_UINT64, static_cast<guint64>(c.out), NULL);
}

/* Sets @field of @parent to @child, which it frees. */
void take_field(GstStructure *parent, const std::string &field, GstStructure *child) {
  gst_structure_set(parent, field.c_str(), GST_TYPE_STRUCTURE, child, NULL);
  gst_structure_free(child);
}

cudanms::LineCounts line_counts_of(const GstStructure *s) {
  cudanms::LineCounts c;
  guint64 in = 0, out = 0;
  if (gst_structure_get_uint64(s, "in", &in)) c.in = in;
  if (gst_structure_get_uint64(s, "out", &out)) c.out = out;
  return c;
}

const GstStructure *structure_field(const GstStructure *s, const gchar *field) {
  const GValue *v = gst_structure_get_value(s, field);
  return v && GST_VALUE_HOLDS_STRUCTURE(v) ? gst_value_get_structure(v) : nullptr;
}

}  // namespace

GstStructure *gst_cuda_nms_counts_structure(const cudanms::LineTallies &counts) {
  GstStructure *out = gst_structure_new_empty("counts");
  for (const auto &[name, tally] : counts) {
    GstStructure *line = line_structure(tally.total);
    GstStructure *labels = gst_structure_new_empty("labels");
    for (const auto &[label, n] : tally.by_label) take_field(labels, label, line_structure(n));
    take_field(line, "labels", labels);
    take_field(out, name, line);
  }
  return out;
}

cudanms::LineTallies gst_cuda_nms_counts_from_structure(const GstStructure *structure) {
  cudanms::LineTallies counts;
  for (gint i = 0; i < gst_structure_n_fields(structure); i++) {
    const gchar *name = gst_structure_nth_field_name(structure, i);
    const GstStructure *line = structure_field(structure, name);
    if (!line) continue;
    cudanms::LineTally &tally = counts[name];
    tally.total = line_counts_of(line);
    const GstStructure *labels = structure_field(line, "labels");
    for (gint k = 0; labels && k < gst_structure_n_fields(labels); k++) {
      const gchar *label = gst_structure_nth_field_name(labels, k);
      if (const GstStructure *each = structure_field(labels, label))
        tally.by_label[label] = line_counts_of(each);
    }
  }
  return counts;
}
