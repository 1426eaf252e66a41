#include "trails.h"

void Trails::next_frame(guint length) {
  frame_++;
  for (auto it = trails_.begin(); it != trails_.end();) {
    if (frame_ - it->second.last_frame > length) {
      it = trails_.erase(it);
    } else {
      ++it;
    }
  }
}

void Trails::add(guint64 track_id, cv::Point anchor, guint length) {
  Trail &t = trails_[track_id];
  t.points.push_back(anchor);
  if (t.points.size() > length)
    t.points.erase(t.points.begin(), t.points.end() - static_cast<std::ptrdiff_t>(length));
  t.last_frame = frame_;
}

const std::vector<cv::Point> *Trails::points(guint64 track_id) const {
  const auto found = trails_.find(track_id);
  return found == trails_.end() ? nullptr : &found->second.points;
}
