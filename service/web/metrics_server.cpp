// The host's HTTP endpoint (metrics.h's MetricsServer): listening (plain, HTTPS, a worker's Unix
// socket), answering each request through its owner, and the page's event streams.
#include <fcntl.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "web.h"

namespace cudanms::service {

MetricsServer::~MetricsServer() {
  *alive_ = false;
  close();
}

void MetricsServer::close() {
  if (stream_timer_) g_source_remove(stream_timer_);
  stream_timer_ = 0;
  for (SoupServerMessage *stream : streams_) {
    g_signal_handlers_disconnect_by_data(stream, this);
    g_object_unref(stream);
  }
  streams_.clear();
  if (server_) {
    soup_server_disconnect(server_);
    g_object_unref(server_);
    server_ = nullptr;
  }
  if (!socket_path_.empty()) g_unlink(socket_path_.c_str());
  socket_path_.clear();
  url_.clear();
}

void MetricsServer::listen_again(const std::string &address, const WebTls &tls) {
  std::string error;
  if (listen(address, &error, tls)) {
    log_line("metrics now at %s/metrics", url_.c_str());
  } else {
    log_line("%s; no metrics until the next reload", error.c_str());
  }
}

bool MetricsServer::listen(const std::string &address, std::string *error, const WebTls &tls) {
  close();
  if (address.empty()) return true;
  GTlsCertificate *certificate = nullptr;
  if (tls.on() && !g_str_has_prefix(address.c_str(), "unix:")) {  // a worker's socket: plain
    // glib-networking's TLS backend; the key's file is read, never logged.
    GError *why = nullptr;
    certificate = g_tls_certificate_new_from_files(tls.certificate.c_str(), tls.key.c_str(), &why);
    if (!certificate) {
      *error = "cannot serve HTTPS with " + tls.certificate + " and its key: " + why->message;
      g_error_free(why);
      return false;
    }
  }
  GSocketAddress *where = nullptr;
  if (g_str_has_prefix(address.c_str(), "unix:")) {
    socket_path_ = address.substr(5);
    g_unlink(socket_path_.c_str());  // a dead process's
    where = g_unix_socket_address_new(socket_path_.c_str());
  } else {
    const size_t colon = address.rfind(':');
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    if (host == "localhost") host = "127.0.0.1";
    const guint16 port = static_cast<guint16>(std::stoi(address.substr(colon + 1)));
    GInetAddress *ip = g_inet_address_new_from_string(host.c_str());
    where = g_inet_socket_address_new(ip, port);
    g_object_unref(ip);
  }
  const bool https = certificate != nullptr;
  server_ =
      soup_server_new("server-header", "cudanms-service", "tls-certificate", certificate, nullptr);
  if (certificate) g_object_unref(certificate);
  soup_server_add_handler(server_, nullptr, handle, this, nullptr);
  GError *gerror = nullptr;
  const gboolean ok = soup_server_listen(
      server_, where, https ? SOUP_SERVER_LISTEN_HTTPS : static_cast<SoupServerListenOptions>(0),
      &gerror);
  g_object_unref(where);
  if (!ok) {
    *error = "cannot listen on " + address + ": " + gerror->message;
    g_clear_error(&gerror);
    g_object_unref(server_);
    server_ = nullptr;
    socket_path_.clear();
    return false;
  }
  if (!socket_path_.empty()) {
    url_ = address;
    return true;
  }
  GSList *uris = soup_server_get_uris(server_);
  if (uris) {
    gchar *text = g_uri_to_string(static_cast<GUri *>(uris->data));
    url_ = text;
    g_free(text);
    if (!url_.empty() && url_.back() == '/') url_.pop_back();
  }
  g_slist_free_full(uris, reinterpret_cast<GDestroyNotify>(g_uri_unref));
  return true;
}

namespace {

// `reply.file` as the answer: the part one Range asks for (206 with its Content-Range; 416 past
// the file's end), else the whole file (several ranges: libsoup answers them from it).
void set_file_response(SoupServerMessage *message, const Reply &reply) {
  const int fd = g_open(reply.file.c_str(), O_RDONLY, 0);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    const std::string why = "{\"error\": \"the file is gone\"}";
    soup_server_message_set_status(message, SOUP_STATUS_NOT_FOUND, nullptr);
    soup_server_message_set_response(message, "application/json", SOUP_MEMORY_COPY, why.data(),
                                     why.size());
    return;
  }
  const goffset total = st.st_size;
  goffset start = 0, end = total - 1;
  guint status = SOUP_STATUS_OK;
  SoupMessageHeaders *asked = soup_server_message_get_request_headers(message);
  SoupRange *ranges = nullptr;
  int n = 0;
  if (total > 0 && soup_message_headers_get_ranges(asked, total, &ranges, &n)) {
    if (n == 1) {
      start = ranges[0].start, end = std::min(ranges[0].end, total - 1);
      status =
          start < total ? SOUP_STATUS_PARTIAL_CONTENT : SOUP_STATUS_REQUESTED_RANGE_NOT_SATISFIABLE;
    }
    soup_message_headers_free_ranges(asked, ranges);
  }
  SoupMessageHeaders *answer = soup_server_message_get_response_headers(message);
  soup_message_headers_replace(answer, "Accept-Ranges", "bytes");
  std::string body;
  if (status == SOUP_STATUS_REQUESTED_RANGE_NOT_SATISFIABLE) {
    soup_message_headers_replace(answer, "Content-Range",
                                 ("bytes */" + std::to_string(total)).c_str());
  } else if (total > 0) {
    body.resize(static_cast<size_t>(end - start + 1));
    const ssize_t got = pread(fd, body.data(), body.size(), start);
    body.resize(got > 0 ? static_cast<size_t>(got) : 0);
    if (status == SOUP_STATUS_PARTIAL_CONTENT)
      soup_message_headers_set_content_range(answer, start, start + body.size() - 1, total);
  }
  close(fd);
  soup_server_message_set_status(message, status, nullptr);
  soup_server_message_set_response(message, reply.type.c_str(), SOUP_MEMORY_COPY, body.data(),
                                   body.size());
}

// `message` paused until `respond` is called, once: at once or later from the main loop. The
// server and the message are held until then, so that an answer that comes after a reload's new
// listen (or the client's leaving) lands on live objects.
MetricsServer::Respond paused(SoupServer *server, SoupServerMessage *message) {
  soup_server_message_pause(message);
  g_object_ref(server);
  g_object_ref(message);
  return [server, message](Reply reply) {
    if (!reply.file.empty()) {
      set_file_response(message, reply);
    } else {
      soup_server_message_set_status(message, static_cast<guint>(reply.status), nullptr);
      soup_server_message_set_response(message, reply.type.c_str(), SOUP_MEMORY_COPY,
                                       reply.body.data(), reply.body.size());
    }
    soup_server_message_unpause(message);
    g_object_unref(message);
    g_object_unref(server);
  };
}

}  // namespace

