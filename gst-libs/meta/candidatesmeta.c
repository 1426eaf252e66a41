/* The candidates meta: what a detector found in a frame, undecided, for cudanms to reduce; on the
 * host, or left in GPU memory (a device candidates buffer). */
#include <gst/video/video.h>
#include <math.h>
#include <string.h>

#include "gst/cudanms/cudanmsmeta.h"
#include "metatransform.h"

GST_DEBUG_CATEGORY_STATIC(cudanms_meta_debug);
#define GST_CAT_DEFAULT cudanms_meta_debug

GType gst_cuda_nms_candidates_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType _type = gst_meta_api_type_register("GstCudaNmsCandidatesMetaAPI", cudanms_meta_tags);
    GST_DEBUG_CATEGORY_INIT(cudanms_meta_debug, "cudanmsmeta", 0,
                            "cudanms candidates and result metadata");
    g_once_init_leave(&type, _type);
  }
  return type;
}

GstCudaNmsDeviceCandidates *gst_cuda_nms_device_candidates_new(void) {
  GstCudaNmsDeviceCandidates *dc = g_new0(GstCudaNmsDeviceCandidates, 1);
  dc->refcount = 1;
  return dc;
}

GstCudaNmsDeviceCandidates *gst_cuda_nms_device_candidates_ref(GstCudaNmsDeviceCandidates *dc) {
  g_return_val_if_fail(dc != NULL, NULL);
  g_atomic_int_inc(&dc->refcount);
  return dc;
}

void gst_cuda_nms_device_candidates_unref(GstCudaNmsDeviceCandidates *dc) {
  g_return_if_fail(dc != NULL);
  if (!g_atomic_int_dec_and_test(&dc->refcount)) return;
  if (dc->release) dc->release(dc->user_data);
  g_free(dc);
}

static gboolean candidates_meta_init(GstMeta *meta, gpointer params, GstBuffer *buffer) {
  GstCudaNmsCandidatesMeta *c = (GstCudaNmsCandidatesMeta *)meta;
  (void)params;
  (void)buffer;
  c->n = 0;
  c->capacity = 0;
  c->boxes = NULL;
  c->scores = NULL;
  c->class_ids = NULL;
  c->device = NULL;
  c->mapped = TRUE;
  c->downloads = 0;
  c->points_per_candidate = 0;
  c->points = NULL;
  return TRUE;
}

/* Drops the device candidates, keeping whatever the arrays hold. */
static void candidates_forget_device(GstCudaNmsCandidatesMeta *c) {
  if (c->device) gst_cuda_nms_device_candidates_unref(c->device);
  c->device = NULL;
  c->mapped = TRUE;
}

static void candidates_meta_free(GstMeta *meta, GstBuffer *buffer) {
  GstCudaNmsCandidatesMeta *c = (GstCudaNmsCandidatesMeta *)meta;
  (void)buffer;
  candidates_forget_device(c);
  g_clear_pointer(&c->boxes, g_free);
  g_clear_pointer(&c->scores, g_free);
  g_clear_pointer(&c->class_ids, g_free);
  g_clear_pointer(&c->points, g_free);
  c->n = c->capacity = 0;
}

static void candidates_set_points(GstCudaNmsCandidatesMeta *meta, guint first, const gfloat *points,
                                  guint n);

/* The source's points when the destination carries as many per candidate, else none (NaN). */
static const gfloat *points_for(const GstCudaNmsCandidatesMeta *dst,
                                const GstCudaNmsCandidatesMeta *src) {
  return dst->points_per_candidate == src->points_per_candidate ? src->points : NULL;
}

/* A new copy of @src's candidates in @dest's meta, with its points when the meta was empty. */
static GstCudaNmsCandidatesMeta *candidates_copy_into(GstBuffer *dest,
                                                      const GstCudaNmsCandidatesMeta *src) {
  GstCudaNmsCandidatesMeta *dst = gst_buffer_add_cuda_nms_candidates_meta(dest, src->n);
  if (!dst) return NULL;
  if (dst->n == 0 && !dst->device)
    gst_cuda_nms_candidates_meta_set_points_per_candidate(dst, src->points_per_candidate);
  gst_cuda_nms_candidates_meta_append_with_points(dst, src->boxes, src->scores, src->class_ids,
                                                  points_for(dst, src), src->n);
  return dst;
}

