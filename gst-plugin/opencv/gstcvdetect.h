/* cvdetect: an OpenCV sliding-window detector (HOG people or a Haar/LBP cascade) that attaches
 * its raw, ungrouped candidate windows with their scores as a GstCudaNmsCandidatesMeta: the
 * input cudanms exists for. */
#pragma once

#include <gst/gst.h>

#include "gstcudanmsdetector.h"

G_BEGIN_DECLS

#define GST_TYPE_CV_DETECT (gst_cv_detect_get_type())
G_DECLARE_FINAL_TYPE(GstCvDetect, gst_cv_detect, GST, CV_DETECT, GstCudaNmsDetector)

GST_ELEMENT_REGISTER_DECLARE(cvdetect);

G_END_DECLS
