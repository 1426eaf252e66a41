/* cudanms metadata, registered the way gst-plugins-base registers GstVideoRegionOfInterestMeta:
 * an API type with the video/orientation/size tags, and a GstMetaInfo whose transform copies the
 * meta and rescales its boxes for the "gst-video-scale" transform. */
#include "gst/cudanms/cudanmsmeta.h"

#include <gst/video/video.h>
#include <math.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC(cudanms_meta_debug);
#define GST_CAT_DEFAULT cudanms_meta_debug

/* The tags GstVideoRegionOfInterestMeta carries: boxes are in frame pixels, so the meta depends
 * on the frame's size and orientation but not on its format. */
static const gchar *meta_tags[] = {GST_META_TAG_VIDEO_STR, GST_META_TAG_VIDEO_ORIENTATION_STR,
                                   GST_META_TAG_VIDEO_SIZE_STR, NULL};

/* ------------------------------------------------------------------------------------------ */
/* Candidates                                                                                  */
/* ------------------------------------------------------------------------------------------ */

GType gst_cuda_nms_candidates_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType _type = gst_meta_api_type_register("GstCudaNmsCandidatesMetaAPI", meta_tags);
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
  g_free(c->boxes);
  g_free(c->scores);
  g_free(c->class_ids);
  g_free(c->points);
  c->boxes = NULL;
  c->scores = NULL;
  c->class_ids = NULL;
  c->points = NULL;
  c->n = c->capacity = 0;
}

static void candidates_set_points(GstCudaNmsCandidatesMeta *meta, guint first, const gfloat *points,
                                  guint n);

/* Scale factors of a "gst-video-scale" transform, or FALSE when the sizes are unusable. */
static gboolean scale_factors(const GstVideoMetaTransform *trans, gdouble *fx, gdouble *fy) {
  const gint iw = GST_VIDEO_INFO_WIDTH(trans->in_info);
  const gint ih = GST_VIDEO_INFO_HEIGHT(trans->in_info);
  const gint ow = GST_VIDEO_INFO_WIDTH(trans->out_info);
  const gint oh = GST_VIDEO_INFO_HEIGHT(trans->out_info);
  if (iw <= 0 || ih <= 0 || ow <= 0 || oh <= 0) return FALSE;
  *fx = (gdouble)ow / iw;
  *fy = (gdouble)oh / ih;
  return TRUE;
}

static void scale_boxes(gfloat *boxes, guint n, gdouble fx, gdouble fy) {
  for (gsize i = 0; i < (gsize)n; i++) {
    gfloat *b = boxes + 4 * i;
    b[0] = (gfloat)(b[0] * fx);
    b[1] = (gfloat)(b[1] * fy);
    b[2] = (gfloat)(b[2] * fx);
    b[3] = (gfloat)(b[3] * fy);
  }
}

