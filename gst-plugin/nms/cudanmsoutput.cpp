#include "cudanmsoutput.h"

#include <gst/video/video.h>

#include <algorithm>

#include "keptboxes.h"
#include "labels.h"

namespace {

gboolean drop_result_meta(GstBuffer *, GstMeta **meta, gpointer) {
  if ((*meta)->info->api == GST_CUDA_NMS_RESULT_META_API_TYPE) *meta = nullptr;
  return TRUE;
}

gboolean drop_candidate_meta(GstBuffer *, GstMeta **meta, gpointer) {
  const GType api = (*meta)->info->api;
  if (api == GST_CUDA_NMS_CANDIDATES_META_API_TYPE ||
      api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)
    *meta = nullptr;
  return TRUE;
}

}  // namespace

void gst_cuda_nms_remove_result_metas(GstBuffer *buffer) {
  gst_buffer_foreach_meta(buffer, drop_result_meta, nullptr);
}

void gst_cuda_nms_remove_candidate_metas(GstBuffer *buffer) {
  gst_buffer_foreach_meta(buffer, drop_candidate_meta, nullptr);
}

GstCudaNmsResultMeta *gst_cuda_nms_add_result_meta(GstBuffer *buffer,
                                                   const cudanms::CandidatesView &view,
                                                   const cudanms::Result &result,
                                                   const CandidateIntake &intake,
                                                   const ClassLabels &labels, gint64 latency_ns,
                                                   const gchar *backend) {
  GstCudaNmsResultMeta *meta =
      gst_buffer_add_cuda_nms_result_meta(buffer, static_cast<guint>(result.kept.size()));
  if (!meta) return nullptr;
  /* Soft-NMS's decayed scores and weighted NMS's merged boxes come with the result. */
  const bool valued = !result.kept_scores.empty();
  for (size_t i = 0; i < result.kept.size(); i++) {
    const size_t index = result.kept[i];
    std::copy_n(valued ? &result.kept_boxes[4 * i] : view.boxes + 4 * index, 4,
                meta->boxes + 4 * i);
    meta->scores[i] = valued ? result.kept_scores[i] : view.scores[index];
    const int32_t class_id = view.class_ids ? view.class_ids[index] : 0;
    meta->labels[i] = labels.lookup(class_id, intake.roi_type(index));
    meta->class_ids[i] = labels.published_id(class_id, intake.roi_type(index));
  }
  if (!result.kept_points.empty()) {
    gst_cuda_nms_result_meta_set_points_per_box(meta, view.points_per_candidate);
    std::copy(result.kept_points.begin(), result.kept_points.end(), meta->points);
  }
  if (!result.kept_neighbors.empty()) {
    gst_cuda_nms_result_meta_set_members(meta);
    for (size_t i = 0; i < result.kept.size(); i++) meta->members[i] = result.kept_neighbors[i] + 1;
  }
  meta->candidates_in = result.counts.in;
  meta->dropped_score = result.counts.below_score;
  meta->invalid = result.counts.invalid;
  meta->dropped_capacity = result.counts.over_capacity;
  meta->kept = result.counts.kept;
  meta->latency_ns = static_cast<guint64>(latency_ns);
  meta->backend = backend;
  return meta;
}

void gst_cuda_nms_add_roi_metas(GstBuffer *buffer, const GstCudaNmsResultMeta *result, int width,
                                int height) {
  const bool normalize = width > 0 && height > 0;
  const GstCvRoiFields &f = gst_cv_roi_fields(); /* by quark: no lock a box (labels.h) */
  for (guint i = 0; i < result->n_kept; i++) {
    const float *b = result->boxes + 4 * static_cast<size_t>(i);
    guint x, y, w, h;
    gst_cv_roi_rect(b, &x, &y, &w, &h);
    const gchar *label = result->labels[i];
    GstVideoRegionOfInterestMeta *roi = gst_buffer_add_video_region_of_interest_meta_id(
        buffer, label ? gst_cv_quark(label) : 0, x, y, w, h);
    if (!roi) continue;
    GstStructure *detection =
        gst_structure_new_id(f.detection, f.confidence, G_TYPE_DOUBLE,
                             static_cast<double>(result->scores[i]), f.label, G_TYPE_STRING, label,
                             NULL);
    if (result->class_ids[i] >= 0)
      gst_structure_id_set(detection, f.label_id, G_TYPE_INT,
                           static_cast<gint>(result->class_ids[i]), NULL);
    if (result->members)
      gst_structure_id_set(detection, f.members, G_TYPE_UINT, result->members[i], NULL);
    if (normalize) {
      gst_structure_id_set(detection, f.x_min, G_TYPE_DOUBLE, b[0] / static_cast<double>(width),
                           f.y_min, G_TYPE_DOUBLE, b[1] / static_cast<double>(height), f.x_max,
                           G_TYPE_DOUBLE, b[2] / static_cast<double>(width), f.y_max,
                           G_TYPE_DOUBLE, b[3] / static_cast<double>(height), NULL);
    }
    gst_video_region_of_interest_meta_add_param(roi, detection);
  }
}
