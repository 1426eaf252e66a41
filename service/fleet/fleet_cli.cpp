#include "fleet_cli.h"

#include <gst/gst.h>
#include <json-glib/json-glib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "commandline.h"
#include "config.h"
#include "config_keys.h"
#include "element_check.h"
#include "etcd.h"
#include "fleet_simulation.h"

namespace cudanms::service {
namespace {

// GPUs another machine of the fleet may have: a camera's gpu-id is the host's to check.
constexpr int kAnyGpus = 64;

int usage(const char *why) {
  g_printerr(
      "cudanms-service fleet: %s\n"
      "usage: cudanms-service fleet [--fleet URL,...|--config HOST.conf] [--site S] "
      "import FILE.conf | add NAME KEY=VALUE... | remove NAME | list | simulate N\n",
      why);
  return 2;
}

// A camera's group as etcd keeps it: its keys, one a line.
std::string group_text(const std::map<std::string, std::string> &keys) {
  GKeyFile *file = g_key_file_new();
  for (const auto &[key, value] : keys)
    g_key_file_set_value(file, "camera", key.c_str(), value.c_str());
  gchar *data = g_key_file_to_data(file, nullptr, nullptr);
  std::string text = data;
  g_free(data);
  g_key_file_free(file);
  return text.substr(text.find('\n') + 1);  // without its [camera] line
}

std::map<std::string, std::string> keys_of(GKeyFile *file, const char *group) {
  std::map<std::string, std::string> out;
  gchar **keys = g_key_file_get_keys(file, group, nullptr, nullptr);
  for (gchar **key = keys; key && *key; ++key) {
    gchar *value = g_key_file_get_value(file, group, *key, nullptr);
    out[*key] = value ? value : "";
    g_free(value);
  }
  g_strfreev(keys);
  return out;
}

// The cameras of a config file, each with its [service] defaults in it (the keys a camera may
// have: every host runs it the same way), checked as the service checks a file; false with the
// errors printed.
bool cameras_of_file(const std::string &path, std::map<std::string, std::string> *out) {
  ServiceConfig parsed;
  std::vector<std::string> errors;
  std::string text;
  if (!load_checked_config(path, &parsed, &errors, kAnyGpus, &text)) {
    for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
    return false;
  }
  GKeyFile *file = g_key_file_new();
  g_key_file_load_from_data(file, text.c_str(), text.size(), G_KEY_FILE_NONE, nullptr);
  std::map<std::string, std::string> defaults;
  for (const auto &[key, value] : keys_of(file, "service")) {
    const Key *k = find_key(key);
    if (!k || k->where != Where::kService) defaults[key] = value;
  }
  for (const CameraConfig &camera : parsed.cameras) {
    std::map<std::string, std::string> keys = defaults;
    for (const auto &[key, value] : keys_of(file, ("camera." + camera.name).c_str()))
      keys[key] = value;
    (*out)[camera.name] = group_text(keys);
  }
  g_key_file_free(file);
  return true;
}

EtcdReply call(EtcdClient &client, const std::string &body) {
  EtcdReply reply = client.post_sync("/v3/kv/txn", body);
  if (!reply.ok()) g_printerr("cudanms-service fleet: %s\n", reply.error().c_str());
  return reply;
}

int import_file(EtcdClient &client, const FleetSettings &fleet, const std::string &path) {
  std::map<std::string, std::string> cameras;
  if (!cameras_of_file(path, &cameras)) return 2;
  EtcdReply stored = call(client, etcd::txn({}, {etcd::range(fleet.key("cameras"), true)}));
  if (!stored.ok()) return 1;
  std::map<std::string, std::string> before;
  for (const EtcdKeyValue &kv : stored.kvs(0)) before[kv.key] = kv.value;
  std::vector<std::string> puts;
  int added = 0, changed = 0;
  for (const auto &[name, text] : cameras) {
    const std::string key = fleet.key("cameras", name);
    const auto found = before.find(key);
    if (found != before.end() && found->second == text) continue;
    (found == before.end() ? added : changed)++;
    puts.push_back(etcd::put(key, text));
  }
  // etcd takes at most 128 operations a transaction (its --max-txn-ops default): a site's
  // cameras go in as many as that takes, each whole.
  constexpr size_t kMostOperations = 128;
  for (size_t at = 0; at < puts.size(); at += kMostOperations) {
    const size_t end = std::min(puts.size(), at + kMostOperations);
    if (!call(client, etcd::txn({}, {puts.begin() + at, puts.begin() + end})).ok()) {
      if (at > 0)
        g_printerr("cudanms-service fleet: %zu of the %zu new or changed cameras were stored\n", at,
                   puts.size());
      return 1;
    }
  }
  printf("%s: %zu cameras into %s: %d new, %d changed, %zu as they were\n", path.c_str(),
         cameras.size(), fleet.key("cameras").c_str(), added, changed,
         cameras.size() - added - changed);
  return 0;
}

int add_camera(EtcdClient &client, const FleetSettings &fleet, const std::string &name,
               const std::vector<std::string> &assignments) {
  std::map<std::string, std::string> keys;
  for (const std::string &a : assignments) {
    const size_t equals = a.find('=');
    if (equals == std::string::npos || equals == 0)
      return usage(("a camera's key is KEY=VALUE, not \"" + a + "\"").c_str());
    keys[a.substr(0, equals)] = a.substr(equals + 1);
  }
  const std::string text = group_text(keys);
  ServiceConfig parsed;
  std::vector<std::string> errors;
  if (!parse_checked_config("[service]\n[camera." + name + "]\n" + text, fleet.key("cameras", name),
                            &parsed, &errors, kAnyGpus)) {
    for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
    return 2;
  }
  const std::string key = fleet.key("cameras", name);
  EtcdReply reply = call(client, etcd::txn({etcd::absent(key)}, {etcd::put(key, text)}));
  if (!reply.ok()) return 1;
  if (!reply.succeeded()) {
    g_printerr(
        "cudanms-service fleet: camera %s is there already (%s): remove it first, or "
        "import a file with it\n",
        name.c_str(), key.c_str());
    return 1;
  }
  printf("%s added\n", key.c_str());
  return 0;
}

int remove_camera(EtcdClient &client, const FleetSettings &fleet, const std::string &name) {
  const std::string key = fleet.key("cameras", name), state = fleet.key("state", name);
  // Its counts and undelivered events go with it: a camera added again starts anew. Its owner
  // key is its host's to delete, once the camera has stopped there.
  EtcdReply reply = call(client, etcd::txn({}, {etcd::remove(key), etcd::remove(state),
                                                etcd::remove(state + "/events/", true)}));
  if (!reply.ok()) return 1;
  JsonArray *responses = json_object_get_array_member(reply.object(), "responses");
  JsonObject *first = responses ? json_array_get_object_element(responses, 0) : nullptr;
  JsonObject *deleted = first && json_object_has_member(first, "response_delete_range")
                            ? json_object_get_object_member(first, "response_delete_range")
                            : nullptr;
  if (!deleted || !json_object_has_member(deleted, "deleted")) {
    g_printerr("cudanms-service fleet: no camera %s (%s)\n", name.c_str(), key.c_str());
    return 1;
  }
  printf("%s removed\n", key.c_str());
  return 0;
}

int list_fleet(EtcdClient &client, const FleetSettings &fleet) {
  EtcdReply reply = call(client, etcd::txn({}, {etcd::range(fleet.key("cameras"), true),
                                                etcd::range(fleet.key("hosts"), true),
                                                etcd::range(fleet.key("owners"), true)}));
  if (!reply.ok()) return 1;
  std::map<std::string, std::string> owners;
  for (const EtcdKeyValue &kv : reply.kvs(2))
    owners[kv.key.substr(fleet.key("owners").size())] = kv.value;
  std::map<std::string, int> owned;
  printf("cameras of site %s (%s):\n", fleet.site.c_str(), fleet.key("cameras").c_str());
  for (const EtcdKeyValue &kv : reply.kvs(0)) {
    const std::string name = kv.key.substr(fleet.key("cameras").size());
    const auto owner = owners.find(name);
    if (owner != owners.end()) owned[owner->second]++;
    // What the camera is: its url (or source), as its keys give it.
    GKeyFile *keys = g_key_file_new();
    const std::string group = "[camera]\n" + kv.value;
    gchar *what = nullptr;
    if (g_key_file_load_from_data(keys, group.c_str(), group.size(), G_KEY_FILE_NONE, nullptr)) {
      what = g_key_file_get_value(keys, "camera", "url", nullptr);
      if (!what) what = g_key_file_get_value(keys, "camera", "source", nullptr);
    }
    printf("  %-20s %-16s %s\n", name.c_str(),
           owner == owners.end() ? "(no host)" : owner->second.c_str(), what ? what : "(no url)");
    g_free(what);
    g_key_file_free(keys);
  }
  printf("hosts:\n");
  for (const EtcdKeyValue &kv : reply.kvs(1)) {
    const std::string name = kv.key.substr(fleet.key("hosts").size());
    printf("  %-20s %d cameras  %s\n", name.c_str(), owned[name], kv.value.c_str());
  }
  return 0;
}

}  // namespace

int run_fleet_command(int argc, char **argv) {
  gchar *endpoints = nullptr, *site = nullptr, *prefix = nullptr, *host_config = nullptr;
  const GOptionEntry entries[] = {
      {"fleet", 0, 0, G_OPTION_ARG_STRING, &endpoints, "etcd's endpoints", "URL,..."},
      {"config", 'c', 0, G_OPTION_ARG_FILENAME, &host_config,
       "Take fleet, site and fleet-prefix from a host's config", "HOST.conf"},
      {"site", 0, 0, G_OPTION_ARG_STRING, &site, "The site (default: default)", "SITE"},
      {"fleet-prefix", 0, 0, G_OPTION_ARG_STRING, &prefix, "Where the keys are (default /cudanms)",
       "PATH"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  const CommandLineHelp help{
      "import FILE.conf | add NAME KEY=VALUE... | remove NAME | list | simulate N",
      "A fleet's cameras, as etcd keeps them (docs/fleet.md)."};
  std::string parse_error;
  if (!gst_cv_parse_command_line(help, entries, &argc, &argv, &parse_error))
    return usage(parse_error.c_str());
  FleetSettings fleet;
  if (host_config) {
    ServiceConfig host;
    std::vector<std::string> errors;
    if (!load_config(host_config, &host, &errors, kAnyGpus)) {
      for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
      return 2;
    }
    fleet = host.fleet;
    if (const std::string why = use_etcd(fleet.tls, fleet.login); !why.empty())
      return usage(why.c_str());
  }
  std::string why;
  if (endpoints) why = EtcdClient::check_endpoints(endpoints, &fleet.endpoints);
  if (!why.empty()) return usage(("--fleet: " + why).c_str());
  if (fleet.endpoints.empty()) return usage("give --fleet URL,... or --config HOST.conf");
  if (site) fleet.site = site;
  if (prefix) fleet.prefix = prefix;
  std::vector<std::string> args(argv + 1, argv + argc);  // argv[0]: "fleet"
  if (args.empty()) return usage("which command?");
  EtcdClient client(fleet.endpoints, 3000);
  const std::string command = args[0];
  if (command == "import" && args.size() == 2) return import_file(client, fleet, args[1]);
  if (command == "add" && args.size() >= 3)
    return add_camera(client, fleet, args[1], {args.begin() + 2, args.end()});
  if (command == "remove" && args.size() == 2) return remove_camera(client, fleet, args[1]);
  if (command == "list" && args.size() == 1) return list_fleet(client, fleet);
  if (command == "simulate" && args.size() == 2) {
    const long hosts = std::strtol(args[1].c_str(), nullptr, 10);
    gchar *text = nullptr;
    if (!host_config || !g_file_get_contents(host_config, &text, nullptr, nullptr))
      return usage("simulate takes its hosts' config: --config HOST.conf");
    const std::string host_text = text;
    g_free(text);
    if (hosts < 0 || hosts > 10000) return usage("simulate 0 to 10000 hosts");
    return run_simulation(fleet, host_text, static_cast<int>(hosts));
  }
  return usage(("cannot " + command + " with these arguments").c_str());
}

}  // namespace cudanms::service
