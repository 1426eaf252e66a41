/* metapublish: publishes each frame's detections as one JSON message, to an MQTT broker or to a
 * file of JSON lines, in cudanms's format or DL Streamer gvametaconvert's. Passes the frames on
 * untouched and never waits on the network. */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_META_PUBLISH (gst_meta_publish_get_type())
G_DECLARE_FINAL_TYPE(GstMetaPublish, gst_meta_publish, GST, META_PUBLISH, GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(metapublish);

G_END_DECLS
