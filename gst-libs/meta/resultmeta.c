/* The result meta: the boxes cudanms kept, with their scores, classes, the candidates each one
 * stands for and, after boxtrack, their track ids. */
#include <string.h>

#include "gst/cudanms/cudanmsmeta.h"
#include "metatransform.h"

GType gst_cuda_nms_result_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType _type = gst_meta_api_type_register("GstCudaNmsResultMetaAPI", cudanms_meta_tags);
    g_once_init_leave(&type, _type);
  }
  return type;
}

static gboolean result_meta_init(GstMeta *meta, gpointer params, GstBuffer *buffer) {
  GstCudaNmsResultMeta *r = (GstCudaNmsResultMeta *)meta;
  (void)params;
  (void)buffer;
  r->n_kept = 0;
  r->boxes = NULL;
  r->scores = NULL;
  r->class_ids = NULL;
  r->candidates_in = r->dropped_score = r->invalid = r->dropped_capacity = r->kept = 0;
  r->latency_ns = 0;
  r->gpu_time_ns = 0;
  r->backend = "cpu";
  r->labels = NULL;
  r->points_per_box = 0;
  r->points = NULL;
  r->members = NULL;
  r->track_ids = NULL;
  return TRUE;
}

static void result_meta_free(GstMeta *meta, GstBuffer *buffer) {
  GstCudaNmsResultMeta *r = (GstCudaNmsResultMeta *)meta;
  (void)buffer;
  g_clear_pointer(&r->boxes, g_free);
  g_clear_pointer(&r->scores, g_free);
  g_clear_pointer(&r->class_ids, g_free);
  g_clear_pointer(&r->labels, g_free);
  g_clear_pointer(&r->points, g_free);
  g_clear_pointer(&r->members, g_free);
  g_clear_pointer(&r->track_ids, g_free);
  r->n_kept = 0;
}

static GstCudaNmsResultMeta *result_meta_copy(GstBuffer *dest, const GstCudaNmsResultMeta *src) {
  GstCudaNmsResultMeta *dst = gst_buffer_add_cuda_nms_result_meta(dest, src->n_kept);
  if (!dst) return NULL;
  if (src->n_kept > 0) {
    memcpy(dst->boxes, src->boxes, 4 * sizeof(gfloat) * (gsize)src->n_kept);
    memcpy(dst->scores, src->scores, sizeof(gfloat) * (gsize)src->n_kept);
    memcpy(dst->class_ids, src->class_ids, sizeof(gint32) * (gsize)src->n_kept);
    memcpy(dst->labels, src->labels, sizeof(const gchar *) * (gsize)src->n_kept);
  }
  dst->candidates_in = src->candidates_in;
  dst->dropped_score = src->dropped_score;
  dst->invalid = src->invalid;
  dst->dropped_capacity = src->dropped_capacity;
  dst->kept = src->kept;
  dst->latency_ns = src->latency_ns;
  dst->gpu_time_ns = src->gpu_time_ns;
  dst->backend = src->backend;
  gst_cuda_nms_result_meta_set_points_per_box(dst, src->points_per_box);
  if (dst->points)
    memcpy(dst->points, src->points, 2 * sizeof(gfloat) * (gsize)src->points_per_box * src->n_kept);
  if (src->members) {
    gst_cuda_nms_result_meta_set_members(dst);
    if (dst->members) memcpy(dst->members, src->members, sizeof(guint) * (gsize)src->n_kept);
  }
  if (src->track_ids) {
    gst_cuda_nms_result_meta_set_track_ids(dst);
    if (dst->track_ids)
      memcpy(dst->track_ids, src->track_ids, sizeof(guint64) * (gsize)src->n_kept);
  }
  return dst;
}

static gboolean result_meta_transform(GstBuffer *dest, GstMeta *meta, GstBuffer *buffer,
                                      GQuark type, gpointer data) {
  const GstCudaNmsResultMeta *src = (const GstCudaNmsResultMeta *)meta;
  GstCudaNmsResultMeta *dst;
  (void)buffer;

  if (GST_META_TRANSFORM_IS_COPY(type)) return result_meta_copy(dest, src) != NULL;
  if (GST_VIDEO_META_TRANSFORM_IS_SCALE(type)) {
    gdouble fx, fy;
    if (!cudanms_meta_scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    dst = result_meta_copy(dest, src);
    if (!dst) return FALSE;
    cudanms_meta_scale_boxes(dst->boxes, dst->n_kept, fx, fy);
    if (dst->points)
      cudanms_meta_scale_points(dst->points, (gsize)dst->points_per_box * dst->n_kept, fx, fy);
    return TRUE;
  }
  return FALSE;
}

const GstMetaInfo *gst_cuda_nms_result_meta_get_info(void) {
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter((GstMetaInfo **)&info)) {
    const GstMetaInfo *mi = gst_meta_register(
        GST_CUDA_NMS_RESULT_META_API_TYPE, "GstCudaNmsResultMeta", sizeof(GstCudaNmsResultMeta),
        result_meta_init, result_meta_free, result_meta_transform);
    g_once_init_leave((GstMetaInfo **)&info, (GstMetaInfo *)mi);
  }
  return info;
}

GstCudaNmsResultMeta *gst_buffer_add_cuda_nms_result_meta(GstBuffer *buffer, guint n_kept) {
  GstCudaNmsResultMeta *r;
  g_return_val_if_fail(GST_IS_BUFFER(buffer), NULL);
  g_return_val_if_fail(gst_buffer_is_writable(buffer), NULL);

  r = (GstCudaNmsResultMeta *)gst_buffer_add_meta(buffer, GST_CUDA_NMS_RESULT_META_INFO, NULL);
  if (!r) return NULL;
  r->n_kept = n_kept;
  if (n_kept > 0) {
    r->boxes = g_new0(gfloat, 4 * (gsize)n_kept);
    r->scores = g_new0(gfloat, n_kept);
    r->class_ids = g_new0(gint32, n_kept);
    r->labels = g_new0(const gchar *, n_kept);
  }
  return r;
}

void gst_cuda_nms_result_meta_set_members(GstCudaNmsResultMeta *meta) {
  g_return_if_fail(meta != NULL);
  g_free(meta->members);
  meta->members = meta->n_kept > 0 ? g_new0(guint, meta->n_kept) : NULL;
}

void gst_cuda_nms_result_meta_set_track_ids(GstCudaNmsResultMeta *meta) {
  g_return_if_fail(meta != NULL);
  g_free(meta->track_ids);
  meta->track_ids = meta->n_kept > 0 ? g_new0(guint64, meta->n_kept) : NULL;
}

void gst_cuda_nms_result_meta_set_points_per_box(GstCudaNmsResultMeta *meta, guint points_per_box) {
  g_return_if_fail(meta != NULL);
  g_free(meta->points);
  meta->points = NULL;
  meta->points_per_box = points_per_box;
  if (points_per_box > 0 && meta->n_kept > 0)
    meta->points = g_new0(gfloat, 2 * (gsize)points_per_box * meta->n_kept);
}
