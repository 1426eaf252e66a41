// cudanms-service fleet: a fleet's cameras as etcd keeps them (docs/fleet.md), edited from the
// command line. Every camera is checked as a host would check it before it is stored.
//
//   cudanms-service fleet [--fleet URL,...|--config HOST.conf] [--site S] import FILE.conf
//   cudanms-service fleet ... add NAME KEY=VALUE...
//   cudanms-service fleet ... remove NAME
//   cudanms-service fleet ... list
//
// Exit status: 0 done; 1 etcd did not do it (unreachable, or a camera to add exists already);
// 2 a usage or config error.
#pragma once

namespace cudanms::service {

// argv[0] is "fleet".
int run_fleet_command(int argc, char **argv);

}  // namespace cudanms::service
