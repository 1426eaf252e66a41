/* For applications that run pipelines (the camera service, cudanms-run, cudanms-streams): walking
 * a pipeline's elements, and stopping one that holds RTSP sessions without hanging. */
#pragma once

#include <gst/gst.h>

#include <functional>

/* Calls @visit on every element of @bin, those of nested bins too. */
void gst_cv_for_each_element(GstElement *bin, const std::function<void(GstElement *)> &visit);

/* To call before a pipeline that may hold rtpjitterbuffers (rtspsrc, rtpbin) goes to NULL: in
 * GStreamer 1.22 its state change can otherwise hang for good (below). Returns once every
 * jitterbuffer's pushing thread has stopped, at most ~3 s each; a no-op for other pipelines. */
void gst_cv_flush_jitterbuffers(GstElement *pipeline);
