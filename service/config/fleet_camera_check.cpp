#include "fleet_camera_check.h"

#include <map>

#include <glib.h>

#include <vector>

#include "config.h"
#include "element_check.h"

namespace cudanms::service {
namespace {

// The keys as the body of a [camera.NAME] group; false with the reason.
bool as_group(const std::string &camera, const std::string &text, std::string *group,
              std::string *why) {
  GKeyFile *file = g_key_file_new();
  const std::string document = "[camera." + camera + "]\n" + text;
  GError *error = nullptr;
  bool ok =
      g_key_file_load_from_data(file, document.c_str(), document.size(), G_KEY_FILE_NONE, &error);
  if (!ok) {
    *why = error->message;
    g_clear_error(&error);
  } else {
    gsize groups = 0;
    g_strfreev(g_key_file_get_groups(file, &groups));
    ok = groups == 1;
    if (!ok) {
      *why = "holds a [group] line: give the camera's keys alone";
    } else {
      gchar *data = g_key_file_to_data(file, nullptr, nullptr);
      *group = std::string("\n") + data;
      g_free(data);
    }
  }
  g_key_file_free(file);
  return ok;
}

}  // namespace

FleetCameraCheck check_fleet_camera(const std::string &camera, const std::string &text,
                                    const std::string &key, const std::string &defaults) {
  // The same keys over the same defaults check the same: the hosts of one process (a fleet
  // simulation's hundred) check each camera once, not once each (making its elements is the
  // costly part). Bounded: a host whose cameras change for years forgets and checks again.
  static std::map<std::string, FleetCameraCheck> done;
  const std::string asked = key + '\n' + defaults + '\n' + text;
  if (const auto found = done.find(asked); found != done.end()) return found->second;
  if (done.size() >= 100000) done.clear();
  return done[asked] = check_fleet_camera_anew(camera, text, key, defaults);
}

FleetCameraCheck check_fleet_camera_anew(const std::string &camera, const std::string &text,
                                         const std::string &key, const std::string &defaults) {
  FleetCameraCheck c;
  c.text = text;
  std::string why;
  if (!valid_camera_name(camera)) {
    c.error = key + ": a camera's name is 1 to 64 letters, digits, - and _";
    return c;
  }
  if (!as_group(camera, text, &c.group, &why)) {
    c.error = key + ": " + why;
    return c;
  }
  ServiceConfig parsed;
  std::vector<std::string> errors;
  if (parse_checked_config(defaults + c.group, key, &parsed, &errors)) {
    if (!parsed.cameras.empty()) c.camera = std::move(parsed.cameras[0]);
    c.enabled = parsed.cameras.empty() || c.camera.enabled;
  } else {
    for (const std::string &e : errors) c.error += (c.error.empty() ? "" : "; ") + e;
  }
  return c;
}

}  // namespace cudanms::service
