/* cudacascade: OpenCV's Haar and LBP cascade detectors on the GPU (the cudanms cascade library),
 * with a CPU twin that finds the same windows; attaches every raw window with its score as a
 * GstCudaNmsCandidatesMeta, like cvdetect, for cudanms to group. */
#pragma once

#include <gst/gst.h>

#include "gstcudanmsdetector.h"

G_BEGIN_DECLS

#define GST_TYPE_CUDA_CASCADE (gst_cuda_cascade_get_type())
G_DECLARE_FINAL_TYPE(GstCudaCascade, gst_cuda_cascade, GST, CUDA_CASCADE, GstCudaNmsDetector)

GST_ELEMENT_REGISTER_DECLARE(cudacascade);

G_END_DECLS
