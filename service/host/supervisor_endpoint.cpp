// The supervisor's endpoint (supervisor.h): what it answers from its workers' answers.
#include <algorithm>
#include <set>

#include "config_edit.h"
#include "events_api.h"
#include "log.h"
#include "supervisor.h"
#include "web.h"
#include "worker_merge.h"

namespace cudanms::service {
namespace {

// One GET of the supervisor's endpoint, asked of every live worker.
struct Gather {
  Supervisor *supervisor;
  std::string path;
  MetricsServer::Respond respond;
  std::vector<WorkerAnswer> answers;
  std::set<unsigned> answered;
  int pending = 0;
  std::function<void(Gather *)> finish;
};

struct Ask {
  Gather *gather;
  unsigned gpu;
  SoupMessage *message;
};

void on_answer(GObject *session, GAsyncResult *result, gpointer data) {
  auto *ask = static_cast<Ask *>(data);
  GBytes *body = soup_session_send_and_read_finish(SOUP_SESSION(session), result, nullptr);
  const guint status = soup_message_get_status(ask->message);
  // /health answers 503 for a degraded worker: its document is what counts.
  if (body && (status == 200 || status == 503)) {
    gsize size = 0;
    const char *data_ptr = static_cast<const char *>(g_bytes_get_data(body, &size));
    ask->gather->answers.push_back({worker_label(ask->gpu), std::string(data_ptr, size)});
    ask->gather->answered.insert(ask->gpu);
  }
  if (body) g_bytes_unref(body);
  g_object_unref(ask->message);
  Gather *gather = ask->gather;
  delete ask;
  if (--gather->pending == 0) {
    gather->finish(gather);
    delete gather;
  }
}

// A worker's or another host's answer passed on as it is (a picture).
struct Forward {
  MetricsServer::Respond respond;
  SoupMessage *message;
  std::string silent;  // the answer when none comes
  // Tried when none comes: the answer if it is good (a fleet's pictures on a shared disk).
  std::function<Reply()> otherwise;
};

void on_forwarded(GObject *session, GAsyncResult *result, gpointer data) {
  auto *forward = static_cast<Forward *>(data);
  GError *error = nullptr;
  GBytes *body = soup_session_send_and_read_finish(SOUP_SESSION(session), result, &error);
  // Cancelled: the supervisor is going (its session with it); nothing of it may be asked.
  if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) forward->otherwise = nullptr;
  g_clear_error(&error);
  Reply reply;
  if (body) {
    gsize size = 0;
    const char *bytes = static_cast<const char *>(g_bytes_get_data(body, &size));
    reply.status = static_cast<int>(soup_message_get_status(forward->message));
    const char *type = soup_message_headers_get_content_type(
        soup_message_get_response_headers(forward->message), nullptr);
    reply.type = type ? type : "application/octet-stream";
    reply.body.assign(bytes, size);
    g_bytes_unref(body);
  } else if (Reply local = forward->otherwise ? forward->otherwise() : Reply();
             local.status == 200) {
    reply = std::move(local);
  } else {
    reply.status = 503;
    reply.type = "text/plain; charset=utf-8";
    reply.body = forward->silent;
  }
  g_object_unref(forward->message);
  forward->respond(std::move(reply));
  delete forward;
}

}  // namespace

void Supervisor::forward_snapshot(const std::string &camera, MetricsServer::Respond respond) {
  // Asked of the camera's worker, or of the fleet host that runs it.
  std::string base;
  SoupSession *session = nullptr;
  const auto placed = assignment_.cameras.find(camera);
  if (placed != assignment_.cameras.end()) {
    const auto worker = workers_.find(placed->second);
    if (worker == workers_.end() || !worker->second->process) {
      respond({503, "text/plain; charset=utf-8", "the camera's worker is not running\n"});
      return;
    }
    base = "http://worker";
    session = worker->second->session;
  } else if (fleet_) {
    base = fleet_->owner_url(camera);
    session = hosts_session();
  }
  // The camera's name as one path segment, whatever it holds.
  gchar *segment = g_uri_escape_string(camera.c_str(), nullptr, FALSE);
  SoupMessage *message =
      base.empty() ? nullptr : soup_message_new("GET", (base + "/snapshot/" + segment).c_str());
  g_free(segment);
  if (!message) {
    respond(not_found("/snapshot/" + camera));
    return;
  }
  soup_session_send_and_read_async(
      session, message, G_PRIORITY_DEFAULT, nullptr, on_forwarded,
      new Forward{std::move(respond), message, "the camera's worker or host did not answer\n", {}});
}

