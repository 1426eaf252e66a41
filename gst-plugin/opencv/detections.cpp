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
                                  const std::vector<float> &scores, gint class_id) {
  const guint n = static_cast<guint>(scores.size());
  GstCudaNmsCandidatesMeta *meta = gst_buffer_add_cuda_nms_candidates_meta(buffer, n);
  if (!meta) return FALSE;
  const std::vector<gint32> class_ids(n, class_id);
  if (n > 0)
    gst_cuda_nms_candidates_meta_append_many(meta, boxes.data(), scores.data(), class_ids.data(),
                                             n);
  return TRUE;
}
