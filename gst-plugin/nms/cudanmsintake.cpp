#include "cudanmsintake.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <cmath>

#include "labels.h"

namespace {

bool finite_box(const float *b, float score) {
  return std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3]) &&
         std::isfinite(score);
}

/* A box the library will judge (finite, non-negative size) that sticks out of the frame. */
bool needs_clipping(const float *b, float score, int width, int height) {
  if (!finite_box(b, score) || b[2] < b[0] || b[3] < b[1]) return false;
  return b[0] < 0.0f || b[1] < 0.0f || b[2] > width || b[3] > height;
}

/* Clips a box to the frame. A box with no area in common with the frame becomes NaN, so that
 * the library counts it invalid; boxes it judges invalid anyway are left alone. */
void clip_box(float *b, float score, int width, int height) {
  if (!needs_clipping(b, score, width, height)) return;
  const float w = static_cast<float>(width), h = static_cast<float>(height);
  if (b[2] <= 0.0f || b[3] <= 0.0f || b[0] >= w || b[1] >= h) {
    b[0] = b[1] = b[2] = b[3] = NAN;
    return;
  }
  b[0] = std::max(b[0], 0.0f);
  b[1] = std::max(b[1], 0.0f);
  b[2] = std::min(b[2], w);
  b[3] = std::min(b[3], h);
}

/* The class of a region of interest without a "label_id": from its roi_type, mapped to the
 * negative numbers, which detector label ids (>= 0) never use. */
int32_t class_of_roi_type(GQuark roi_type) {
  return roi_type == 0 ? 0 : -static_cast<int32_t>(roi_type & 0x7fffffff);
}

bool by_seqnum(GstMeta *a, GstMeta *b) { return gst_meta_get_seqnum(a) < gst_meta_get_seqnum(b); }

}  // namespace

void CandidateIntake::set_frame_size(int width, int height) {
  width_ = width;
  height_ = height;
}

GQuark CandidateIntake::roi_type(size_t index) const {
  return from_rois_ && index < roi_types_.size() ? roi_types_[index] : 0;
}

bool CandidateIntake::device_view(GstBuffer *buffer, void *cuda_context,
                                  cudanms::DeviceCandidatesView *view) {
  GstCudaNmsCandidatesMeta *only = nullptr;
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta(buffer, &state))) {
    if (meta->info->api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE) return false;
    if (meta->info->api != GST_CUDA_NMS_CANDIDATES_META_API_TYPE) continue;
    if (only) return false;
    only = reinterpret_cast<GstCudaNmsCandidatesMeta *>(meta);
  }
  if (!only || !only->device || only->mapped || cuda_context == nullptr ||
      only->device->cuda_context != cuda_context)
    return false;
  const GstCudaNmsDeviceCandidates *d = only->device;
  *view = {d->boxes,    d->scores,      d->class_ids,    d->count,
           d->capacity, d->ready_event, d->cuda_context, d->host_count};
  from_rois_ = false;
  return true;
}

bool CandidateIntake::map_all(GstBuffer *buffer, std::string *error) {
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta(buffer, &state))) {
    if (meta->info->api != GST_CUDA_NMS_CANDIDATES_META_API_TYPE) continue;
    auto *c = reinterpret_cast<GstCudaNmsCandidatesMeta *>(meta);
    GError *failure = nullptr;
    if (!gst_cuda_nms_candidates_meta_map(c, &failure)) {
      *error = failure->message;
      g_error_free(failure);
      return false;
    }
  }
  return true;
}