void Supervisor::forward_event_file(const std::string &host, const std::string &path,
                                    MetricsServer::Respond respond) {
  // Where that host does not answer, the file itself if this host can read it (a shared disk).
  auto local = [this, path] {
    return events_reply(history_.get(), path, [](const std::string &) { return false; });
  };
  const std::map<std::string, std::string> others = fleet_->other_hosts();
  const auto found = others.find(host);
  SoupMessage *message =
      found == others.end() ? nullptr : soup_message_new("GET", (found->second + path).c_str());
  if (!message) {
    Reply reply = local();
    respond(reply.status == 200
                ? std::move(reply)
                : Reply{503, "text/plain; charset=utf-8",
                        "the file is on host " + host + ", which is not in the site now\n"});
    return;
  }
  soup_session_send_and_read_async(
      hosts_session(), message, G_PRIORITY_DEFAULT, nullptr, on_forwarded,
      new Forward{std::move(respond), message, "host " + host + " did not answer\n", local});
}

SoupSession *Supervisor::hosts_session() {
  // A host that does not answer in 2 s is left out of the site's document (a page asks again
  // each second).
  if (hosts_session_) return hosts_session_;
  hosts_session_ = soup_session_new_with_options("timeout", 2, nullptr);
  // The other hosts' HTTPS: their certificates checked against tls-ca (else the system's CAs).
  if (!config_.tls_ca.empty()) {
    GError *error = nullptr;
    GTlsDatabase *trusted = g_tls_file_database_new(config_.tls_ca.c_str(), &error);
    if (trusted) {
      soup_session_set_tls_database(hosts_session_, trusted);
      g_object_unref(trusted);
    } else {
      log_line(
          "cannot read tls-ca %s: %s; the other hosts' HTTPS is checked against the "
          "system's certificates",
          config_.tls_ca.c_str(), error->message);
      g_error_free(error);
    }
  }
  // The site's host credential with every question to another host.
  if (!config_.host_credential.empty())
    g_signal_connect(hosts_session_, "request-queued",
                     G_CALLBACK(+[](SoupSession *, SoupMessage *message, gpointer data) {
                       const std::string bearer =
                           "Bearer " + *static_cast<const std::string *>(data);
                       soup_message_headers_replace(soup_message_get_request_headers(message),
                                                    "Authorization", bearer.c_str());
                     }),
                     &config_.host_credential);
  return hosts_session_;
}

void Supervisor::serve_site(std::string here, MetricsServer::Respond respond) {
  other_hosts_.get(
      hosts_session(), fleet_->other_hosts(),
      [this, here = std::move(here),
       respond = std::move(respond)](const std::vector<HostCameras> &others) {
        respond({200, kHealthType,
                 fleet_ ? site_cameras(here, others, fleet_->site(), other_hosts_.gone()) : here});
      });
}

void Supervisor::change(const std::string &path, const std::string &body,
                        const std::string &authorization, MetricsServer::Respond respond) {
  if (!fleet_) {
    Reply reply =
        change_config(path, body, authorization, config_.web_auth, config_path_,
                      "the cameras came from the command line: no config file to save to");
    if (reply.status == 200) reload();
    respond(std::move(reply));
    return;
  }
  std::string camera;
  ShapesEdit edit;
  Reply reply = read_change(path, body, authorization, config_.web_auth, &camera, &edit);
  if (reply.status != 0)
    respond(std::move(reply));
  else
    fleet_->edit_shapes(camera, edit, std::move(respond));  // its watch applies it
}

std::vector<CameraSnapshot> Supervisor::unanswered_cameras(
    const std::set<unsigned> &answered) const {
  std::vector<CameraSnapshot> unanswered;
  for (const auto &[name, gpu] : assignment_.cameras) {
    if (answered.count(gpu)) continue;
    const Worker *worker = workers_.count(gpu) ? workers_.at(gpu).get() : nullptr;
    CameraSnapshot c;
    c.name = name;
    c.state = worker && worker->process ? CameraState::kStarting : CameraState::kReconnecting;
    c.last_error = "its worker (" + worker_name(gpu) + ") " +
                   (worker && worker->process              ? "did not answer"
                    : worker && !worker->last_exit.empty() ? worker->last_exit + "; restarting"
                                                           : "is not running");
    for (const CameraConfig &camera : config_.cameras)
      if (camera.name == name) c.enabled = camera.enabled;
    unanswered.push_back(std::move(c));
  }
  return unanswered;
}

