// FleetAgent::edit_shapes (fleet_agent.h): the operator page's change to a camera's lines and
// zones, checked as a host would run it and put into its etcd key only if no one changed the key
// meanwhile.
#include "config_edit.h"
#include "element_check.h"
#include "fleet_agent.h"

namespace cudanms::service {

void FleetAgent::edit_shapes(const std::string &camera, const ShapesEdit &edit,
                             std::function<void(Reply)> respond) {
  const auto found = cameras_.find(camera);
  if (found == cameras_.end()) {
    respond(edit_answer(404, "no camera " + camera + " in site " + settings_.site));
    return;
  }
  const std::string key = settings_.key("cameras", camera);
  const std::string before = found->second;
  // The camera as a host reads it, before and after.
  auto as_host_reads = [&](const std::string &keys, CameraConfig *out, std::string *why) {
    ServiceConfig parsed;
    std::vector<std::string> errors;
    if (!parse_checked_config(defaults_ + "\n[camera." + camera + "]\n" + keys, key, &parsed,
                              &errors)) {
      *why = errors.front();
      return false;
    }
    *out = parsed.cameras.front();
    return true;
  };
  CameraConfig now, next;
  std::string after, why;
  if (!as_host_reads(before, &now, &why))
    return respond(edit_answer(409, "the camera cannot run as it is now: " + why));
  if (why = pixel_shapes_kept(now, edit); !why.empty()) return respond(edit_answer(409, why));
  if (!shapes_edited(before, edit, &after, &why))
    return respond(edit_answer(409, key + ": " + why));
  if (!as_host_reads(after, &next, &why)) return respond(edit_answer(400, why));
  client_.post("/v3/kv/txn", etcd::txn({etcd::value_is(key, before)}, {etcd::put(key, after)}),
               [respond, key](EtcdReply reply) {
                 if (!reply.ok())
                   respond(edit_answer(503, "etcd did not take it: " + reply.error()));
                 else if (!reply.succeeded())
                   respond(edit_answer(409, key + " changed meanwhile: draw it again"));
                 else
                   respond(edit_answer(200, "saved in etcd, " + key));
               });
}

}  // namespace cudanms::service
