/* boxcount: counts the tracked boxes (boxtrack's ids) that cross lines and occupy zones, and
 * attaches each frame's events and running counts as a GstCudaNmsCountsMeta. */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_BOX_COUNT (gst_box_count_get_type())
G_DECLARE_FINAL_TYPE(GstBoxCount, gst_box_count, GST, BOX_COUNT, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(boxcount);

G_END_DECLS
