#include "worker_merge.h"

#include <json-glib/json-glib.h>

#include <map>
#include <sstream>

#include "metrics.h"
#include "web.h"

namespace cudanms::service {
namespace {

struct Family {
  std::string help, type;  // their whole lines
  std::vector<std::string> samples;
};

// The value of `label` in a sample line's label set, "" when it has none.
std::string label_value(const std::string &sample, const std::string &label) {
  const size_t open = sample.find('{');
  if (open == std::string::npos) return "";
  const std::string key = label + "=\"";
  size_t at = open + 1;
  while ((at = sample.find(key, at)) != std::string::npos) {
    const char before = sample[at - 1];
    if (before == '{' || before == ',') {
      const size_t start = at + key.size();
      std::string value;
      for (size_t i = start; i < sample.size() && sample[i] != '"'; ++i) {
        if (sample[i] == '\\' && i + 1 < sample.size()) ++i;
        value += sample[i];
      }
      return value;
    }
    at += key.size();
  }
  return "";
}

bool has_label(const std::string &sample, const std::string &label) {
  const size_t open = sample.find('{');
  if (open == std::string::npos) return false;
  const size_t close = sample.find("} ", open);
  const std::string set = sample.substr(open, close == std::string::npos ? close : close - open);
  return set.find("{" + label + "=\"") != std::string::npos ||
         set.find("," + label + "=\"") != std::string::npos;
}

std::string with_worker(const std::string &sample, const std::string &worker) {
  const std::string label = "worker=\"" + worker + "\"";
  const size_t open = sample.find('{');
  const size_t space = sample.find(' ');
  if (open != std::string::npos && open < space)
    return sample.substr(0, open + 1) + label + "," + sample.substr(open + 1);
  return sample.substr(0, space) + "{" + label + "}" + sample.substr(space);
}

}  // namespace

std::string merge_metrics(const std::vector<WorkerAnswer> &answers) {
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  for (const WorkerAnswer &answer : answers) {
    std::istringstream in(answer.body);
    std::string line, current;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        std::istringstream words(line.substr(7));
        words >> current;
        auto [family, fresh] = families.try_emplace(current);
        if (fresh) order.push_back(current);
        (line[2] == 'H' ? family->second.help : family->second.type) = line;
        continue;
      }
      if (line[0] == '#') continue;
      if (current.empty()) {  // a sample before any family: its own
        std::istringstream words(line);
        words >> current;
        current = current.substr(0, current.find('{'));
        if (families.try_emplace(current).second) order.push_back(current);
      }
      if (has_label(line, "camera") || has_label(line, "worker")) {
        families[current].samples.push_back(line);
      } else if (has_label(line, "gpu")) {
        if (label_value(line, "gpu") == answer.worker) families[current].samples.push_back(line);
      } else {
        families[current].samples.push_back(with_worker(line, answer.worker));
      }
    }
  }
  std::string out;
  for (const std::string &name : order) {
    const Family &f = families[name];
    if (!f.help.empty()) out += f.help + "\n";
    if (!f.type.empty()) out += f.type + "\n";
    for (const std::string &sample : f.samples) out += sample + "\n";
  }
  return out;
}

std::string merge_health(const std::vector<WorkerAnswer> &answers,
                         const std::vector<WorkerHealth> &workers, double uptime_s, int *status,
                         const std::function<bool(JsonBuilder *)> &more) {
  bool ok = true;
  JsonBuilder *b = begin_health(uptime_s);
  for (const WorkerAnswer &answer : answers) {
    JsonParser *parser = json_parser_new();
    JsonObject *cameras = cameras_of(parser, answer.body);
    if (!cameras) ok = false;
    GList *names = cameras ? json_object_get_members(cameras) : nullptr;
    for (GList *n = names; n; n = n->next) {
      const char *name = static_cast<const char *>(n->data);
      JsonNode *camera = json_object_get_member(cameras, name);
      if (JSON_NODE_HOLDS_OBJECT(camera)) {
        JsonObject *o = json_node_get_object(camera);
        const bool enabled =
            !json_object_has_member(o, "enabled") || json_object_get_boolean_member(o, "enabled");
        const char *state =
            json_object_has_member(o, "state") ? json_object_get_string_member(o, "state") : "";
        if (enabled && g_strcmp0(state, "streaming") != 0) ok = false;
      }
      json_builder_set_member_name(b, name);
      json_builder_add_value(b, json_node_copy(camera));
    }
    g_list_free(names);
    g_object_unref(parser);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "workers");
  json_builder_begin_object(b);
  for (const WorkerHealth &w : workers) {
    ok = ok && w.up;
    json_builder_set_member_name(b, w.worker.c_str());
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "up");
    json_builder_add_boolean_value(b, w.up);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, w.pid);
    json_builder_set_member_name(b, "restarts");
    json_builder_add_int_value(b, w.restarts);
    json_builder_set_member_name(b, "last_exit");
    json_builder_add_string_value(b, w.last_exit.c_str());
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  if (more && !more(b)) ok = false;
  return end_health(b, ok, status);
}

}  // namespace cudanms::service
