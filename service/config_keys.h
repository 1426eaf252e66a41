// The config's own keys (those that are no element's property): where each may stand, what it
// means, and how its value goes into the config (config_keys.cpp has the table).
#pragma once

#include <string>

#include "config.h"

namespace cudanms::service {

// Where a key may stand.
enum class Where { kService, kCamera, kAnywhere };

// A key's value into the config; "" when it is good, else the reason.
using Apply = std::string (*)(const std::string &value, CameraConfig *camera,
                              ServiceConfig *service);

struct Key {
  const char *name;
  Where where;
  const char *meaning;
  Apply apply;
};

// The key of that name, or null.
const Key *find_key(const std::string &name);

}  // namespace cudanms::service
