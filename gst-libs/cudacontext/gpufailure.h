/* The contract between an element whose GPU failed under it (cudanms, the detectors) and the
 * application: an element message named "cudanms-gpu-failed" with the CUDA device index ("gpu",
 * int) and what failed ("error", string). The element also posts a warning for people; programs
 * (the camera service, which then moves the camera's GPU out of its placement) read this message,
 * not the warning's text. */
#pragma once

#include <gst/gst.h>

#include <string>

#define GST_CV_GPU_FAILED_MESSAGE "cudanms-gpu-failed"

/* Posts the message from @element. */
void gst_cv_post_gpu_failed(GstElement *element, int gpu, const std::string &error);

/* TRUE, with *gpu and *error set (either may be null), when @message is that message. */
bool gst_cv_parse_gpu_failed(GstMessage *message, int *gpu, std::string *error);
