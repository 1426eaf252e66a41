// Which GPU each camera runs on. A camera is placed once, when it first starts, on the usable
// GPU with the least measured load (ties: the fewest cameras, then the lowest index), and keeps
// that GPU across reconnects and reloads until it is removed or its GPU fails: moving a camera
// costs a reconnect, and a steady assignment keeps each GPU's memory and its CUDA context steady.
// A camera's load is what it costs its GPU: its frames/s times its chain's time per frame
// (seconds of work per second), as the service measures it. Runs on the main loop.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cudanms::service {

class Placement {
 public:
  // `gpus`: the GPUs cameras may be placed on (the config's `gpus`); empty: every camera on the
  // CPU.
  explicit Placement(std::vector<unsigned> gpus = {});

  // The GPU of `camera`, placing it when it has none (or had a pinned one); -1 when no usable GPU
  // is left.
  int place(const std::string &camera);
  // The GPUs new placements may use from now on (a reload's gpus); placed cameras stay.
  void set_gpus(std::vector<unsigned> gpus) { gpus_ = std::move(gpus); }
  // A camera whose GPU the config fixes (gpu-id): counted on that GPU, never moved.
  void pin(const std::string &camera, unsigned gpu);
  // The camera is gone (removed from the config): its GPU forgets it.
  void release(const std::string &camera);
  // The camera's measured load, in seconds of work per second.
  void set_load(const std::string &camera, double load);
  // `gpu` failed: nothing is placed on it again, and its cameras lose their place (they are
  // returned, to be placed anew or run on the CPU). Pinned cameras are returned too.
  std::vector<std::string> fail(unsigned gpu);

  bool failed(unsigned gpu) const { return failed_.count(gpu) > 0; }
  // Every GPU the placement knows (usable, failed, or a pinned camera's) with its cameras' load
  // and count.
  struct GpuLoad {
    double load = 0;
    int cameras = 0;
  };
  std::map<unsigned, GpuLoad> loads() const;

 private:
  struct Placed {
    unsigned gpu;
    bool pinned;
    double load;
  };
  std::vector<unsigned> gpus_;
  std::set<unsigned> failed_;
  std::map<std::string, Placed> cameras_;
};

}  // namespace cudanms::service
