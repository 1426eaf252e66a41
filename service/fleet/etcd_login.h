// How etcd.cpp's requests carry use_etcd_login()'s login: a token asked for once
// (/v3/auth/authenticate) and given in each request's Authorization header, asked for again when
// etcd says it is no longer good (a token's time to live, etcd restarted, the password changed).
// One token for the process, shared by its threads.
#pragma once

#include <libsoup/soup.h>

#include <string>

#include "etcd.h"

namespace cudanms::service::etcd_login {

constexpr char kPath[] = "/v3/auth/authenticate";

// Whether a request to `path` must carry a token first: a login is set and none is held.
bool needed(const std::string &path);
// The body of the request for a token.
std::string request();
// The token of an answer to request(); false when it holds none.
bool take(const EtcdReply &reply);
// The token held into `message`'s headers, and into *used (may be null).
void authorize(SoupMessage *message, std::string *used);
// Whether etcd's error says the token is not good (any more): then forget() and log in again.
bool stale(const EtcdReply &reply);
// The token `used` is dropped, unless another has replaced it already.
void forget(const std::string &used);
// etcd's refusal of the login, as an error naming the user.
EtcdReply refused(const EtcdReply &reply);

}  // namespace cudanms::service::etcd_login
