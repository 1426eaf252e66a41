#include "frameclock.h"

#include <cmath>

void FrameClock::set_rate(gint numerator, gint denominator) {
  rate_num_ = numerator > 0 && denominator > 0 ? numerator : 0;
  rate_den_ = denominator > 0 ? denominator : 1;
}

void FrameClock::reset() {
  started_ = false;
  shortest_step_ = 0;
  last_frame_ = 0;
}

double FrameClock::frame_seconds() const {
  if (rate_num_ > 0) return static_cast<double>(rate_den_) / rate_num_;
  return static_cast<double>(shortest_step_) / GST_SECOND;
}

int64_t FrameClock::frame_of(GstClockTime pts) {
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return ++last_frame_;
  if (!started_ || pts < last_pts_) {
    /* The first buffer, or time went backwards: frames count on from here. Going backwards
     * repeats the previous number, which tells the consumer to reset. */
    origin_pts_ = last_pts_ = pts;
    origin_frame_ = started_ ? last_frame_ : 0;
    started_ = true;
    return last_frame_ = origin_frame_;
  }
  const GstClockTime step = pts - last_pts_;
  last_pts_ = pts;
  int64_t frame;
  if (rate_num_ > 0) {
    frame = origin_frame_ + std::llround(static_cast<double>(pts - origin_pts_) * rate_num_ /
                                         (static_cast<double>(rate_den_) * GST_SECOND));
  } else {
    if (step > 0 && (shortest_step_ == 0 || step < shortest_step_)) shortest_step_ = step;
    frame = shortest_step_ == 0
                ? last_frame_ + 1
                : last_frame_ + std::llround(static_cast<double>(step) / shortest_step_);
  }
  return last_frame_ = frame > last_frame_ ? frame : last_frame_ + 1;
}
