// The events' pictures and clips a host keeps (its snapshots folder, SNAPSHOTS/CAMERA/ID.jpg and
// ID.mp4) within their bounds: a camera's older than its picture-retain-days, then its oldest past
// its picture-retain-size, then the whole folder's oldest past snapshots-size, removed, clips and
// pictures alike. Their events stay in the history, marked gone (the caller's to do:
// EventHistory::forget_files). No GStreamer.
#pragma once

#include <glib.h>

#include <string>
#include <vector>

namespace cudanms::service {

struct PictureBounds {
  std::string camera;       // whose pictures `days` bounds
  double days = 0;           // 0: no bound by age
  guint64 store_bytes = 0;   // every camera's pictures together; 0: no bound by size
  guint64 camera_bytes = 0;  // the camera's pictures; 0: no bound but store_bytes
};

// The files removed from `snapshots` (paths as snapshots + "/CAMERA/ID.jpg" or ".mp4"), oldest
// first, at `now_s` (seconds since 1970). Files that cannot be removed (gone meanwhile, another
// process's sweep) are left out.
std::vector<std::string> remove_old_pictures(const std::string &snapshots,
                                             const PictureBounds &bounds, gint64 now_s);

}  // namespace cudanms::service