void CandidateIntake::set_roi(const GstVideoRegionOfInterestMeta *roi, size_t k) {
  float *b = boxes_.data() + 4 * k;
  b[0] = static_cast<float>(roi->x);
  b[1] = static_cast<float>(roi->y);
  b[2] = static_cast<float>(roi->x + static_cast<guint64>(roi->w));
  b[3] = static_cast<float>(roi->y + static_cast<guint64>(roi->h));
  double confidence = 1.0;
  int32_t class_id = class_of_roi_type(roi->roi_type);
  GstStructure *detection = gst_video_region_of_interest_meta_get_param(
      const_cast<GstVideoRegionOfInterestMeta *>(roi), "detection");
  if (detection) {
    gint label_id;
    if (!gst_structure_id_get(detection, gst_cv_roi_fields().confidence, G_TYPE_DOUBLE,
                              &confidence, NULL))
      confidence = 1.0;
    if (gst_cv_detection_label_id(detection, &label_id)) class_id = label_id;
  }
  scores_[k] = static_cast<float>(confidence);
  class_ids_[k] = class_id;
  roi_types_[k] = roi->roi_type;
}

cudanms::CandidatesView CandidateIntake::gather(GstBuffer *buffer) {
  const bool clip = width_ > 0 && height_ > 0;
  size_t n_packed = 0;
  gpointer state = nullptr;
  GstMeta *meta;

  packed_metas_.clear();
  roi_metas_.clear();
  while ((meta = gst_buffer_iterate_meta(buffer, &state))) {
    if (meta->info->api == GST_CUDA_NMS_CANDIDATES_META_API_TYPE) {
      packed_metas_.push_back(meta);
      n_packed += reinterpret_cast<GstCudaNmsCandidatesMeta *>(meta)->n;
    } else if (meta->info->api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE) {
      roi_metas_.push_back(meta);
    }
  }
  from_rois_ = !roi_metas_.empty();

  if (packed_metas_.size() == 1 && roi_metas_.empty()) {
    auto *only = reinterpret_cast<GstCudaNmsCandidatesMeta *>(packed_metas_[0]);
    bool direct = true;
    if (clip) {
      for (guint i = 0; i < only->n && direct; i++)
        direct = !needs_clipping(only->boxes + 4 * static_cast<size_t>(i), only->scores[i], width_,
                                 height_);
    }
    if (direct) {
      return {only->boxes, only->scores, only->class_ids,
              only->n,     only->points, only->points_per_candidate};
    }
  }
  std::sort(packed_metas_.begin(), packed_metas_.end(), by_seqnum);
  std::sort(roi_metas_.begin(), roi_metas_.end(), by_seqnum);

  /* Points when a candidates meta has them: NaN for candidates that come without as many. */
  guint points_per_candidate = 0;
  for (GstMeta *m : packed_metas_) {
    points_per_candidate =
        std::max(points_per_candidate,
                 reinterpret_cast<GstCudaNmsCandidatesMeta *>(m)->points_per_candidate);
  }
  const size_t point_floats = 2 * static_cast<size_t>(points_per_candidate);
  const size_t total = n_packed + roi_metas_.size();
  points_.assign(point_floats * total, NAN);
  boxes_.resize(4 * total);
  scores_.resize(total);
  class_ids_.resize(total);
  roi_types_.resize(total);

  size_t k = 0;
  for (GstMeta *m : packed_metas_) {
    auto *c = reinterpret_cast<GstCudaNmsCandidatesMeta *>(m);
    std::copy_n(c->boxes, 4 * static_cast<size_t>(c->n), boxes_.begin() + 4 * k);
    std::copy_n(c->scores, c->n, scores_.begin() + k);
    std::copy_n(c->class_ids, c->n, class_ids_.begin() + k);
    std::fill_n(roi_types_.begin() + k, c->n, 0);
    if (c->points_per_candidate == points_per_candidate && point_floats > 0)
      std::copy_n(c->points, point_floats * c->n, points_.begin() + point_floats * k);
    k += c->n;
  }
  for (GstMeta *m : roi_metas_) set_roi(reinterpret_cast<GstVideoRegionOfInterestMeta *>(m), k++);

  if (clip) {
    for (size_t i = 0; i < total; i++) clip_box(boxes_.data() + 4 * i, scores_[i], width_, height_);
  }
  return {boxes_.data(), scores_.data(), class_ids_.data(),
          total,         points_.data(), points_per_candidate};
}
