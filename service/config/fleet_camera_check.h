// A fleet camera's keys as etcd holds them (PREFIX/SITE/cameras/NAME: a [camera.NAME] group's
// keys, no group line), checked as a host would run them: over the host's [service] defaults,
// by the same reader and checks as a config file (config.h).
#pragma once

#include <string>

#include "config.h"

namespace cudanms::service {

struct FleetCameraCheck {
  std::string text;     // the keys as etcd has them
  std::string group;    // the same as an INI group's body ("" when they do not parse)
  std::string error;    // why the camera cannot run; "" when it can
  CameraConfig camera;  // as it runs, read here once (when it can)
  bool enabled = true;
};

// `key`: the camera's etcd key, naming it in the errors; `defaults`: the host's [service] group.
// Remembered: asked again with the same, the same answer (from the main loop alone).
FleetCameraCheck check_fleet_camera(const std::string &camera, const std::string &text,
                                    const std::string &key, const std::string &defaults);
// The same, checked now.
FleetCameraCheck check_fleet_camera_anew(const std::string &camera, const std::string &text,
                                         const std::string &key, const std::string &defaults);

}  // namespace cudanms::service
