#include "fleet_simulation.h"

#include <glib-unix.h>
#include <json-glib/json-glib.h>

#include <cstdio>
#include <vector>

#include "log.h"

namespace cudanms::service {

SimulatedHosts::SimulatedHosts(FleetSettings settings, std::string host_text)
    : settings_(std::move(settings)), host_text_(std::move(host_text)) {}

bool SimulatedHosts::add(const std::string &name) {
  if (hosts_.count(name) || !valid_camera_name(name)) return false;
  FleetSettings settings = settings_;
  settings.host_id = name;
  auto host = std::make_unique<Host>();
  FleetAgent::Hooks hooks;
  hooks.run = [this, name](std::vector<CameraConfig> cameras, const std::string &,
                           const std::map<std::string, std::string> &,
                           long long) { run(name, cameras); };
  hooks.fence = [](gint64) {};
  hooks.refuse = [name](const std::string &why) {
    log_line("simulated host %s refused: %s", name.c_str(), why.c_str());
  };
  host->agent = std::make_unique<FleetAgent>(settings, host_text_, 1, "simulated://" + name,
                                             std::move(hooks));
  FleetAgent *agent = host->agent.get();
  hosts_[name] = std::move(host);
  agent->start();
  return true;
}

bool SimulatedHosts::kill(const std::string &name) { return hosts_.erase(name) > 0; }

void SimulatedHosts::run(const std::string &name, const std::vector<CameraConfig> &cameras) {
  Host &host = *hosts_.at(name);
  std::set<std::string> next;
  for (const CameraConfig &camera : cameras) next.insert(camera.name);
  std::vector<std::string> stopped;
  for (const std::string &camera : host.running)
    if (!next.count(camera)) stopped.push_back(camera);
  host.running = std::move(next);
  // Stopped at once, told from the main loop as a worker's line would be.
  for (const std::string &camera : stopped) {
    struct Told {
      SimulatedHosts *self;
      std::string host, camera;
    };
    g_idle_add_full(
        G_PRIORITY_DEFAULT,
        [](gpointer data) -> gboolean {
          auto *told = static_cast<Told *>(data);
          const auto found = told->self->hosts_.find(told->host);
          if (found != told->self->hosts_.end()) found->second->agent->camera_stopped(told->camera);
          return G_SOURCE_REMOVE;
        },
        new Told{this, name, camera}, [](gpointer data) { delete static_cast<Told *>(data); });
  }
}

std::string SimulatedHosts::report() const {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "hosts");
  json_builder_add_int_value(b, static_cast<gint64>(hosts_.size()));
  gint64 running = 0;
  json_builder_set_member_name(b, "per_host");
  json_builder_begin_object(b);
  for (const auto &[name, host] : hosts_) {
    json_builder_set_member_name(b, name.c_str());
    json_builder_add_int_value(b, static_cast<gint64>(host->running.size()));
    running += static_cast<gint64>(host->running.size());
  }
  json_builder_end_object(b);
  // What each host sees: the other hosts, and the cameras no host owns.
  json_builder_set_member_name(b, "views");
  json_builder_begin_object(b);
  for (const auto &[name, host] : hosts_) {
    gint64 unowned = 0;
    for (const SiteCamera &camera : host->agent->site()) unowned += camera.owner.empty();
    json_builder_set_member_name(b, name.c_str());
    json_builder_add_string_value(b, (std::to_string(host->agent->other_hosts().size()) +
                                      " others, " + std::to_string(unowned) + " unowned")
                                         .c_str());
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "running");
  json_builder_add_int_value(b, running);
  json_builder_end_object(b);
  JsonNode *root = json_builder_get_root(b);
  gchar *text = json_to_string(root, FALSE);  // one line
  const std::string out = text;
  g_free(text);
  json_node_unref(root);
  g_object_unref(b);
  return out;
}

int run_simulation(const FleetSettings &settings, const std::string &host_text, int hosts) {
  GMainLoop *loop = g_main_loop_new(nullptr, FALSE);
  SimulatedHosts simulated(settings, host_text);
  const std::string prefix = settings.host_id.empty() ? "sim" : settings.host_id;
  for (int i = 1; i <= hosts; ++i) simulated.add(prefix + "-" + std::to_string(i));
  struct Commands {
    SimulatedHosts *hosts;
    GMainLoop *loop;
    std::string pending;
  } commands{&simulated, loop, ""};
  GIOChannel *in = g_io_channel_unix_new(0);
  g_io_add_watch(
      in, static_cast<GIOCondition>(G_IO_IN | G_IO_HUP | G_IO_ERR),
      [](GIOChannel *channel, GIOCondition, gpointer data) -> gboolean {
        auto *c = static_cast<Commands *>(data);
        gchar *line = nullptr;
        const GIOStatus status = g_io_channel_read_line(channel, &line, nullptr, nullptr, nullptr);
        if (status == G_IO_STATUS_EOF || status == G_IO_STATUS_ERROR) {
          g_main_loop_quit(c->loop);
          return G_SOURCE_REMOVE;
        }
        std::string command = line ? g_strstrip(line) : "";
        g_free(line);
        std::string answer;
        if (command == "report") {
          answer = c->hosts->report();
        } else if (command.rfind("add ", 0) == 0) {
          answer = c->hosts->add(command.substr(4)) ? "added" : "cannot add " + command.substr(4);
        } else if (command.rfind("kill ", 0) == 0) {
          answer = c->hosts->kill(command.substr(5)) ? "killed" : "no host " + command.substr(5);
        } else if (!command.empty()) {
          answer = "commands: add NAME, kill NAME, report";
        }
        if (!answer.empty()) printf("%s\n", answer.c_str()), fflush(stdout);
        return G_SOURCE_CONTINUE;
      },
      &commands);
  g_unix_signal_add(
      SIGTERM,
      [](gpointer data) -> gboolean {
        g_main_loop_quit(static_cast<GMainLoop *>(data));
        return G_SOURCE_REMOVE;
      },
      loop);
  g_main_loop_run(loop);
  g_io_channel_unref(in);
  g_main_loop_unref(loop);
  return 0;
}

}  // namespace cudanms::service