static gboolean candidates_meta_transform(GstBuffer *dest, GstMeta *meta, GstBuffer *buffer,
                                          GQuark type, gpointer data) {
  GstCudaNmsCandidatesMeta *src = (GstCudaNmsCandidatesMeta *)meta;
  GstCudaNmsCandidatesMeta *dst;
  (void)buffer;

  if (GST_META_TRANSFORM_IS_COPY(type)) {
    /* Region copies keep the meta too, as GstVideoRegionOfInterestMeta does. */
    dst = gst_buffer_add_cuda_nms_candidates_meta(dest, src->n);
    if (!dst) return FALSE;
    if (src->device && dst->n == 0 && !dst->device) { /* device candidates have no points */
      /* The copy shares the device candidates, and the host copy if there is one. */
      if (src->mapped)
        gst_cuda_nms_candidates_meta_append_many(dst, src->boxes, src->scores, src->class_ids,
                                                 src->n);
      dst->device = gst_cuda_nms_device_candidates_ref(src->device);
      dst->mapped = src->mapped;
      return TRUE;
    }
    if (!gst_cuda_nms_candidates_meta_map(src, NULL)) return FALSE;
    return candidates_copy_into(dest, src) != NULL;
  }
  if (GST_VIDEO_META_TRANSFORM_IS_SCALE(type)) {
    gdouble fx, fy;
    guint first;
    if (!cudanms_meta_scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    /* Rescaled on the host: the device candidates are downloaded first. */
    if (!gst_cuda_nms_candidates_meta_map(src, NULL)) return FALSE;
    first = gst_buffer_get_cuda_nms_candidates_meta(dest)
                ? gst_buffer_get_cuda_nms_candidates_meta(dest)->n
                : 0;
    dst = candidates_copy_into(dest, src);
    if (!dst) return FALSE;
    cudanms_meta_scale_boxes(dst->boxes + 4 * (gsize)first, src->n, fx, fy);
    if (dst->points)
      cudanms_meta_scale_points(dst->points + 2 * (gsize)dst->points_per_candidate * first,
                                (gsize)dst->points_per_candidate * src->n, fx, fy);
    GST_LOG("scaled %u candidates by %f x %f", src->n, fx, fy);
    return TRUE;
  }
  /* No other transform is known: the meta is dropped. */
  return FALSE;
}

const GstMetaInfo *gst_cuda_nms_candidates_meta_get_info(void) {
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter((GstMetaInfo **)&info)) {
    const GstMetaInfo *mi =
        gst_meta_register(GST_CUDA_NMS_CANDIDATES_META_API_TYPE, "GstCudaNmsCandidatesMeta",
                          sizeof(GstCudaNmsCandidatesMeta), candidates_meta_init,
                          candidates_meta_free, candidates_meta_transform);
    g_once_init_leave((GstMetaInfo **)&info, (GstMetaInfo *)mi);
  }
  return info;
}

GstCudaNmsCandidatesMeta *gst_buffer_add_cuda_nms_candidates_meta(GstBuffer *buffer,
                                                                  guint capacity) {
  GstCudaNmsCandidatesMeta *c;
  g_return_val_if_fail(GST_IS_BUFFER(buffer), NULL);
  g_return_val_if_fail(gst_buffer_is_writable(buffer), NULL);

  c = gst_buffer_get_cuda_nms_candidates_meta(buffer);
  if (!c) {
    c = (GstCudaNmsCandidatesMeta *)gst_buffer_add_meta(buffer, GST_CUDA_NMS_CANDIDATES_META_INFO,
                                                        NULL);
    if (!c) return NULL;
  }
  if ((guint64)c->n + capacity > G_MAXUINT)
    gst_cuda_nms_candidates_meta_reserve(c, G_MAXUINT);
  else
    gst_cuda_nms_candidates_meta_reserve(c, c->n + capacity);
  return c;
}

