#include "metatransform.h"

const gchar *cudanms_meta_tags[] = {GST_META_TAG_VIDEO_STR, GST_META_TAG_VIDEO_ORIENTATION_STR,
                                    GST_META_TAG_VIDEO_SIZE_STR, NULL};

gboolean cudanms_meta_scale_factors(const GstVideoMetaTransform *trans, gdouble *fx, gdouble *fy) {
  const gint iw = GST_VIDEO_INFO_WIDTH(trans->in_info);
  const gint ih = GST_VIDEO_INFO_HEIGHT(trans->in_info);
  const gint ow = GST_VIDEO_INFO_WIDTH(trans->out_info);
  const gint oh = GST_VIDEO_INFO_HEIGHT(trans->out_info);
  if (iw <= 0 || ih <= 0 || ow <= 0 || oh <= 0) return FALSE;
  *fx = (gdouble)ow / iw;
  *fy = (gdouble)oh / ih;
  return TRUE;
}

void cudanms_meta_scale_boxes(gfloat *boxes, guint n, gdouble fx, gdouble fy) {
  for (gsize i = 0; i < (gsize)n; i++) {
    gfloat *b = boxes + 4 * i;
    b[0] = (gfloat)(b[0] * fx);
    b[1] = (gfloat)(b[1] * fy);
    b[2] = (gfloat)(b[2] * fx);
    b[3] = (gfloat)(b[3] * fy);
  }
}

void cudanms_meta_scale_points(gfloat *points, gsize n_points, gdouble fx, gdouble fy) {
  for (gsize i = 0; i < n_points; i++) {
    points[2 * i] = (gfloat)(points[2 * i] * fx);
    points[2 * i + 1] = (gfloat)(points[2 * i + 1] * fy);
  }
}