std::string Supervisor::merged_metrics(std::vector<WorkerAnswer> answers,
                                       const std::vector<CameraSnapshot> &unanswered,
                                       double uptime_s) const {
  ProcessSnapshot process = process_snapshot(uptime_s, {});
  process.gpus.clear();  // the workers' to give
  std::string own = render_metrics(unanswered, process);
  // A family of one sample per wanted worker.
  auto family = [this, &own](const char *name, const char *type, const char *help,
                             const std::function<std::string(const Worker &)> &value) {
    own += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto &[gpu, worker] : workers_)
      if (worker->wanted)
        own +=
            std::string(name) + "{worker=\"" + worker_label(gpu) + "\"} " + value(*worker) + "\n";
  };
  family("cudanms_worker_up", "gauge", "1 while the GPU's worker process runs",
         [](const Worker &w) { return std::string(w.process ? "1" : "0"); });
  family("cudanms_worker_restarts_total", "counter", "Times the GPU's worker was started again",
         [](const Worker &w) { return std::to_string(w.restarts); });
  if (fleet_) own += fleet_->metrics();
  answers.insert(answers.begin(), {"supervisor", own});
  return merge_metrics(answers);
}

Reply Supervisor::merged_health(std::vector<WorkerAnswer> answers,
                                const std::vector<CameraSnapshot> &unanswered,
                                double uptime_s) const {
  int ignored = 0;
  answers.push_back({"supervisor", render_health(unanswered, uptime_s, &ignored)});
  std::vector<WorkerHealth> workers;
  for (const auto &[gpu, worker] : workers_)
    if (worker->wanted)
      workers.push_back({worker_label(gpu), worker->process != nullptr, worker->pid,
                         worker->restarts, worker->last_exit});
  std::function<bool(JsonBuilder *)> fleet;
  if (fleet_)
    fleet = [this](JsonBuilder *b) {
      fleet_->health(b);
      return fleet_->healthy();
    };
  Reply reply;
  reply.type = kHealthType;
  reply.body = merge_health(answers, workers, uptime_s, &reply.status, fleet);
  return reply;
}

void Supervisor::serve(const std::string &path, MetricsServer::Respond respond) {
  if (const std::string camera = snapshot_camera(path); !camera.empty()) {
    forward_snapshot(camera, std::move(respond));
    return;
  }
  if (fleet_) {
    if (const std::string there = event_file_elsewhere(history_.get(), path, config_.fleet.host_id);
        !there.empty()) {
      forward_event_file(there, path, std::move(respond));
      return;
    }
  }
  if (is_events_path(path)) {  // the workers write into the history, the supervisor reads it
    respond(events_reply(history_.get(), path, [this](const std::string &name) {
      return std::any_of(config_.cameras.begin(), config_.cameras.end(),
                         [&](const CameraConfig &c) { return c.name == name; });
    }));
    return;
  }
  if (path != "/metrics" && path != "/health" && path != "/api/cameras" &&
      path != "/api/host/cameras") {
    respond(not_found(path));
    return;
  }
  auto *gather = new Gather{this, path, std::move(respond), {}, {}, 1, nullptr};
  gather->finish = [this](Gather *g) {
    const double uptime = uptime_s();
    const std::vector<CameraSnapshot> unanswered = unanswered_cameras(g->answered);
    Reply reply;
    if (g->path == "/metrics") {
      reply.type = kMetricsType;
      reply.body = merged_metrics(std::move(g->answers), unanswered, uptime);
    } else if (g->path == "/api/cameras" || g->path == "/api/host/cameras") {
      const std::string host = host_name(config_.fleet.host_id);
      g->answers.push_back({"supervisor", render_cameras(unanswered, host)});
      reply.type = kHealthType;
      reply.body = merge_cameras(g->answers, host);
      if (fleet_ && g->path == "/api/cameras") {
        serve_site(std::move(reply.body), std::move(g->respond));
        return;
      }
    } else {
      reply = merged_health(std::move(g->answers), unanswered, uptime);
    }
    g->respond(std::move(reply));
  };
  for (auto &[gpu, worker] : workers_) {
    if (!worker->process) continue;
    // A worker's cameras are its own either way.
    const std::string asked = path == "/api/host/cameras" ? "/api/cameras" : path;
    SoupMessage *message = soup_message_new("GET", ("http://worker" + asked).c_str());
    gather->pending++;
    soup_session_send_and_read_async(worker->session, message, G_PRIORITY_DEFAULT, nullptr,
                                     on_answer, new Ask{gather, gpu, message});
  }
  if (--gather->pending == 0) {  // no worker to ask
    gather->finish(gather);
    delete gather;
  }
}

}  // namespace cudanms::service