void gst_cuda_nms_candidates_meta_reserve(GstCudaNmsCandidatesMeta *meta, guint capacity) {
  g_return_if_fail(meta != NULL);
  if (capacity <= meta->capacity) return;
  meta->boxes = g_renew(gfloat, meta->boxes, 4 * (gsize)capacity);
  meta->scores = g_renew(gfloat, meta->scores, capacity);
  meta->class_ids = g_renew(gint32, meta->class_ids, capacity);
  if (meta->points_per_candidate > 0)
    meta->points = g_renew(gfloat, meta->points, 2 * (gsize)meta->points_per_candidate * capacity);
  meta->capacity = capacity;
}

gboolean gst_cuda_nms_candidates_meta_set_points_per_candidate(GstCudaNmsCandidatesMeta *meta,
                                                               guint points_per_candidate) {
  g_return_val_if_fail(meta != NULL, FALSE);
  if (points_per_candidate == meta->points_per_candidate) return TRUE;
  if (meta->device || points_per_candidate > 1024 ||
      (meta->n > 0 && meta->points_per_candidate > 0)) {
    GST_WARNING("%u points per candidate refused: %s", points_per_candidate,
                points_per_candidate > 1024 ? "more than 1024"
                : meta->device              ? "the meta holds device candidates"
                                            : "its candidates have other points");
    return FALSE;
  }
  g_free(meta->points);
  meta->points = NULL;
  meta->points_per_candidate = points_per_candidate;
  if (points_per_candidate > 0 && meta->capacity > 0)
    meta->points = g_new(gfloat, 2 * (gsize)points_per_candidate * meta->capacity);
  candidates_set_points(meta, 0, NULL, meta->n); /* those already there have none */
  return TRUE;
}

gboolean gst_cuda_nms_candidates_meta_set_device(GstCudaNmsCandidatesMeta *meta,
                                                 GstCudaNmsDeviceCandidates *device) {
  g_return_val_if_fail(meta != NULL && device != NULL, FALSE);
  if (meta->n > 0 || meta->device) {
    GST_WARNING("device candidates offered to a meta that already holds candidates: refused");
    gst_cuda_nms_device_candidates_unref(device);
    return FALSE;
  }
  gst_cuda_nms_candidates_meta_set_points_per_candidate(meta, 0); /* device ones have none */
  meta->device = device;
  meta->mapped = FALSE;
  return TRUE;
}

gboolean gst_cuda_nms_candidates_meta_map(GstCudaNmsCandidatesMeta *meta, GError **gerror) {
  gchar *error = NULL;
  g_return_val_if_fail(meta != NULL, FALSE);
  if (meta->mapped) return TRUE;
  guint n = 0;
  gfloat *boxes = NULL, *scores = NULL;
  gint32 *class_ids = NULL;
  if (!meta->device->download ||
      !meta->device->download(meta->device->user_data, &n, &boxes, &scores, &class_ids, &error)) {
    GST_ERROR("could not download %u device candidates: %s", meta->device->capacity,
              error ? error : "the producer gave no download function");
    g_set_error(gerror, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED,
                "could not download the device candidates: %s",
                error ? error : "the producer gave no download function");
    g_free(error);
    return FALSE;
  }
  g_free(meta->boxes);
  g_free(meta->scores);
  g_free(meta->class_ids);
  meta->boxes = boxes;
  meta->scores = scores;
  meta->class_ids = class_ids;
  meta->n = meta->capacity = n;
  meta->downloads++;
  meta->mapped = TRUE;
  GST_LOG("downloaded %u device candidates", meta->n);
  return TRUE;
}

