/* dnndetect: a DNN detector (a TorchScript network run by LibTorch, BlazeFace or YOLO outputs)
 * whose every candidate above the score threshold is attached as a GstCudaNmsCandidatesMeta for
 * cudanms; pre-processing, inference and decoding on the GPU with the CUDA backend. */
#pragma once

#include <gst/gst.h>

#include "gstcudanmsdetector.h"

G_BEGIN_DECLS

#define GST_TYPE_DNN_DETECT (gst_dnn_detect_get_type())
G_DECLARE_FINAL_TYPE(GstDnnDetect, gst_dnn_detect, GST, DNN_DETECT, GstCudaNmsDetector)

GST_ELEMENT_REGISTER_DECLARE(dnndetect);

G_END_DECLS
