/* The grey picture the OpenCV detector elements run on. */
#pragma once

#include <gst/video/video.h>

#include <opencv2/core.hpp>

/* @frame as 8-bit grey: the luma plane itself (no copy) for GRAY8 and the YUV formats, else the
 * conversion into @scratch. FALSE for a format it does not know. */
gboolean gst_cv_gray_of(GstVideoFrame *frame, cv::Mat *scratch, cv::Mat *gray);
/* Whether @format's first plane is its luma (GRAY8 and the planar YUV formats), read in place. */
gboolean gst_cv_first_plane_is_luma(GstVideoFormat format);
