/* blazeface: MediaPipe's BlazeFace face detector (the front, short-range 128x128 model as ONNX)
 * run through OpenCV's DNN module, attaching every anchor above score-threshold, undecided, as
 * a GstCudaNmsCandidatesMeta: a DNN's raw output for cudanms to merge (method=weighted is
 * MediaPipe's own rule for this model). */
#pragma once

#include <gst/gst.h>

#include "gstcudanmsdetector.h"

G_BEGIN_DECLS

#define GST_TYPE_BLAZE_FACE (gst_blaze_face_get_type())
G_DECLARE_FINAL_TYPE(GstBlazeFace, gst_blaze_face, GST, BLAZE_FACE, GstCudaNmsDetector)

GST_ELEMENT_REGISTER_DECLARE(blazeface);

G_END_DECLS
