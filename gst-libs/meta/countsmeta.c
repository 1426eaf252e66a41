/* The counts meta (boxcount's lines, zones and the frame's events) and the class labels' event
 * that detectors send downstream. */
#include <string.h>

#include "gst/cudanms/cudanmsmeta.h"
#include "metatransform.h"

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
    GType _type = gst_meta_api_type_register("GstCudaNmsCountsMetaAPI", cudanms_meta_tags);
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
  g_clear_pointer(&c->events, g_free);
  g_clear_pointer(&c->lines, g_free);
  g_clear_pointer(&c->zones, g_free);
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
    if (!cudanms_meta_scale_factors((const GstVideoMetaTransform *)data, &fx, &fy)) return FALSE;
    dst = counts_meta_copy(dest, src);
    if (!dst) return FALSE;
    for (guint i = 0; i < dst->n_lines; i++) cudanms_meta_scale_boxes(&dst->lines[i].x1, 1, fx, fy);
    for (guint i = 0; i < dst->n_zones; i++)
      cudanms_meta_scale_points(dst->zones[i].points, dst->zones[i].n_points, fx, fy);
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

/* @name interned, through the quark table's lock (one for the whole process) only the first time
 * a thread sees it: boxcount names every zone of every frame. */
static const gchar *interned(const gchar *name) {
  static GPrivate seen = G_PRIVATE_INIT((GDestroyNotify)g_hash_table_unref);
  GHashTable *table = g_private_get(&seen);
  const gchar *found;
  if (name == NULL) return NULL;
  if (table == NULL) {
    table = g_hash_table_new(g_str_hash, g_str_equal); /* interned keys: never freed */
    g_private_set(&seen, table);
  }
  found = g_hash_table_lookup(table, name);
  if (found == NULL) {
    found = g_intern_string(name);
    g_hash_table_insert(table, (gpointer)found, (gpointer)found);
  }
  return found;
}

void gst_cuda_nms_counts_meta_set_zone(GstCudaNmsCountsMeta *meta, guint index, const gchar *name,
                                       const gfloat *points, guint n_points,
                                       const GstCudaNmsZoneLabel *labels, guint n_labels) {
  GstCudaNmsZoneCount *z;
  g_return_if_fail(meta != NULL && index < meta->n_zones);
  z = &meta->zones[index];
  g_free(z->points);
  g_free(z->labels);
  z->name = interned(name);
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
