/* jsonmetawriter: writes one JSON object per frame (JSON lines) with the frame's NMS result:
 * pts, frame size, candidate count and the kept boxes with label, score and geometry. Passes
 * the frames on untouched. */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_JSON_META_WRITER (gst_json_meta_writer_get_type())
G_DECLARE_FINAL_TYPE(GstJsonMetaWriter, gst_json_meta_writer, GST, JSON_META_WRITER,
                     GstBaseTransform)

GST_ELEMENT_REGISTER_DECLARE(jsonmetawriter);

G_END_DECLS
