/* The names of the classes of the cudanms element's kept boxes. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

/* A kept box's label comes from, in this order: the element's table (the labels or labels-file
 * property, indexed by class id), the roi_type of the ROI meta the box came from, the label the
 * detector announced for its class (gst_cuda_nms_label_event_new()); else its class id in
 * decimal. Labels are interned strings: they outlive every buffer and meta. */
class ClassLabels {
 public:
  using Table = std::shared_ptr<const std::vector<const gchar *>>;

  /* "person,bicycle,car": class 0 is person. Blanks around a name are dropped; empty text: none. */
  static Table parse_list(const std::string &text);
  /* One label a line (a COCO-style names file); blank lines count as empty labels. FALSE with
   * *error set when the file cannot be read. */
  static bool read_file(const std::string &path, Table *table, std::string *error);

  void set_table(Table table) { table_ = std::move(table); }
  /* TRUE when @event announced a label (now known). */
  bool learn(GstEvent *event);
  void forget_announced() { announced_.clear(); }

  const gchar *lookup(int32_t class_id, GQuark roi_type) const;
  /* The class id the box is published with: @class_id, or for a box keyed by its roi_type alone
   * (a negative @class_id) the roi_type's line in the labels table; -1 when it has none. */
  int32_t published_id(int32_t class_id, GQuark roi_type) const;

 private:
  Table table_;
  std::map<int32_t, const gchar *> announced_;
};
