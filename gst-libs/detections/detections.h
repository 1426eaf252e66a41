/* What the detector elements (cvdetect, cudacascade) send downstream: their class label, once
 * and whenever it changes, and one candidates meta per frame. */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

/* Pushes the label event of (class_id, label) on @pad unless it is the one last pushed. */
class GstCvLabelAnnouncer {
 public:
  void announce(GstPad *pad, gint class_id, const std::string &label);
  void reset() { announced_ = false; }

 private:
  bool announced_ = false;
  gint class_id_ = 0;
  std::string label_;
};

/* Attaches the frame's candidates (boxes: x1, y1, x2, y2 each), all of @class_id, as one
 * candidates meta, even when there are none: downstream can tell "no candidates" from "no
 * detector". With @points_per_candidate > 0, @points holds that many (x, y) per candidate.
 * FALSE when the meta cannot be added. */
gboolean gst_cv_attach_candidates(GstBuffer *buffer, const std::vector<float> &boxes,
                                  const std::vector<float> &scores, gint class_id,
                                  const std::vector<float> &points = {},
                                  guint points_per_candidate = 0);
/* The same with each candidate's own class id. */
gboolean gst_cv_attach_candidates_of_classes(GstBuffer *buffer, const std::vector<float> &boxes,
                                             const std::vector<float> &scores,
                                             const std::vector<gint32> &class_ids,
                                             const std::vector<float> &points = {},
                                             guint points_per_candidate = 0);
