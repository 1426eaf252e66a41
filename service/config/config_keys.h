// The config's own keys (those that are no element's property): where each may stand, what it
// means, and how its value goes into the config (config_keys.cpp has the table).
#pragma once

#include <map>
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


// cascade-grouping's rule over a camera's keys (its own over the service's, detector set): a
// cascade's raw windows are grouped as OpenCV's detectMultiScale groups them (cudanms
// method=group min-neighbors=3), unless a method is given.
void apply_cascade_grouping(std::map<std::string, std::string> *values);

}  // namespace cudanms::service
