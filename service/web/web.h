// The operator's page (service/web/page/: plain HTML, CSS and JavaScript, no build step) and the
// API it reads, served by the service's endpoint (metrics.h) next to /metrics and /health:
//   /, /app.js, /style.css   the page, from the install prefix (or the source tree, uninstalled)
//   /api/cameras             every camera: state, host, GPU, frames/s, last error, reconnects,
//                            counts per line, direction and class, zones' occupancy, the newest
//                            events, the number of its latest picture
//   /api/host/cameras        the same of this host's cameras alone (a fleet host's /api/cameras
//                            has the site's, asking the other hosts for theirs)
//   /api/stream              the same document each second, as Server-Sent Events
//   /snapshot/NAME           the camera's latest picture with its boxes, lines and counts drawn
//                            (boxoverlay), a JPEG a snapshot-interval (session.h)
// Nothing here says a camera's URL: credentials in an error's text are taken out.
#pragma once

#include <string>
#include <vector>

#include "camera.h"
#include "metrics.h"
#include "worker_merge.h"

namespace cudanms::service {

constexpr const char *kJpegType = "image/jpeg";
constexpr const char *kMp4Type = "video/mp4";

// The /api/cameras document of `cameras`, each shown on `host`.
std::string render_cameras(const std::vector<CameraSnapshot> &cameras, const std::string &host);
// The answers' /api/cameras documents as one (a supervisor's, from its workers' and its own),
// every camera on `host` (the supervisor's: a worker does not know the fleet's name for it); an
// answer that is not such a document is left out.
std::string merge_cameras(const std::vector<WorkerAnswer> &answers, const std::string &host);
// The "cameras" object of `doc` (an /api/cameras or /health document), parsed by `parser` (which
// owns it); nullptr where `doc` is no such document.
JsonObject *cameras_of(JsonParser *parser, const std::string &doc);
// A fleet's camera as etcd says it: its owner host ("": none), where that host's endpoint is,
// or why it cannot run.
struct SiteCamera {
  std::string name, owner, owner_url, error;
  bool enabled = true;
};
// Another fleet host's /api/host/cameras answer, asked at `url`.
struct HostCameras {
  std::string url, body;
};
// A fleet host's /api/cameras: `here` (its own, host set), the other hosts' cameras (each with
// "page": the host's page, where its picture and counts come from) and, for a camera of `site`
// that none of them gave, what etcd says: "unplaced" (no host runs it, `last_error` why not) or
// "unanswered" (its host did not answer), with the events it last had in `gone` (the last answers
// of hosts that answer no more), each marked with the host that ran it then ("host"): a host's
// death does not take its last events off the page.
std::string site_cameras(const std::string &here, const std::vector<HostCameras> &others,
                         const std::vector<SiteCamera> &site,
                         const std::vector<HostCameras> &gone = {});
// The /snapshot/NAME reply of a camera's latest picture (503 before the first).
Reply snapshot_reply(const Snapshot &snapshot);
// The camera NAME of /snapshot/NAME, "" for another path.
std::string snapshot_camera(const std::string &path);
// 404 for a path the endpoint does not know.
Reply not_found(const std::string &path);
// A file of the page ("/" is index.html); 404 for any other path.
Reply page_file(const std::string &path);
// `text` with the user and password of every URL in it taken out.
std::string without_credentials(const std::string &text);
// The host name the page shows: the fleet's host-id, else the machine's name.
std::string host_name(const std::string &host_id);

}  // namespace cudanms::service
