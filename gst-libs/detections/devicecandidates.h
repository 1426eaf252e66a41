/* A pooled device candidates buffer of the cascade library, attached to a buffer as the
 * candidates meta's device candidates: the meta holds a reference until it is freed (the buffer
 * then returns to its pool), and downloads through the library when a host reader maps it. */
#pragma once

#include <gst/gst.h>

#include <memory>

#include "cudanms/device_candidates.h"

/* FALSE, and nothing attached, when the buffer already holds candidates. */
gboolean gst_cv_attach_device_candidates(GstBuffer *buffer,
                                         std::shared_ptr<cudanms::DeviceCandidates> candidates,
                                         gint device);
