// The checks of a key's value (config_keys.cpp's table takes each value through one): numbers,
// sizes, files, folders, names, topics, addresses. Each answers "" when the value is good, else
// why not ("must be ..."), and the parse_ and take_ ones put it in *out.
#pragma once

#include <glib.h>

#include <string>

namespace cudanms::service {

// true or false.
std::string parse_bool(const std::string &value, bool *out);

// A number of seconds of at least `least`.
std::string parse_seconds(const std::string &value, double least, double *out);

// A number of bytes, e.g. 500M or 20G (K, M, G: 1024s).
std::string parse_bytes(const std::string &value, guint64 *out);

// A gst-launch description (a source, a detector, an encoder), which the elements check
// (element_check.h): "" when it is not blank.
std::string take_description(const std::string &value, std::string *out);

// A file the service reads (a certificate, a key): "" for none, else one it can read.
std::string check_readable(const std::string &path);

// check_readable()'s file, its path into *out when it is one.
std::string take_readable(const std::string &path, std::string *out);

// A directory the service writes in: one that exists and is writable, or one it can make (the
// camera makes it when it starts) in the nearest folder that exists.
std::string check_directory(const std::string &path);

// A site's or a host's name in the fleet's keys.
std::string check_name(const std::string &name);

// A topic, or a topic prefix, the service publishes to: no wildcards.
std::string check_topic(const std::string &topic);

// http(s)://HOST[:PORT] and nothing more (no user, path, query): an endpoint's URL.
std::string check_endpoint_url(const std::string &url);

// "HOST:PORT" with an IP address or localhost, as the metrics server listens.
std::string check_listen_address(const std::string &address);

// Who reaches a listen address (metrics-address's HOST:PORT): "" for loopback alone (or none),
// else "every network of this host" (0.0.0.0, ::) or "the network of HOST".
std::string beyond_loopback(const std::string &address);

}  // namespace cudanms::service
