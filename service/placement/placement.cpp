#include "placement.h"

namespace cudanms::service {

Placement::Placement(std::vector<unsigned> gpus) : gpus_(std::move(gpus)) {}

int Placement::place(const std::string &camera) {
  auto found = cameras_.find(camera);
  if (found != cameras_.end() && !found->second.pinned) return static_cast<int>(found->second.gpu);
  if (found != cameras_.end()) cameras_.erase(found);  // its gpu-id is no longer in the config
  const std::map<unsigned, GpuLoad> now = loads();
  int best = -1;
  GpuLoad best_load;
  for (unsigned gpu : gpus_) {
    if (failed_.count(gpu)) continue;
    const auto at = now.find(gpu);
    const GpuLoad load = at == now.end() ? GpuLoad{} : at->second;
    const bool better = best < 0 || load.load < best_load.load ||
                        (load.load == best_load.load && load.cameras < best_load.cameras);
    if (better) best = static_cast<int>(gpu), best_load = load;
  }
  if (best >= 0) cameras_[camera] = Placed{static_cast<unsigned>(best), false, 0};
  return best;
}

void Placement::pin(const std::string &camera, unsigned gpu) {
  cameras_[camera] = Placed{gpu, true, 0};
}

void Placement::release(const std::string &camera) { cameras_.erase(camera); }

void Placement::set_load(const std::string &camera, double load) {
  auto found = cameras_.find(camera);
  if (found != cameras_.end()) found->second.load = load;
}

std::vector<std::string> Placement::fail(unsigned gpu) {
  failed_.insert(gpu);
  std::vector<std::string> moved;
  for (auto it = cameras_.begin(); it != cameras_.end();) {
    if (it->second.gpu != gpu) {
      ++it;
      continue;
    }
    moved.push_back(it->first);
    it = cameras_.erase(it);
  }
  return moved;
}

std::map<unsigned, Placement::GpuLoad> Placement::loads() const {
  std::map<unsigned, GpuLoad> out;
  for (unsigned gpu : gpus_) out[gpu];
  for (unsigned gpu : failed_) out[gpu];
  for (const auto &[name, placed] : cameras_) {
    GpuLoad &load = out[placed.gpu];
    load.load += placed.load;
    load.cameras++;
  }
  return out;
}

}  // namespace cudanms::service
