// EtcdWatch (etcd.h): a watch through the gateway's /v3/watch, its events as JSON lines.
#include "etcd.h"
#include "etcd_login.h"
#include "etcd_wire.h"

namespace cudanms::service {

using etcd_wire::array_member;
using etcd_wire::int_member;
using etcd_wire::key_value;
using etcd_wire::object_member;
using etcd_wire::parse;

EtcdWatch::EtcdWatch(EtcdClient *client, std::string key, std::string range_end,
                     gint64 start_revision, Events events, Broken broken)
    : events_(std::move(events)),
      broken_(std::move(broken)),
      endpoint_(client->current()),
      cancel_(g_cancellable_new()) {
  // Lines stream for as long as the watch lives: no timeout on this message's session.
  message_ = soup_message_new("POST", (endpoint_ + "/v3/watch").c_str());
  etcd_login::authorize(message_, nullptr);
  gchar *k = g_base64_encode(reinterpret_cast<const guchar *>(key.data()), key.size());
  gchar *e = g_base64_encode(reinterpret_cast<const guchar *>(range_end.data()), range_end.size());
  const std::string body = std::string("{\"create_request\":{\"key\":\"") + k +
                           "\",\"range_end\":\"" + e + "\",\"start_revision\":\"" +
                           std::to_string(start_revision) + "\"}}";
  g_free(k);
  g_free(e);
  GBytes *bytes = g_bytes_new(body.data(), body.size());
  soup_message_set_request_body_from_bytes(message_, "application/json", bytes);
  g_bytes_unref(bytes);
  // A connection a watch, never queued behind the others: a host holds one watch, but
  // `cudanms-service fleet simulate` a hundred hosts' in one process.
  static SoupSession *streams = etcd_session(soup_session_new_with_options(
      "timeout", 0, "max-conns", 4096, "max-conns-per-host", 4096, nullptr));
  soup_session_send_async(streams, message_, G_PRIORITY_DEFAULT, cancel_, on_opened, this);
}

EtcdWatch::~EtcdWatch() {
  ended_ = true;
  g_cancellable_cancel(cancel_);  // the pending read answers "cancelled" and touches nothing
  g_object_unref(cancel_);
  g_clear_object(&lines_);
  g_clear_object(&message_);
}

void EtcdWatch::fail(const std::string &why) {
  if (ended_) return;
  ended_ = true;
  broken_(endpoint_ + ": " + why);  // may destroy this watch
}

void EtcdWatch::on_opened(GObject *source, GAsyncResult *result, gpointer data) {
  GError *error = nullptr;
  GInputStream *stream = soup_session_send_finish(SOUP_SESSION(source), result, &error);
  if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    g_error_free(error);
    if (stream) g_object_unref(stream);
    return;
  }
  auto *self = static_cast<EtcdWatch *>(data);
  if (!stream) {
    const std::string why = error->message;
    g_clear_error(&error);
    self->fail(why);
    return;
  }
  const guint status = soup_message_get_status(self->message_);
  if (status != SOUP_STATUS_OK) {
    g_object_unref(stream);
    self->fail("HTTP " + std::to_string(status));
    return;
  }
  self->lines_ = g_data_input_stream_new(stream);
  g_object_unref(stream);
  self->read_next();
}

void EtcdWatch::read_next() {
  g_data_input_stream_read_line_async(lines_, G_PRIORITY_DEFAULT, cancel_, on_line, this);
}

void EtcdWatch::on_line(GObject *source, GAsyncResult *result, gpointer data) {
  GError *error = nullptr;
  gsize length = 0;
  gchar *line =
      g_data_input_stream_read_line_finish(G_DATA_INPUT_STREAM(source), result, &length, &error);
  if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    g_error_free(error);
    g_free(line);
    return;
  }
  auto *self = static_cast<EtcdWatch *>(data);
  if (!line) {
    const std::string why = error ? error->message : "the stream ended";
    g_clear_error(&error);
    self->fail(why);
    return;
  }
  std::string why;
  JsonNode *root = parse(line, length, &why);
  g_free(line);
  if (!root) {
    self->fail(why);
    return;
  }
  JsonObject *result_object = object_member(json_node_get_object(root), "result");
  if (!result_object) {
    JsonObject *o = json_node_get_object(root);
    why = json_object_get_string_member_with_default(o, "message", "an error");
    json_node_unref(root);
    self->fail(why);
    return;
  }
  if (json_object_get_boolean_member_with_default(result_object, "canceled", FALSE)) {
    why = "cancelled by etcd";
    if (const gint64 compacted = int_member(result_object, "compact_revision"))
      why += " (compacted up to revision " + std::to_string(compacted) + ")";
    json_node_unref(root);
    self->fail(why);
    return;
  }
  std::vector<EtcdEvent> events;
  JsonArray *list = array_member(result_object, "events");
  for (guint i = 0; list && i < json_array_get_length(list); ++i) {
    JsonObject *e = json_array_get_object_element(list, i);
    EtcdEvent event;
    event.deleted =
        g_strcmp0(json_object_get_string_member_with_default(e, "type", "PUT"), "DELETE") == 0;
    if (JsonObject *kv = object_member(e, "kv")) event.kv = key_value(kv);
    events.push_back(std::move(event));
  }
  const gint64 revision = int_member(object_member(result_object, "header"), "revision");
  json_node_unref(root);
  self->read_next();  // before the handler, which may destroy the watch (and so cancel this read)
  if (!events.empty()) self->events_(events, revision);
}

}  // namespace cudanms::service
