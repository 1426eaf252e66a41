#include "etcd_login.h"

#include <glib.h>
#include <json-glib/json-glib.h>

#include <mutex>

#include "config.h"

namespace cudanms::service {
namespace {

std::mutex lock;  // the login and its token: every thread's requests read them
std::string user, password, token;

std::string json_string(const std::string &text) {
  JsonNode *node = json_node_init_string(json_node_alloc(), text.c_str());
  gchar *out = json_to_string(node, FALSE);
  std::string quoted = out;
  g_free(out);
  json_node_unref(node);
  return quoted;
}

}  // namespace

std::string use_etcd_login(const EtcdLogin &login) {
  std::string read, why;
  if (login.on() && !read_secret(login.password_file, &read, &why))
    return "the etcd password: " + why;
  std::lock_guard<std::mutex> guard(lock);
  user = login.user;
  password = read;
  token.clear();
  return "";
}

std::string use_etcd(const EtcdTls &tls, const EtcdLogin &login) {
  const std::string why = use_etcd_tls(tls);
  return why.empty() ? use_etcd_login(login) : why;
}

namespace etcd_login {

bool needed(const std::string &path) {
  std::lock_guard<std::mutex> guard(lock);
  return !user.empty() && token.empty() && path != kPath;
}

std::string request() {
  std::lock_guard<std::mutex> guard(lock);
  return "{\"name\":" + json_string(user) + ",\"password\":" + json_string(password) + "}";
}

bool take(const EtcdReply &reply) {
  const char *given =
      reply.object() ? json_object_get_string_member_with_default(reply.object(), "token", "") : "";
  if (!*given) return false;
  std::lock_guard<std::mutex> guard(lock);
  token = given;
  return true;
}

void authorize(SoupMessage *message, std::string *used) {
  std::lock_guard<std::mutex> guard(lock);
  if (!token.empty())
    soup_message_headers_replace(soup_message_get_request_headers(message), "Authorization",
                                 token.c_str());
  if (used) *used = token;
}

bool stale(const EtcdReply &reply) {
  {
    std::lock_guard<std::mutex> guard(lock);
    if (user.empty()) return false;
  }
  const std::string &why = reply.error();
  return why.find("invalid auth token") != std::string::npos ||
         why.find("user name is empty") != std::string::npos;
}

void forget(const std::string &used) {
  std::lock_guard<std::mutex> guard(lock);
  if (token == used) token.clear();
}

EtcdReply refused(const EtcdReply &reply) {
  std::lock_guard<std::mutex> guard(lock);
  return EtcdReply(nullptr, "etcd refused the login of user " + user + ": " + reply.error());
}

}  // namespace etcd_login
}  // namespace cudanms::service
