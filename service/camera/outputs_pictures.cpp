// A camera's pictures and clips (outputs.h's CameraOutputs): the operator's latest picture
// (on_snapshot); each frame with counting events drawn by the pipeline's event branch, written
// whole under the run's snapshots, its path into the history (on_event_picture); the clips'
// outcomes (on_clip_finished); the folder kept within its bounds, and a failure said while it
// lasts.
#include <cerrno>

#include "log.h"
#include "outputs.h"
#include "picture_retention.h"

namespace cudanms::service {

void CameraOutputs::on_snapshot(GstBuffer *jpeg) {
  GstMapInfo map;
  if (!gst_buffer_map(jpeg, &map, GST_MAP_READ)) return;
  auto picture =
      std::make_shared<const std::string>(reinterpret_cast<const char *>(map.data), map.size);
  gst_buffer_unmap(jpeg, &map);
  std::lock_guard<std::mutex> guard(snapshot_lock_);
  snapshot_.jpeg = std::move(picture);
  snapshot_.number++;
}

Snapshot CameraOutputs::snapshot() const {
  std::lock_guard<std::mutex> guard(snapshot_lock_);
  return snapshot_;
}

void CameraOutputs::on_event_picture(GstBuffer *jpeg) {
  std::vector<HistoryEvent> events;
  {
    std::lock_guard<std::mutex> guard(pictures_lock_);
    // Pictures come in the frames' order; a frame before this one whose picture was dropped
    // (a burst the branch could not keep up with) has none.
    const GstClockTime pts = GST_BUFFER_PTS(jpeg);
    while (!pending_pictures_.empty() && GST_CLOCK_TIME_IS_VALID(pts) &&
           pending_pictures_.front().first != pts)
      pending_pictures_.pop_front();
    if (pending_pictures_.empty()) return;
    events = std::move(pending_pictures_.front().second);
    pending_pictures_.pop_front();
  }
  const std::string path = pictures_dir_ + "/" + std::to_string(events.front().id) + ".jpg";
  GstMapInfo map;
  if (!gst_buffer_map(jpeg, &map, GST_MAP_READ)) return;
  GError *error = nullptr;
  // Whole or not at all: a temporary file, then renamed.
  const bool written = g_mkdir_with_parents(pictures_dir_.c_str(), 0755) == 0 &&
                       g_file_set_contents(path.c_str(), reinterpret_cast<const char *>(map.data),
                                           static_cast<gssize>(map.size), &error);
  const int failure = errno;
  gst_buffer_unmap(jpeg, &map);
  {
    // Said on /health and the page while it lasts (a full disk); detection and counting go on.
    const std::string why = written ? "" : error ? error->message : g_strerror(failure);
    g_clear_error(&error);
    std::lock_guard<std::mutex> guard(counts_lock_);
    if (!written && counts_.pictures_failing.empty())
      log_line("camera %s: cannot write its events' pictures in %s: %s; events go on without",
               config_.name.c_str(), pictures_dir_.c_str(), why.c_str());
    counts_.pictures_failing = why;
    if (!written) return;
  }
  if (history_) {
    for (HistoryEvent &e : events) {
      e.snapshot = path;
      history_->add(std::move(e));
    }
  }
  sweep_pictures(gint64{60} *
                 G_USEC_PER_SEC);  // a sweep reads the whole folder: once a minute at most
}

void CameraOutputs::on_clip_finished(const std::string &path, const std::string &error) {
  std::string why;
  if (!error.empty() && history_ && !history_->forget_files({path}, &why))
    log_line("camera %s: clip %s not written, its events not marked so: %s", config_.name.c_str(),
             path.c_str(), why.c_str());
  if (error.empty()) sweep_pictures(gint64{60} * G_USEC_PER_SEC);
}

void CameraOutputs::sweep_pictures(gint64 interval_us) {
  if (snapshots_.empty() || (config_.picture_retain_days <= 0 &&
                              config_.picture_retain_bytes == 0 && snapshots_size_ == 0))
    return;
  const gint64 now_us = g_get_monotonic_time();
  gint64 last = swept_us_.load();
  if (last && now_us - last < interval_us) return;
  if (!swept_us_.compare_exchange_strong(last, now_us)) return;  // another thread sweeps now
  const std::vector<std::string> removed =
      remove_old_pictures(snapshots_,
                          {config_.name, config_.picture_retain_days, snapshots_size_,
                           config_.picture_retain_bytes},
                          g_get_real_time() / G_USEC_PER_SEC);
  std::string why;
  if (!removed.empty() && history_ && !history_->forget_files(removed, &why))
    log_line("camera %s: %zu pictures removed, their events not marked so: %s",
             config_.name.c_str(), removed.size(), why.c_str());
}

}  // namespace cudanms::service
