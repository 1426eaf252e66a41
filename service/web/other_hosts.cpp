#include "other_hosts.h"

#include <algorithm>
#include <set>
#include <utility>

namespace cudanms::service {

struct OtherHostsCameras::Round {
  std::vector<HostCameras> answers;
  std::vector<Then> waiting;
  int pending = 0;
  OtherHostsCameras *owner = nullptr;  // nullptr once the owner is gone: nobody to answer
  void one_done() {
    if (--pending > 0 || !owner) return;
    owner->keep(answers);
    owner->asking_.reset();
    for (const Then &then : waiting) then(answers);
  }
};

void OtherHostsCameras::keep(const std::vector<HostCameras> &answers) {
  answers_ = answers;
  answered_us_ = g_get_monotonic_time();
  std::set<std::string> answered;
  for (const HostCameras &a : answers) {
    last_[a.url] = {answered_us_, a.body};
    answered.insert(a.url);
  }
  std::vector<std::pair<gint64, HostCameras>> gone;
  for (const auto &[url, last] : last_)
    if (!answered.count(url)) gone.push_back({last.first, {url, last.second}});
  std::sort(gone.begin(), gone.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  gone_.clear();
  for (auto &[at, host] : gone) gone_.push_back(std::move(host));
}

OtherHostsCameras::~OtherHostsCameras() {
  if (asking_) asking_->owner = nullptr;
}

void OtherHostsCameras::get(SoupSession *session, const std::map<std::string, std::string> &hosts,
                            Then then) {
  if (asking_) {
    asking_->waiting.push_back(std::move(then));
    return;
  }
  if (answered_us_ && g_get_monotonic_time() - answered_us_ < keep_us_) {
    then(answers_);
    return;
  }
  auto round = std::make_shared<Round>();
  round->owner = this;
  round->waiting.push_back(std::move(then));
  round->pending = 1;
  asking_ = round;
  struct Ask {
    std::shared_ptr<Round> round;
    std::string url;
    SoupMessage *message;
  };
  for (const auto &[host, url] : hosts) {
    SoupMessage *message = soup_message_new("GET", (url + "/api/host/cameras").c_str());
    if (!message) continue;
    round->pending++;
    soup_session_send_and_read_async(
        session, message, G_PRIORITY_DEFAULT, nullptr,
        [](GObject *source, GAsyncResult *result, gpointer data) {
          auto *ask = static_cast<Ask *>(data);
          GBytes *body = soup_session_send_and_read_finish(SOUP_SESSION(source), result, nullptr);
          if (body && soup_message_get_status(ask->message) == 200) {
            gsize size = 0;
            const char *bytes = static_cast<const char *>(g_bytes_get_data(body, &size));
            ask->round->answers.push_back({ask->url, std::string(bytes, size)});
          }
          if (body) g_bytes_unref(body);
          g_object_unref(ask->message);
          ask->round->one_done();
          delete ask;
        },
        new Ask{round, url, message});
  }
  round->one_done();
}

}  // namespace cudanms::service
