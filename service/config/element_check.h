// What only the elements can say of a config (config.h reads text and knows no element): the
// descriptions (source, detector, record-encoder) parse into elements with the pads the camera's
// pipeline needs, the detector's model files can be read, and every camera key that is not the
// service's own (config_keys.h) is a writable property of cudanms, boxtrack or boxcount with a
// value that element takes. The elements are made once a check, as the camera's pipeline makes
// them; the errors are the config's, "FILE:GROUP:KEY: reason" (a key a camera inherits from
// [service] is [service]'s, said once).
//
// --check-config runs it, and so does every place a config is taken: the service's start and
// reload, an operator's edit, a fleet's import and the cameras a fleet host takes from etcd. A
// worker reads its supervisor's config, checked before, with load_config alone.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace cudanms::service {

// Adds the elements' errors of `cameras` to `errors`; `name` stands for FILE. False when it added
// any.
bool check_elements(const std::vector<CameraConfig> &cameras, const std::string &name,
                    std::vector<std::string> *errors);

// load_config and parse_config, then check_elements: a config the service can run.
bool load_checked_config(const std::string &path, ServiceConfig *config,
                         std::vector<std::string> *errors, int visible_gpus = -1,
                         std::string *text_read = nullptr, bool need_camera = true);
bool parse_checked_config(const std::string &text, const std::string &name, ServiceConfig *config,
                          std::vector<std::string> *errors, int visible_gpus = -1,
                          bool need_camera = true);

}  // namespace cudanms::service
