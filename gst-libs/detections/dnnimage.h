/* A video frame's pixels as cudanms/dnn.h reads them, for the DNN detectors (dnndetect,
 * blazeface): one mapping of GStreamer formats and colorimetry. */
#pragma once

#include <gst/video/video.h>

#include "cudanms/dnn.h"

/* Planes and strides of a frame in @format (host or device addresses); FALSE for a format the
 * library does not read. */
gboolean gst_cv_dnn_image_of(GstVideoFormat format, int width, int height,
                             const GstVideoColorimetry &colorimetry, const guint8 *const *planes,
                             const int *strides, cudanms::dnn::Image *image);
/* The same for a mapped frame in system memory. */
gboolean gst_cv_dnn_image_of_frame(const GstVideoFrame *frame, cudanms::dnn::Image *image);
