#include "detections.h"

#include <gst/cudanms/cudanmsmeta.h>

void GstCvLabelAnnouncer::announce(GstPad *pad, gint class_id, const std::string &label) {
  if (announced_ && class_id_ == class_id && label_ == label) return;
  gst_pad_push_event(pad, gst_cuda_nms_label_event_new(class_id, label.c_str()));
  announced_ = true;
  class_id_ = class_id;
  label_ = label;
}

gboolean gst_cv_attach_candidates(GstBuffer *buffer, const std::vector<float> &boxes,
                                  const std::vector<float> &scores, gint class_id,
                                  const std::vector<float> &points, guint points_per_candidate) {
  return gst_cv_attach_candidates_of_classes(buffer, boxes, scores,
                                             std::vector<gint32>(scores.size(), class_id), points,
                                             points_per_candidate);
}

gboolean gst_cv_attach_candidates_of_classes(GstBuffer *buffer, const std::vector<float> &boxes,
                                             const std::vector<float> &scores,
                                             const std::vector<gint32> &class_ids,
                                             const std::vector<float> &points,
                                             guint points_per_candidate) {
  const guint n = static_cast<guint>(scores.size());
  GstCudaNmsCandidatesMeta *meta = gst_buffer_add_cuda_nms_candidates_meta(buffer, n);
  if (!meta) return FALSE;
  /* Another detector's candidates with other points already in the meta: ours go without. */
  const bool with_points =
      gst_cuda_nms_candidates_meta_set_points_per_candidate(meta, points_per_candidate);
  if (!with_points && points_per_candidate > 0)
    GST_WARNING("the buffer's candidates carry %u points each, not %u: points dropped",
                meta->points_per_candidate, points_per_candidate);
  if (n > 0)
    gst_cuda_nms_candidates_meta_append_with_points(
        meta, boxes.data(), scores.data(), class_ids.data(),
        with_points && points_per_candidate > 0 ? points.data() : nullptr, n);
  return TRUE;
}