bool bearer_matches(const std::string &authorization, const std::string &secret) {
  const std::string expected = "Bearer " + secret;
  unsigned char differ = authorization.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i)
    differ |=
        static_cast<unsigned char>(i < authorization.size() ? authorization[i] ^ expected[i] : 1);
  return differ == 0;
}

void MetricsServer::handle(SoupServer *server, SoupServerMessage *message, const char *path,
                           GHashTable *, gpointer data) {
  auto *self = static_cast<MetricsServer *>(data);
  if (g_str_has_prefix(path, "/api/host/") && !self->host_credential_.empty()) {
    const char *given = soup_message_headers_get_one(
        soup_server_message_get_request_headers(message), "Authorization");
    if (!bearer_matches(given ? given : "", self->host_credential_)) {
      static const char kRefused[] = "the fleet's hosts' own: give the site's host credential\n";
      soup_server_message_set_status(message, SOUP_STATUS_UNAUTHORIZED, nullptr);
      soup_message_headers_replace(soup_server_message_get_response_headers(message),
                                   "WWW-Authenticate", "Bearer realm=\"cudanms hosts\"");
      soup_server_message_set_response(message, "text/plain; charset=utf-8", SOUP_MEMORY_STATIC,
                                       kRefused, sizeof kRefused - 1);
      return;
    }
  }
  if (g_strcmp0(soup_server_message_get_method(message), "POST") == 0) {
    SoupMessageBody *request = soup_server_message_get_request_body(message);
    const char *authorization = soup_message_headers_get_one(
        soup_server_message_get_request_headers(message), "Authorization");
    self->owner_->change(path, std::string(request->data ? request->data : "", request->length),
                         authorization ? authorization : "", paused(server, message));
    return;
  }
  if (g_strcmp0(soup_server_message_get_method(message), "GET") != 0) {
    soup_server_message_set_status(message, SOUP_STATUS_METHOD_NOT_ALLOWED, nullptr);
    return;
  }
  if (g_strcmp0(path, "/api/stream") == 0) {
    self->open_stream(message);
    return;
  }
  if (Reply page = page_file(path); page.status != 404 || g_strcmp0(path, "/") == 0) {
    soup_server_message_set_status(message, static_cast<guint>(page.status), nullptr);
    soup_server_message_set_response(message, page.type.c_str(), SOUP_MEMORY_COPY, page.body.data(),
                                     page.body.size());
    return;
  }
  std::string asked = path;
  if (const char *query = g_uri_get_query(soup_server_message_get_uri(message));
      query && g_str_has_prefix(path, "/api/events"))
    asked += std::string("?") + query;  // its filters
  self->owner_->serve(asked, paused(server, message));
}

