// The etcd JSON gateway's answers read (etcd.cpp and etcd_watch.cpp): its int64 fields written
// as strings, its keys and values base64, a member that may be absent.
#pragma once

#include <json-glib/json-glib.h>

#include <string>

#include "etcd.h"

namespace cudanms::service::etcd_wire {

// An int64 field; absent (proto3's default) is 0.
gint64 int_member(JsonObject *object, const char *name);
// A member that is an object (an array), or null.
JsonObject *object_member(JsonObject *object, const char *name);
JsonArray *array_member(JsonObject *object, const char *name);
// A key-value as the gateway writes it.
EtcdKeyValue key_value(JsonObject *kv);
// The body's JSON object, or null (and `why`) when it is none.
JsonNode *parse(const char *data, gsize size, std::string *why);

}  // namespace cudanms::service::etcd_wire
