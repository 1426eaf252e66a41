#include "keptboxes.h"

#include <gst/cudanms/cudanmsmeta.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "labels.h"

namespace {

using Rect = std::tuple<guint, guint, guint, guint>;

std::vector<GstVideoRegionOfInterestMeta *> roi_metas(GstBuffer *buf) {
  std::vector<GstVideoRegionOfInterestMeta *> out;
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta_filtered(buf, &state,
                                                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)))
    out.push_back(reinterpret_cast<GstVideoRegionOfInterestMeta *>(meta));
  return out;
}

/* The result meta's boxes, each with the ROI meta cudanms added for it. */
std::vector<KeptBox> result_boxes(GstBuffer *buf, const GstCudaNmsResultMeta *result,
                                  const std::map<gint, std::string> &labels) {
  std::multimap<Rect, GstVideoRegionOfInterestMeta *> rois;
  for (GstVideoRegionOfInterestMeta *roi : roi_metas(buf))
    rois.emplace(Rect{roi->x, roi->y, roi->w, roi->h}, roi);
  std::vector<KeptBox> boxes;
  boxes.reserve(result->n_kept);
  for (guint i = 0; i < result->n_kept; i++) {
    const gfloat *b = result->boxes + 4 * static_cast<size_t>(i);
    KeptBox box;
    box.x1 = b[0];
    box.y1 = b[1];
    box.x2 = b[2];
    box.y2 = b[3];
    box.score = result->scores[i];
    box.class_id = result->class_ids[i];
    /* cudanms names every kept box; a result meta from elsewhere may leave labels NULL. */
    const gchar *label = result->labels ? result->labels[i] : nullptr;
    box.label = label ? std::string(label) : gst_cv_label_lookup(labels, box.class_id);
    if (result->points) {
      const size_t per = 2 * static_cast<size_t>(result->points_per_box);
      const gfloat *p = result->points + per * i;
      box.points.assign(p, p + per);
    }
    if (result->members) box.members = result->members[i];
    if (result->track_ids) box.track_id = result->track_ids[i];
    guint x, y, w, h;
    gst_cv_roi_rect(b, &x, &y, &w, &h);
    const GQuark type = gst_cv_quark(box.label); /* no lock a box (labels.h) */
    auto [first, last] = rois.equal_range(Rect{x, y, w, h});
    for (auto it = first; it != last; ++it) {
      if (it->second->roi_type != type) continue;
      box.roi = it->second;
      rois.erase(it);
      break;
    }
    boxes.push_back(std::move(box));
  }
  return boxes;
}

std::vector<KeptBox> roi_boxes(GstBuffer *buf, const std::map<gint, std::string> &labels) {
  std::vector<KeptBox> boxes;
  for (GstVideoRegionOfInterestMeta *roi : roi_metas(buf)) {
    const gchar *roi_type = g_quark_to_string(roi->roi_type);
    KeptBox box;
    box.x1 = static_cast<float>(roi->x);
    box.y1 = static_cast<float>(roi->y);
    box.x2 = static_cast<float>(roi->x + roi->w);
    box.y2 = static_cast<float>(roi->y + roi->h);
    box.label = roi_type ? roi_type : "";
    box.roi = roi;
    if (GstStructure *d = gst_video_region_of_interest_meta_get_param(roi, "detection")) {
      const GstCvRoiFields &f = gst_cv_roi_fields(); /* by quark: no lock a box (labels.h) */
      gst_structure_id_get(d, f.confidence, G_TYPE_DOUBLE, &box.score, NULL);
      if (gst_cv_detection_label_id(d, &box.class_id))
        box.label = gst_cv_label_lookup(labels, box.class_id, roi_type);
      const GValue *label = gst_structure_id_get_value(d, f.label);
      if (label && G_VALUE_HOLDS_STRING(label) && g_value_get_string(label))
        box.label = g_value_get_string(label);
      gst_structure_id_get(d, f.members, G_TYPE_UINT, &box.members, NULL);
    }
    box.track_id = gst_cv_roi_track_id(roi);
    boxes.push_back(std::move(box));
  }
  return boxes;
}

}  // namespace

std::vector<KeptBox> gst_cv_kept_boxes(GstBuffer *buf, const std::map<gint, std::string> &labels) {
  if (const GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf))
    return result_boxes(buf, result, labels);
  return roi_boxes(buf, labels);
}

void gst_cv_roi_rect(const gfloat *box, guint *x, guint *y, guint *w, guint *h) {
  /* Within guint's range (a result meta of another producer may hold 1e30); NaN gives 0. */
  auto pixel = [](double v, double least) { return std::min(std::max(least, v), 4294967295.0); };
  const double x1 = pixel(std::floor(static_cast<double>(box[0])), 0.0);
  const double y1 = pixel(std::floor(static_cast<double>(box[1])), 0.0);
  const double x2 = pixel(std::ceil(static_cast<double>(box[2])), x1);
  const double y2 = pixel(std::ceil(static_cast<double>(box[3])), y1);
  *x = static_cast<guint>(x1);
  *y = static_cast<guint>(y1);
  *w = static_cast<guint>(x2 - x1);
  *h = static_cast<guint>(y2 - y1);
}

guint64 gst_cv_roi_track_id(GstVideoRegionOfInterestMeta *roi) {
  GstStructure *s = gst_video_region_of_interest_meta_get_param(roi, "object_id");
  const GValue *v = s ? gst_structure_id_get_value(s, gst_cv_roi_fields().id) : nullptr;
  if (v && G_VALUE_HOLDS_INT(v)) return g_value_get_int(v) > 0 ? g_value_get_int(v) : 0;
  return v && G_VALUE_HOLDS_UINT64(v) ? g_value_get_uint64(v) : 0;
}

void gst_cv_roi_set_track_id(GstVideoRegionOfInterestMeta *roi, guint64 id) {
  const GstCvRoiFields &f = gst_cv_roi_fields(); /* by quark: no lock a box (labels.h) */
  GstStructure *s = gst_video_region_of_interest_meta_get_param(roi, "object_id");
  if (!s) {
    s = gst_structure_new_id_empty(f.object_id);
    gst_video_region_of_interest_meta_add_param(roi, s); /* takes it */
  }
  if (id <= G_MAXINT) {
    gst_structure_id_set(s, f.id, G_TYPE_INT, static_cast<gint>(id), NULL);
  } else {
    gst_structure_id_set(s, f.id, G_TYPE_UINT64, id, NULL);
  }
}