/* @n_points (x, y) points, scaled like the boxes. */
static void scale_points(gfloat *points, gsize n_points, gdouble fx, gdouble fy) {
  for (gsize i = 0; i < n_points; i++) {
    points[2 * i] = (gfloat)(points[2 * i] * fx);
    points[2 * i + 1] = (gfloat)(points[2 * i + 1] * fy);
  }
}

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
    if (!scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    /* Rescaled on the host: the device candidates are downloaded first. */
    if (!gst_cuda_nms_candidates_meta_map(src, NULL)) return FALSE;
    first = gst_buffer_get_cuda_nms_candidates_meta(dest)
                ? gst_buffer_get_cuda_nms_candidates_meta(dest)->n
                : 0;
    dst = candidates_copy_into(dest, src);
    if (!dst) return FALSE;
    scale_boxes(dst->boxes + 4 * (gsize)first, src->n, fx, fy);
    if (dst->points)
      scale_points(dst->points + 2 * (gsize)dst->points_per_candidate * first,
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

/* ------------------------------------------------------------------------------------------ */
/* Result                                                                                      */
/* ------------------------------------------------------------------------------------------ */

GType gst_cuda_nms_result_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType _type = gst_meta_api_type_register("GstCudaNmsResultMetaAPI", meta_tags);
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
  g_free(r->boxes);
  g_free(r->scores);
  g_free(r->class_ids);
  g_free(r->labels);
  g_free(r->points);
  g_free(r->members);
  g_free(r->track_ids);
  r->members = NULL;
  r->track_ids = NULL;
  r->boxes = NULL;
  r->scores = NULL;
  r->class_ids = NULL;
  r->labels = NULL;
  r->points = NULL;
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
    if (!scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    dst = result_meta_copy(dest, src);
    if (!dst) return FALSE;
    scale_boxes(dst->boxes, dst->n_kept, fx, fy);
    if (dst->points) scale_points(dst->points, (gsize)dst->points_per_box * dst->n_kept, fx, fy);
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

/* ------------------------------------------------------------------------------------------ */
/* Counts                                                                                      */
/* ------------------------------------------------------------------------------------------ */

const gchar *gst_cuda_nms_count_event_kind_name(GstCudaNmsCountEventKind kind) {
  switch (kind) {
    case GST_CUDA_NMS_COUNT_LINE_CROSSED:
      return "line-crossed";
    case GST_CUDA_NMS_COUNT_ZONE_ENTERED:
      return "zone-entered";
    case GST_CUDA_NMS_COUNT_ZONE_LEFT:
      return "zone-left";
    case GST_CUDA_NMS_COUNT_ZONE_LOITERING:
      return "zone-loitering";
  }
  return "unknown";
}

GType gst_cuda_nms_counts_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    GType _type = gst_meta_api_type_register("GstCudaNmsCountsMetaAPI", meta_tags);
    g_once_init_leave(&type, _type);
  }
  return type;
}

static gboolean counts_meta_init(GstMeta *meta, gpointer params, GstBuffer *buffer) {
  GstCudaNmsCountsMeta *c = (GstCudaNmsCountsMeta *)meta;
  (void)params;
  (void)buffer;
  c->n_events = c->n_lines = c->n_zones = 0;
  c->events = NULL;
  c->lines = NULL;
  c->zones = NULL;
  return TRUE;
}

static void counts_meta_free(GstMeta *meta, GstBuffer *buffer) {
  GstCudaNmsCountsMeta *c = (GstCudaNmsCountsMeta *)meta;
  (void)buffer;
  for (guint i = 0; i < c->n_lines; i++) g_free(c->lines[i].labels);
  for (guint i = 0; i < c->n_zones; i++) {
    g_free(c->zones[i].points);
    g_free(c->zones[i].labels);
  }
  g_free(c->events);
  g_free(c->lines);
  g_free(c->zones);
  c->events = NULL;
  c->lines = NULL;
  c->zones = NULL;
  c->n_events = c->n_lines = c->n_zones = 0;
}

static GstCudaNmsCountsMeta *counts_meta_copy(GstBuffer *dest, const GstCudaNmsCountsMeta *src) {
  GstCudaNmsCountsMeta *dst =
      gst_buffer_add_cuda_nms_counts_meta(dest, src->n_events, src->n_lines, src->n_zones);
  if (!dst) return NULL;
  if (src->n_events)
    memcpy(dst->events, src->events, sizeof(GstCudaNmsCountEvent) * (gsize)src->n_events);
  if (src->n_lines)
    memcpy(dst->lines, src->lines, sizeof(GstCudaNmsLineCount) * (gsize)src->n_lines);
  for (guint i = 0; i < src->n_lines; i++) {
    dst->lines[i].n_labels = 0;
    dst->lines[i].labels = NULL;
    gst_cuda_nms_counts_meta_set_line_labels(dst, i, src->lines[i].labels, src->lines[i].n_labels);
  }
  for (guint i = 0; i < src->n_zones; i++) {
    const GstCudaNmsZoneCount *z = &src->zones[i];
    gst_cuda_nms_counts_meta_set_zone(dst, i, z->name, z->points, z->n_points, z->labels,
                                      z->n_labels);
    dst->zones[i].loitering = z->loitering;
  }
  return dst;
}

static gboolean counts_meta_transform(GstBuffer *dest, GstMeta *meta, GstBuffer *buffer,
                                      GQuark type, gpointer data) {
  const GstCudaNmsCountsMeta *src = (const GstCudaNmsCountsMeta *)meta;
  GstCudaNmsCountsMeta *dst;
  (void)buffer;
  if (GST_META_TRANSFORM_IS_COPY(type)) return counts_meta_copy(dest, src) != NULL;
  if (GST_VIDEO_META_TRANSFORM_IS_SCALE(type)) {
    gdouble fx, fy;
    if (!scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    dst = counts_meta_copy(dest, src);
    if (!dst) return FALSE;
    for (guint i = 0; i < dst->n_lines; i++) scale_boxes(&dst->lines[i].x1, 1, fx, fy);
    for (guint i = 0; i < dst->n_zones; i++)
      scale_points(dst->zones[i].points, dst->zones[i].n_points, fx, fy);
    return TRUE;
  }
  return FALSE;
}

const GstMetaInfo *gst_cuda_nms_counts_meta_get_info(void) {
  static const GstMetaInfo *info = NULL;
  if (g_once_init_enter((GstMetaInfo **)&info)) {
    const GstMetaInfo *mi = gst_meta_register(
        GST_CUDA_NMS_COUNTS_META_API_TYPE, "GstCudaNmsCountsMeta", sizeof(GstCudaNmsCountsMeta),
        counts_meta_init, counts_meta_free, counts_meta_transform);
    g_once_init_leave((GstMetaInfo **)&info, (GstMetaInfo *)mi);
  }
  return info;
}

GstCudaNmsCountsMeta *gst_buffer_add_cuda_nms_counts_meta(GstBuffer *buffer, guint n_events,
                                                          guint n_lines, guint n_zones) {
  GstCudaNmsCountsMeta *c;
  g_return_val_if_fail(GST_IS_BUFFER(buffer), NULL);
  g_return_val_if_fail(gst_buffer_is_writable(buffer), NULL);
  c = (GstCudaNmsCountsMeta *)gst_buffer_add_meta(buffer, GST_CUDA_NMS_COUNTS_META_INFO, NULL);
  if (!c) return NULL;
  c->n_events = n_events;
  c->n_lines = n_lines;
  c->n_zones = n_zones;
  if (n_events) c->events = g_new0(GstCudaNmsCountEvent, n_events);
  if (n_lines) c->lines = g_new0(GstCudaNmsLineCount, n_lines);
  if (n_zones) c->zones = g_new0(GstCudaNmsZoneCount, n_zones);
  return c;
}

void gst_cuda_nms_counts_meta_set_line_labels(GstCudaNmsCountsMeta *meta, guint index,
                                              const GstCudaNmsLineLabel *labels, guint n_labels) {
  GstCudaNmsLineCount *l;
  g_return_if_fail(meta != NULL && index < meta->n_lines);
  l = &meta->lines[index];
  g_free(l->labels);
  l->n_labels = n_labels;
  l->labels = n_labels ? g_memdup2(labels, sizeof(GstCudaNmsLineLabel) * (gsize)n_labels) : NULL;
}

void gst_cuda_nms_counts_meta_set_zone(GstCudaNmsCountsMeta *meta, guint index, const gchar *name,
                                       const gfloat *points, guint n_points,
                                       const GstCudaNmsZoneLabel *labels, guint n_labels) {
  GstCudaNmsZoneCount *z;
  g_return_if_fail(meta != NULL && index < meta->n_zones);
  z = &meta->zones[index];
  g_free(z->points);
  g_free(z->labels);
  z->name = g_intern_string(name);
  z->n_points = n_points;
  z->points = n_points ? g_memdup2(points, sizeof(gfloat) * 2 * (gsize)n_points) : NULL;
  z->n_labels = n_labels;
  z->labels = n_labels ? g_memdup2(labels, sizeof(GstCudaNmsZoneLabel) * (gsize)n_labels) : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Class labels                                                                                */
/* ------------------------------------------------------------------------------------------ */

#define LABEL_EVENT_PREFIX "cudanms-label-"

GstEvent *gst_cuda_nms_label_event_new(gint class_id, const gchar *label) {
  gchar *name;
  GstStructure *s;
  g_return_val_if_fail(label != NULL, NULL);
  name = g_strdup_printf(LABEL_EVENT_PREFIX "%d", class_id);
  s = gst_structure_new(name, "class-id", G_TYPE_INT, class_id, "label", G_TYPE_STRING, label,
                        NULL);
  g_free(name);
  return gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM_STICKY, s);
}

gboolean gst_cuda_nms_label_event_parse(GstEvent *event, gint *class_id, const gchar **label) {
  const GstStructure *s;
  const gchar *text;
  g_return_val_if_fail(GST_IS_EVENT(event), FALSE);
  if (GST_EVENT_TYPE(event) != GST_EVENT_CUSTOM_DOWNSTREAM_STICKY) return FALSE;
  s = gst_event_get_structure(event);
  if (!s || !g_str_has_prefix(gst_structure_get_name(s), LABEL_EVENT_PREFIX)) return FALSE;
  text = gst_structure_get_string(s, "label");
  if (!text || !gst_structure_get_int(s, "class-id", class_id)) return FALSE;
  *label = text;
  return TRUE;
}
