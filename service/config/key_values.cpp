#include "key_values.h"

#include <gio/gio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cudanms::service {

std::string parse_bool(const std::string &value, bool *out) {
  if (value == "true") return (*out = true), "";
  if (value == "false") return (*out = false), "";
  return "must be true or false, not \"" + value + "\"";
}

std::string parse_seconds(const std::string &value, double least, double *out) {
  char *end = nullptr;
  const double v = g_ascii_strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v))
    return "must be a number of seconds, not \"" + value + "\"";
  if (v < least) {
    std::ostringstream why;
    why << "must be at least " << least << " s, not " << value;
    return why.str();
  }
  *out = v;
  return "";
}

std::string parse_bytes(const std::string &value, guint64 *out) {
  char *end = nullptr;
  const double n = g_ascii_strtod(value.c_str(), &end);
  const std::string unit = end ? end : "";
  const double scale = unit.empty()  ? 1
                       : unit == "K" ? 1024.0
                       : unit == "M" ? 1048576.0
                       : unit == "G" ? 1073741824.0
                                     : 0;
  if (value.empty() || end == value.c_str() || scale == 0 || !std::isfinite(n) || n < 0)
    return "must be a size, e.g. 500M or 20G (K, M, G), not \"" + value + "\"";
  *out = static_cast<guint64>(n * scale);
  return "";
}

std::string take_description(const std::string &value, std::string *out) {
  if (value.find_first_not_of(" \t") == std::string::npos) return "is empty";
  *out = value;
  return "";
}

std::string check_readable(const std::string &path) {
  if (path.empty()) return "";
  if (!g_file_test(path.c_str(), G_FILE_TEST_IS_REGULAR)) return "no such file: " + path;
  if (access(path.c_str(), R_OK) != 0) return "cannot read " + path + ": " + g_strerror(errno);
  return "";
}

std::string take_readable(const std::string &path, std::string *out) {
  const std::string why = check_readable(path);
  if (why.empty()) *out = path;
  return why;
}

std::string check_directory(const std::string &path) {
  std::string existing = path;
  while (!g_file_test(existing.c_str(), G_FILE_TEST_EXISTS)) {
    gchar *parent = g_path_get_dirname(existing.c_str());
    const bool top = existing == parent;
    existing = parent;
    g_free(parent);
    if (top) break;
  }
  if (!g_file_test(existing.c_str(), G_FILE_TEST_IS_DIR)) return "not a directory: " + existing;
  if (access(existing.c_str(), W_OK | X_OK) != 0)
    return "cannot write in " + existing + ": " + g_strerror(errno);
  return "";
}

std::string check_name(const std::string &name) {
  const bool good =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return g_ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
      });
  return good ? "" : "must be 1 to 64 letters, digits, -, _ and ., not \"" + name + "\"";
}

std::string check_topic(const std::string &topic) {
  if (topic.empty()) return "is empty";
  if (topic.find_first_of("+#") != std::string::npos)
    return "must not hold the wildcards + or #: \"" + topic + "\"";
  return "";
}

std::string check_endpoint_url(const std::string &url) {
  GUri *uri = g_uri_parse(url.c_str(), G_URI_FLAGS_NONE, nullptr);
  const std::string scheme = uri && g_uri_get_scheme(uri) ? g_uri_get_scheme(uri) : "";
  const std::string path = uri ? g_uri_get_path(uri) : "";
  const bool good = uri && (scheme == "http" || scheme == "https") && g_uri_get_host(uri) &&
                    *g_uri_get_host(uri) && !g_uri_get_userinfo(uri) && !g_uri_get_query(uri) &&
                    !g_uri_get_fragment(uri) && (path.empty() || path == "/");
  if (uri) g_uri_unref(uri);
  if (good) return "";
  return "must be http://HOST:PORT or https://HOST:PORT, not \"" + url + "\"";
}

std::string check_listen_address(const std::string &address) {
  if (address.empty()) return "";
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char *end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return "must be HOST:PORT (port 0 to 65535; 0 picks a free one), not \"" + address + "\"";
  if (host != "localhost") {
    GInetAddress *ip = g_inet_address_new_from_string(host.c_str());
    if (!ip) return "the host must be an IP address or localhost, not \"" + host + "\"";
    g_object_unref(ip);
  }
  return "";
}

std::string beyond_loopback(const std::string &address) {
  const size_t colon = address.rfind(':');
  if (address.empty() || colon == std::string::npos) return "";
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") return "";
  GInetAddress *ip = g_inet_address_new_from_string(host.c_str());
  if (!ip) return "";  // no address: check_listen_address says so
  const std::string who = g_inet_address_get_is_loopback(ip) ? ""
                          : g_inet_address_get_is_any(ip)    ? "every network of this host"
                                                             : "the network of " + host;
  g_object_unref(ip);
  return who;
}

}  // namespace cudanms::service
