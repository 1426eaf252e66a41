// Changes the operator's page makes to a camera (web.h), written into the service's config
// file: checked as the service reads the file, then saved whole (comments kept), so that a
// reload (SIGHUP's path) applies them and a restart keeps them.
#pragma once

#include <string>

#include "metrics.h"

namespace cudanms::service {

// The page's POST /api/cameras/NAME/lines: `body` is JSON {"lines": "NAME:x1,y1,x2,y2;..."},
// coordinates in [0, 1] of the picture (the camera then counts with normalized = true). 200
// when saved; else 4xx with the reason and nothing saved: 400 bad lines or JSON, 404 no such
// camera in the file, 409 a camera that counts in pixels (normalized = false).
Reply save_camera_lines(const std::string &config_path, const std::string &camera,
                        const std::string &body);

// Whether a change may be made: 403 when `web_auth` is not set (the page changes nothing then),
// 401 when `authorization` is not "Bearer WEB_AUTH"; status 0 when it may.
Reply check_web_auth(const std::string &web_auth, const std::string &authorization);

// The camera NAME of /api/cameras/NAME/lines, "" for another path.
std::string lines_camera(const std::string &path);

// A POST of the endpoint (MetricsServer::Change) for a service whose config says `web_auth`
// and lives in `config_file` ("": none to save to, for `no_file`'s reason): 404 for a path that
// is no change, then check_web_auth(), then save_camera_lines(). 200: saved, to be applied.
Reply change_config(const std::string &path, const std::string &body,
                    const std::string &authorization, const std::string &web_auth,
                    const std::string &config_file, const std::string &no_file);

}  // namespace cudanms::service
