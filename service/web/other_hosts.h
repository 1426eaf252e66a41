// A fleet host's questions to the other hosts for their cameras (/api/host/cameras), for its
// page's /api/cameras: each page open asks every second, so the answers are kept for a second
// and one round of questions serves every page asking meanwhile (it was one round a page a
// second: N pages, N requests a second to every other host).
#pragma once

#include <glib.h>
#include <libsoup/soup.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "web.h"

namespace cudanms::service {

class OtherHostsCameras {
 public:
  using Then = std::function<void(const std::vector<HostCameras> &)>;
  explicit OtherHostsCameras(gint64 keep_us = G_USEC_PER_SEC) : keep_us_(keep_us) {}
  ~OtherHostsCameras();  // a round on its way answers nobody
  OtherHostsCameras(const OtherHostsCameras &) = delete;
  OtherHostsCameras &operator=(const OtherHostsCameras &) = delete;
  // `then` with every answer of `hosts` (host -> its endpoint's URL) that came within the
  // session's timeout: at once from answers younger than keep_us, else from the main loop once
  // this round's (started now, or already on its way: then its hosts) are in. A host that did
  // not answer is left out.
  void get(SoupSession *session, const std::map<std::string, std::string> &hosts, Then then);
  // The last answer of each host that answered once and not in the latest round (dead, cut
  // off, or no longer registered), the oldest first: its cameras' last events stay on the page.
  const std::vector<HostCameras> &gone() const { return gone_; }

 private:
  struct Round;
  const gint64 keep_us_;
  std::vector<HostCameras> answers_;
  gint64 answered_us_ = 0;  // 0: never
  // Every host's last answer and when it came, by URL (a host a site has had: a few hundred).
  std::map<std::string, std::pair<gint64, std::string>> last_;
  std::vector<HostCameras> gone_;
  void keep(const std::vector<HostCameras> &answers);
  // The round on its way, shared with its requests' callbacks (they may end after this object).
  std::shared_ptr<Round> asking_;
};

}  // namespace cudanms::service
