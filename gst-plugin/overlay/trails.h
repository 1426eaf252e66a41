/* The last positions of each track, for boxoverlay's trails: a track's centre on each of its last
 * `length` frames; a track not seen for `length` frames is forgotten, so the
 * memory is bounded by the tracks of the last `length` frames. */
#pragma once

#include <glib.h>

#include <map>
#include <opencv2/core.hpp>
#include <vector>

class Trails {
 public:
  /* The next frame: forgets tracks not seen for `length` frames. */
  void next_frame(guint length);
  /* The track's anchor on this frame. */
  void add(guint64 track_id, cv::Point anchor, guint length);
  void clear() { trails_.clear(); }
  /* Oldest first. */
  const std::vector<cv::Point> *points(guint64 track_id) const;

 private:
  struct Trail {
    std::vector<cv::Point> points; /* drawn as they are: a polyline takes a vector */
    guint64 last_frame;
  };
  std::map<guint64, Trail> trails_;
  guint64 frame_ = 0;
};
