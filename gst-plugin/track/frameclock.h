/* Frame numbers from buffer timestamps, for elements that keep state across frames (boxtrack,
 * boxcount): a tracker's "5 frames" must be 5 frames of time, not 5 buffers, when frames were
 * dropped upstream or a camera reconnected. */
#pragma once

#include <gst/gst.h>

#include <cstdint>

class FrameClock {
 public:
  /* The stream's frame rate from its caps; 0/1 (or none) when unknown. */
  void set_rate(gint numerator, gint denominator);
  /* A new stream: frames count afresh. */
  void reset();
  /* The frame number of a buffer with this PTS. With a frame rate: the PTS in frames since the
   * first buffer, rounded; without one, each step between two PTS over the shortest step seen
   * (one frame a buffer until two PTS are seen). A buffer without a PTS, or one that rounds onto
   * the previous frame, is the next frame. A PTS before the previous one repeats the previous
   * number, which the tracker and the counter take for time going backwards (they reset), and
   * frames count on from it. */
  int64_t frame_of(GstClockTime pts);
  /* How long a frame of time is, in seconds: from the rate, else the shortest step seen; 0 while
   * unknown. */
  double frame_seconds() const;

 private:
  gint rate_num_ = 0, rate_den_ = 1;
  bool started_ = false;
  GstClockTime origin_pts_ = 0, last_pts_ = 0;
  int64_t origin_frame_ = 0, last_frame_ = 0;
  GstClockTime shortest_step_ = 0; /* between two PTS, when the rate is unknown; 0: none yet */
};