void MetricsServer::open_stream(SoupServerMessage *message) {
  constexpr size_t kMostStreams = 64;  // pages open at once
  if (streams_.size() >= kMostStreams) {
    soup_server_message_set_status(message, SOUP_STATUS_SERVICE_UNAVAILABLE, nullptr);
    const std::string why = "too many pages open\n";
    soup_server_message_set_response(message, "text/plain; charset=utf-8", SOUP_MEMORY_COPY,
                                     why.data(), why.size());
    return;
  }
  SoupMessageHeaders *headers = soup_server_message_get_response_headers(message);
  soup_message_headers_set_encoding(headers, SOUP_ENCODING_CHUNKED);
  soup_message_headers_set_content_type(headers, "text/event-stream", nullptr);
  soup_message_headers_replace(headers, "Cache-Control", "no-cache");
  soup_server_message_set_status(message, SOUP_STATUS_OK, nullptr);
  // What was sent is not kept: a page may listen for days.
  soup_message_body_set_accumulate(soup_server_message_get_response_body(message), FALSE);
  g_signal_connect(message, "finished", G_CALLBACK(on_stream_finished), this);
  g_object_ref(message);
  streams_.push_back(message);
  // The page's first picture of the cameras at once, then one a second.
  const std::string hello = "retry: 1000\n\n";
  soup_message_body_append(soup_server_message_get_response_body(message), SOUP_MEMORY_COPY,
                           hello.data(), hello.size());
  auto tick = [](gpointer data) -> gboolean {
    auto *self = static_cast<MetricsServer *>(data);
    if (self->stream_asked_) return G_SOURCE_CONTINUE;  // the last one is not answered yet
    self->stream_asked_ = true;
    std::weak_ptr<bool> alive = self->alive_;
    self->owner_->serve("/api/cameras", [self, alive](Reply reply) {
      if (alive.expired()) return;
      self->stream_asked_ = false;
      if (reply.status != 200) return;
      std::string data = reply.body;
      for (char &c : data)
        if (c == '\n') c = ' ';  // one line: newlines in JSON are whitespace between tokens
      self->send_to_streams("event: cameras\ndata: " + data + "\n\n");
    });
    return G_SOURCE_CONTINUE;
  };
  if (!stream_timer_) stream_timer_ = g_timeout_add_seconds(1, tick, this);
  tick(this);
}

void MetricsServer::send_to_streams(const std::string &event) {
  for (SoupServerMessage *stream : streams_) {
    soup_message_body_append(soup_server_message_get_response_body(stream), SOUP_MEMORY_COPY,
                             event.data(), event.size());
    soup_server_message_unpause(stream);
  }
}

void MetricsServer::on_stream_finished(SoupServerMessage *message, gpointer data) {
  auto *self = static_cast<MetricsServer *>(data);
  auto found = std::find(self->streams_.begin(), self->streams_.end(), message);
  if (found == self->streams_.end()) return;
  self->streams_.erase(found);
  g_signal_handlers_disconnect_by_data(message, self);
  g_object_unref(message);
  if (self->streams_.empty() && self->stream_timer_) {
    g_source_remove(self->stream_timer_);
    self->stream_timer_ = 0;
  }
}

}  // namespace cudanms::service
