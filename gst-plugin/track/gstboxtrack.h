/* boxtrack: gives each box cudanms kept the id of the object it follows from frame to frame
 * (ByteTrack, the tracking library cudanms/track.h), on the result meta and on each ROI meta. */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_BOX_TRACK (gst_box_track_get_type())
G_DECLARE_FINAL_TYPE(GstBoxTrack, gst_box_track, GST, BOX_TRACK, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(boxtrack);

G_END_DECLS
