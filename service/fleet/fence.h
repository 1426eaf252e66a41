// A fleet host's cameras run only while its etcd lease is sure to be alive (docs/fleet.md). The
// host's supervisor holds the lease and writes, at each renewal, the time by which its cameras
// must have stopped (the lease's end less a margin to stop them in) into its run directory;
// each worker reads it every 100 ms and stops its cameras by then, whether the supervisor still
// runs or not (one stopped, or cut off from etcd, renews nothing). A frame that reaches a
// camera's detector or outputs later is dropped: a host frozen whole and let go on after its
// lease ended publishes nothing of cameras that another host runs by then.
#pragma once

#include <glib.h>

#include <atomic>
#include <functional>
#include <string>

namespace cudanms::service {

class LeaseFence {
 public:
  // Writes `fence_at_us` (g_get_monotonic_time()'s clock, which every process of the machine
  // shares; 0: fenced now) to `path`, atomically; false with the reason.
  static bool write(const std::string &path, gint64 fence_at_us, std::string *error);

  // Reads `path` now and then every 100 ms: `changed(true)` when the cameras must stop (the
  // time has come, or there is no file), `changed(false)` when a renewal lets them run again.
  // On the main loop.
  LeaseFence(std::string path, std::function<void(bool fenced)> changed);
  ~LeaseFence();
  LeaseFence(const LeaseFence &) = delete;
  LeaseFence &operator=(const LeaseFence &) = delete;
  bool fenced() const { return fenced_; }

  // Whether a frame may go on now (any thread): always, outside a fleet.
  static bool open_now() { return g_get_monotonic_time() < fence_at_.load(); }

 private:
  void check();

  const std::string path_;
  std::function<void(bool)> changed_;
  guint timer_ = 0;
  bool fenced_ = false;
  bool told_ = false;
  static std::atomic<gint64> fence_at_;
};

}  // namespace cudanms::service
