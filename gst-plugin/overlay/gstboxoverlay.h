/* boxoverlay: draws a frame's kept boxes (GstVideoRegionOfInterestMeta) as bold rectangles in a
 * per-class color with "label score" text, and optionally the raw candidates
 * (GstCudaNmsCandidatesMeta) as thin light boxes, so pre- and post-NMS show together. */
#pragma once

#include <gst/gst.h>
#include <gst/video/gstvideofilter.h>

G_BEGIN_DECLS

#define GST_TYPE_BOX_OVERLAY (gst_box_overlay_get_type())
G_DECLARE_FINAL_TYPE(GstBoxOverlay, gst_box_overlay, GST, BOX_OVERLAY, GstVideoFilter)

GST_ELEMENT_REGISTER_DECLARE(boxoverlay);

G_END_DECLS
