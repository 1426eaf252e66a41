/* The cudanms element's statistics: "cudanms-stats" element messages every N frames, and the
 * rate-limited warning about candidates over max-candidates. Streaming thread only. */
#pragma once

#include <gst/gst.h>

#include <vector>

#include "cudanms/nms.h"

class FrameStats {
 public:
  FrameStats();
  void reset();

  /* Counts the candidates past max-candidates of a frame; warns at most every 10 s. */
  void note_over_capacity(GstElement *element, guint max_candidates, size_t dropped);

  /* Adds a frame; every @interval frames (0: never) posts a "cudanms-stats" message with the
   * interval's counts and latency percentiles. @frames: frames since the start. */
  void note_frame(GstElement *element, guint interval, const cudanms::Counts &counts,
                  double latency_us, guint64 frames, const gchar *backend);

 private:
  bool capacity_warned_ = false;
  gint64 capacity_warned_at_ = 0;
  guint64 capacity_frames_ = 0;
  guint64 capacity_dropped_ = 0;

  std::vector<double> latencies_; /* ring of the interval's latencies, in microseconds */
  std::vector<double> scratch_;
  size_t latency_next_ = 0;
  guint interval_frames_ = 0;
  guint64 interval_in_ = 0;
  guint64 interval_out_ = 0;
};
