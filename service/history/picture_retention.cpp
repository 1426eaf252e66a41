#include "picture_retention.h"

#include <glib/gstdio.h>

#include <algorithm>

namespace cudanms::service {
namespace {

struct Picture {
  gint64 modified_s = 0;
  guint64 bytes = 0;
  std::string camera, path;
};

// Every SNAPSHOTS/CAMERA/*.jpg and *.mp4 (pictures and clips), oldest first.
std::vector<Picture> pictures_in(const std::string &snapshots) {
  std::vector<Picture> out;
  GDir *cameras = g_dir_open(snapshots.c_str(), 0, nullptr);
  if (!cameras) return out;
  while (const gchar *camera = g_dir_read_name(cameras)) {
    const std::string folder = snapshots + "/" + camera;
    GDir *files = g_dir_open(folder.c_str(), 0, nullptr);
    if (!files) continue;
    while (const gchar *name = g_dir_read_name(files)) {
      // A picture or a clip being written (a temporary name) is not yet.
      if (!g_str_has_suffix(name, ".jpg") && !g_str_has_suffix(name, ".mp4")) continue;
      Picture p{0, 0, camera, folder + "/" + name};
      GStatBuf st;
      if (g_stat(p.path.c_str(), &st) != 0) continue;
      p.modified_s = st.st_mtime;
      p.bytes = static_cast<guint64>(st.st_size);
      out.push_back(std::move(p));
    }
    g_dir_close(files);
  }
  g_dir_close(cameras);
  std::sort(out.begin(), out.end(), [](const Picture &a, const Picture &b) {
    return a.modified_s != b.modified_s ? a.modified_s < b.modified_s : a.path < b.path;
  });
  return out;
}

}  // namespace

std::vector<std::string> remove_old_pictures(const std::string &snapshots,
                                             const PictureBounds &bounds, gint64 now_s) {
  std::vector<std::string> removed;
  const auto delete_file = [&](const Picture &p) {
    if (g_remove(p.path.c_str()) == 0) removed.push_back(p.path);
  };
  const gint64 oldest_kept_s =
      bounds.days > 0 ? now_s - static_cast<gint64>(bounds.days * 86400) : G_MININT64;
  std::vector<Picture> pictures = pictures_in(snapshots);
  guint64 camera_total = 0;
  for (Picture &p : pictures) {
    if (p.camera != bounds.camera) continue;
    if (p.modified_s < oldest_kept_s) {
      delete_file(p), p.path.clear();
    } else {
      camera_total += p.bytes;
    }
  }
  for (Picture &p : pictures) {
    if (bounds.camera_bytes == 0 || camera_total <= bounds.camera_bytes) break;
    if (p.camera != bounds.camera || p.path.empty()) continue;
    delete_file(p), p.path.clear();
    camera_total -= p.bytes;
  }
  guint64 total = 0;
  for (const Picture &p : pictures) total += p.path.empty() ? 0 : p.bytes;
  for (const Picture &p : pictures) {
    if (bounds.store_bytes == 0 || total <= bounds.store_bytes) break;
    if (p.path.empty()) continue;
    delete_file(p);
    total -= p.bytes;
  }
  return removed;
}

}  // namespace cudanms::service
