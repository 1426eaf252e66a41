/* What the metas' files share: the tags of their API types and the rescaling of their boxes and
 * points in a "gst-video-scale" transform. Internal to the library. */
#pragma once

#include <gst/video/video.h>

/* The tags GstVideoRegionOfInterestMeta carries: boxes are in frame pixels, so a meta depends on
 * the frame's size and orientation but not on its format. */
G_GNUC_INTERNAL extern const gchar *cudanms_meta_tags[];

/* Scale factors of a "gst-video-scale" transform, or FALSE when the sizes are unusable. */
G_GNUC_INTERNAL gboolean cudanms_meta_scale_factors(const GstVideoMetaTransform *trans, gdouble *fx,
                                                    gdouble *fy);
/* @n boxes (x1, y1, x2, y2) scaled. */
G_GNUC_INTERNAL void cudanms_meta_scale_boxes(gfloat *boxes, guint n, gdouble fx, gdouble fy);
/* @n_points (x, y) points, scaled like the boxes. */
G_GNUC_INTERNAL void cudanms_meta_scale_points(gfloat *points, gsize n_points, gdouble fx,
                                               gdouble fy);