/* Room for @extra more candidates, growing by at least half the capacity. */
static gboolean candidates_grow(GstCudaNmsCandidatesMeta *meta, guint extra) {
  guint64 needed = (guint64)meta->n + extra;
  guint64 grown;
  if (needed > G_MAXUINT) {
    GST_ERROR("more than %u candidates in one meta", G_MAXUINT);
    return FALSE;
  }
  if (needed <= meta->capacity) return TRUE;
  grown = MAX(needed, (guint64)meta->capacity + meta->capacity / 2);
  grown = MAX(grown, 64);
  gst_cuda_nms_candidates_meta_reserve(meta, (guint)MIN(grown, (guint64)G_MAXUINT));
  return TRUE;
}

/* Before host candidates are added to device ones: all of them on the host, the device
 * reference dropped (it would no longer be the whole set). */
static gboolean candidates_take_host(GstCudaNmsCandidatesMeta *meta) {
  if (!gst_cuda_nms_candidates_meta_map(meta, NULL)) return FALSE;
  candidates_forget_device(meta);
  return TRUE;
}

/* The points of candidates [@first, @first + @n): @points, or NaN (no point) when NULL. */
static void candidates_set_points(GstCudaNmsCandidatesMeta *meta, guint first, const gfloat *points,
                                  guint n) {
  const gsize per = 2 * (gsize)meta->points_per_candidate;
  gfloat *dst;
  if (per == 0 || n == 0) return; /* also: no arithmetic on points while it is still NULL */
  dst = meta->points + per * first;
  if (points) {
    memcpy(dst, points, sizeof(gfloat) * per * n);
  } else {
    for (gsize i = 0; i < per * n; i++) dst[i] = NAN;
  }
}

void gst_cuda_nms_candidates_meta_append(GstCudaNmsCandidatesMeta *meta, gfloat x1, gfloat y1,
                                         gfloat x2, gfloat y2, gfloat score, gint32 class_id) {
  gfloat *b;
  g_return_if_fail(meta != NULL);
  if (meta->device && !candidates_take_host(meta)) return;
  if (!candidates_grow(meta, 1)) return;
  b = meta->boxes + 4 * (gsize)meta->n;
  b[0] = x1;
  b[1] = y1;
  b[2] = x2;
  b[3] = y2;
  meta->scores[meta->n] = score;
  meta->class_ids[meta->n] = class_id;
  candidates_set_points(meta, meta->n, NULL, 1);
  meta->n++;
}

void gst_cuda_nms_candidates_meta_append_many(GstCudaNmsCandidatesMeta *meta, const gfloat *boxes,
                                              const gfloat *scores, const gint32 *class_ids,
                                              guint n) {
  gst_cuda_nms_candidates_meta_append_with_points(meta, boxes, scores, class_ids, NULL, n);
}

void gst_cuda_nms_candidates_meta_append_with_points(GstCudaNmsCandidatesMeta *meta,
                                                     const gfloat *boxes, const gfloat *scores,
                                                     const gint32 *class_ids, const gfloat *points,
                                                     guint n) {
  g_return_if_fail(meta != NULL);
  if (n == 0) return;
  g_return_if_fail(boxes != NULL && scores != NULL);
  if (meta->device && !candidates_take_host(meta)) return;
  if (!candidates_grow(meta, n)) return;
  memcpy(meta->boxes + 4 * (gsize)meta->n, boxes, 4 * sizeof(gfloat) * (gsize)n);
  memcpy(meta->scores + meta->n, scores, sizeof(gfloat) * (gsize)n);
  if (class_ids)
    memcpy(meta->class_ids + meta->n, class_ids, sizeof(gint32) * (gsize)n);
  else
    memset(meta->class_ids + meta->n, 0, sizeof(gint32) * (gsize)n);
  candidates_set_points(meta, meta->n, points, n);
  meta->n += n;
}

void gst_cuda_nms_candidates_meta_clear(GstCudaNmsCandidatesMeta *meta) {
  g_return_if_fail(meta != NULL);
  candidates_forget_device(meta);
  meta->n = 0;
}
