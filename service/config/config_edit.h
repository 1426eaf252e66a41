// Changes the operator's page makes to a camera's lines and zones (web.h): checked as the
// service reads a config, then saved where the camera's settings live, so that the running
// camera applies them (SIGHUP's path, or a fleet's watch) and a restart keeps them:
//   - a config file: saved whole (comments kept) by save_camera_shapes();
//   - etcd, for a fleet's camera: the agent puts the camera's keys with the change
//     (FleetAgent::edit_shapes, with shapes_edited() here).
#pragma once

#include <glib.h>

#include <string>

#include "config.h"
#include "metrics.h"

namespace cudanms::service {

// The body of POST /api/cameras/NAME/shapes: JSON {"lines": "NAME:x1,y1,x2,y2;...",
// "zones": "NAME:x1,y1 x2,y2 x3,y3 ...;..."}, either or both; a member given replaces the
// camera's whole key ("" clears it), one left out keeps it. Coordinates are in [0, 1] of the
// picture: the camera then counts with normalized = true.
struct ShapesEdit {
  bool has_lines = false, has_zones = false;
  std::string lines, zones;
};

// The edit a body asks for, checked (lines and zones parsed as the camera would); status 0 when
// good, else 400 with the reason.
Reply read_shapes_edit(const std::string &body, ShapesEdit *edit);

// Why `edit` may not be made to `camera` (as the service reads it), "" when it may: the camera
// counts in pixels (normalized = false) and the edit keeps lines or zones of it.
std::string pixel_shapes_kept(const CameraConfig &camera, const ShapesEdit &edit);

// `keys`, a camera's keys as an INI group holds them below its [camera.NAME] line, with `edit`
// made (and normalized = true); false with the reason when `keys` are no such group.
bool shapes_edited(const std::string &keys, const ShapesEdit &edit, std::string *edited,
                   std::string *why);

// Saves `edit` into camera `camera`'s group of the config file. 200 when saved; else 4xx with
// the reason and nothing saved: 404 no such camera in the file, 409 a camera that counts in
// pixels, or a file the service would not read as it is now.
Reply save_camera_shapes(const std::string &config_path, const std::string &camera,
                         const ShapesEdit &edit);

// Whether a change may be made: 403 when `web_auth` is not set (the page changes nothing then),
// 401 when `authorization` is not "Bearer WEB_AUTH"; status 0 when it may.
Reply check_web_auth(const std::string &web_auth, const std::string &authorization);

// The camera NAME of /api/cameras/NAME/shapes, "" for another path.
std::string shapes_camera(const std::string &path);

// {"saved": text} (200) or {"error": text} (any other status): the page's edits' answers, and
// the other API calls' errors (events_api.h).
Reply edit_answer(int status, const std::string &text);

// A POST of the endpoint (MetricsServer::Change) for a service whose config says `web_auth`:
// 404 for a path that is no change, then check_web_auth(), then the body read; status 0 with
// the camera and the edit when it may be made.
Reply read_change(const std::string &path, const std::string &body,
                  const std::string &authorization, const std::string &web_auth,
                  std::string *camera, ShapesEdit *edit);

// A change to a service's config file `config_file` ("": none to save to, for `no_file`'s
// reason, 409): read_change(), then save_camera_shapes(). 200: saved, to be applied.
Reply change_config(const std::string &path, const std::string &body,
                    const std::string &authorization, const std::string &web_auth,
                    const std::string &config_file, const std::string &no_file);

}  // namespace cudanms::service
