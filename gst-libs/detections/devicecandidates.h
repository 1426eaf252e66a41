/* A pooled device candidates buffer of the cascade library, attached to a buffer as the
 * candidates meta's device candidates: the meta holds a reference until it is freed (the buffer
 * then returns to its pool), and downloads through the library when a host reader maps it. */
#pragma once

#include <gst/gst.h>

#include <memory>
#include <string>

#include "cudanms/device_candidates.h"

/* FALSE, and nothing attached, when the buffer already holds candidates. */
gboolean gst_cv_attach_device_candidates(GstBuffer *buffer,
                                         std::shared_ptr<cudanms::DeviceCandidates> candidates,
                                         gint device);

/* A detector element's device candidates buffers: the library's pool, made (or made again,
 * larger) for the candidates a frame may have, at most 8 buffers in flight between the element
 * and whatever frees their meta. acquire() gives nullptr when every buffer is still downstream or
 * the GPU cannot give one, warned once per reset(): the frame's candidates then go in host
 * memory. Call it with the element's CUDA context current where it has one (the pool works in
 * the context current when it is made). */
class GstCvDeviceCandidatesPool {
 public:
  std::shared_ptr<cudanms::DeviceCandidates> acquire(GstElement *element, gint device,
                                                     size_t capacity);
  /* In start(), stop() and on a move to the CPU: buffers still downstream keep the old pool. */
  void reset();

 private:
  std::shared_ptr<cudanms::DeviceCandidatesPool> pool_;
  bool warned_full_ = false;
};
