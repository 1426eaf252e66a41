// Hosts of a fleet that run no cameras (cudanms-service fleet simulate): each holds the same
// FleetAgent a real host's supervisor holds (its lease, registration, watch, plan, claims and
// releases), and its cameras "run" as soon as the agent hands them over and stop at once when it
// takes them away. Many in one process, for measuring on one machine what a site of a hundred
// hosts costs etcd and how fast it places its cameras (docs/fleet.md). Runs on the main loop.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "config.h"
#include "fleet_agent.h"

namespace cudanms::service {

class SimulatedHosts {
 public:
  // `settings`: the fleet's keys (host-id: the hosts' names' prefix); `host_text`: the hosts'
  // config file, whose [service] group gives the cameras their defaults.
  SimulatedHosts(FleetSettings settings, std::string host_text);
  // A host named `name` joins the site; false when one of that name runs here already.
  bool add(const std::string &name);
  // The host dies as a killed one does: its agent gone, its lease left to end in etcd.
  bool kill(const std::string &name);
  // {"hosts": N, "running": M, "per_host": {NAME: cameras, ...}, "views": {NAME: "K others, U
  // unowned", ...}} on one line: what each runs, and what each sees of the site.
  std::string report() const;

 private:
  struct Host {
    std::unique_ptr<FleetAgent> agent;
    std::set<std::string> running;
  };
  void run(const std::string &name, const std::vector<CameraConfig> &cameras);

  const FleetSettings settings_;
  const std::string host_text_;
  std::map<std::string, std::unique_ptr<Host>> hosts_;
};

// `cudanms-service fleet --config HOST.conf simulate N`: N hosts HOST-ID-1 ... N join; then each
// line on stdin is a command: "add NAME", "kill NAME", "report" (its answer a line on stdout);
// ends at the end of stdin or SIGTERM.
int run_simulation(const FleetSettings &settings, const std::string &host_text, int hosts);

}  // namespace cudanms::service
