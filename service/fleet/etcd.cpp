#include "etcd.h"

#include <algorithm>
#include <set>

#include "etcd_login.h"
#include "etcd_wire.h"

namespace cudanms::service {
namespace {

// How a request's error begins when no endpoint gave an answer.
constexpr char kNoneAnswered[] = "no etcd endpoint answered: ";

// gRPC's "unavailable": the member has no leader, or is stopping; another member may answer.
constexpr gint64 kUnavailable = 14;

std::string base64(const std::string &bytes) {
  gchar *text = g_base64_encode(reinterpret_cast<const guchar *>(bytes.data()), bytes.size());
  std::string out = text;
  g_free(text);
  return out;
}

std::string unbase64(const char *text) {
  if (!text || !*text) return "";
  gsize length = 0;
  guchar *bytes = g_base64_decode(text, &length);
  std::string out(reinterpret_cast<const char *>(bytes), length);
  g_free(bytes);
  return out;
}

}  // namespace

namespace etcd_wire {

// An int64 field: the gateway writes them as strings; absent (proto3's default) is 0.
gint64 int_member(JsonObject *object, const char *name) {
  if (!object || !json_object_has_member(object, name)) return 0;
  JsonNode *node = json_object_get_member(object, name);
  if (!JSON_NODE_HOLDS_VALUE(node)) return 0;
  if (json_node_get_value_type(node) == G_TYPE_STRING)
    return g_ascii_strtoll(json_node_get_string(node), nullptr, 10);
  return json_node_get_int(node);
}

JsonObject *object_member(JsonObject *object, const char *name) {
  if (!object || !json_object_has_member(object, name)) return nullptr;
  JsonNode *node = json_object_get_member(object, name);
  return JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : nullptr;
}

JsonArray *array_member(JsonObject *object, const char *name) {
  if (!object || !json_object_has_member(object, name)) return nullptr;
  JsonNode *node = json_object_get_member(object, name);
  return JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : nullptr;
}

EtcdKeyValue key_value(JsonObject *kv) {
  EtcdKeyValue out;
  out.key = unbase64(json_object_get_string_member_with_default(kv, "key", ""));
  out.value = unbase64(json_object_get_string_member_with_default(kv, "value", ""));
  out.create_revision = int_member(kv, "create_revision");
  out.mod_revision = int_member(kv, "mod_revision");
  out.version = int_member(kv, "version");
  out.lease = int_member(kv, "lease");
  return out;
}

// The body's JSON, or null (and `why`) when it is none.
JsonNode *parse(const char *data, gsize size, std::string *why) {
  JsonParser *parser = json_parser_new();
  GError *error = nullptr;
  JsonNode *root = nullptr;
  if (json_parser_load_from_data(parser, data, static_cast<gssize>(size), &error) &&
      JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
    root = json_node_copy(json_parser_get_root(parser));
  } else {
    *why = std::string("not a JSON object: ") +
           (error ? error->message : std::string(data, std::min<gsize>(size, 200)));
  }
  g_clear_error(&error);
  g_object_unref(parser);
  return root;
}

}  // namespace etcd_wire

namespace {

using etcd_wire::array_member;
using etcd_wire::int_member;
using etcd_wire::key_value;
using etcd_wire::object_member;
using etcd_wire::parse;

std::vector<EtcdKeyValue> kvs_of(JsonObject *range) {
  std::vector<EtcdKeyValue> out;
  JsonArray *kvs = array_member(range, "kvs");
  for (guint i = 0; kvs && i < json_array_get_length(kvs); ++i)
    if (JsonObject *kv = json_array_get_object_element(kvs, i)) out.push_back(key_value(kv));
  return out;
}

// What a gateway's answer says: a reply, or (`retry`) a reason to ask the next member.
EtcdReply read_answer(const std::string &endpoint, guint status, GBytes *body, bool *retry) {
  *retry = false;
  gsize size = 0;
  const char *data = body ? static_cast<const char *>(g_bytes_get_data(body, &size)) : "";
  std::string why;
  JsonNode *root = parse(data, size, &why);
  if (status == SOUP_STATUS_OK && root) return EtcdReply(root, "");
  std::string message = why;
  gint64 code = 0;
  if (root) {
    JsonObject *o = json_node_get_object(root);
    message = json_object_get_string_member_with_default(
        o, "message", json_object_get_string_member_with_default(o, "error", ""));
    code = int_member(o, "code");
    json_node_unref(root);
  }
  *retry = code == kUnavailable || status >= 500 || status < 100;
  return EtcdReply(nullptr, endpoint + ": HTTP " + std::to_string(status) + ": " + message);
}

}  // namespace

EtcdReply::EtcdReply(JsonNode *root, std::string error) : root_(root), error_(std::move(error)) {}
EtcdReply::~EtcdReply() {
  if (root_) json_node_unref(root_);
}
EtcdReply::EtcdReply(const EtcdReply &other)
    : root_(other.root_ ? json_node_ref(other.root_) : nullptr), error_(other.error_) {}
EtcdReply &EtcdReply::operator=(EtcdReply other) {
  std::swap(root_, other.root_);
  std::swap(error_, other.error_);
  return *this;
}

JsonObject *EtcdReply::object() const {
  return root_ && JSON_NODE_HOLDS_OBJECT(root_) ? json_node_get_object(root_) : nullptr;
}

gint64 EtcdReply::revision() const {
  return int_member(object_member(object(), "header"), "revision");
}

bool EtcdReply::succeeded() const {
  JsonObject *o = object();
  return o && json_object_get_boolean_member_with_default(o, "succeeded", FALSE);
}

std::vector<EtcdKeyValue> EtcdReply::kvs(int index) const {
  JsonObject *o = object();
  if (index < 0) return kvs_of(o);
  JsonArray *responses = array_member(o, "responses");
  if (!responses || static_cast<guint>(index) >= json_array_get_length(responses)) return {};
  return kvs_of(object_member(json_array_get_object_element(responses, index), "response_range"));
}

gint64 EtcdReply::lease_id() const {
  JsonObject *result = object_member(object(), "result");
  return int_member(result ? result : object(), "ID");
}

gint64 EtcdReply::ttl() const {
  JsonObject *result = object_member(object(), "result");
  return int_member(result ? result : object(), "TTL");
}

namespace etcd {

std::string prefix_end(const std::string &prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string range(const std::string &key, bool prefix) {
  std::string out = "{\"request_range\":{\"key\":\"" + base64(key) + "\"";
  if (prefix) out += ",\"range_end\":\"" + base64(prefix_end(key)) + "\"";
  return out + "}}";
}

std::string put(const std::string &key, const std::string &value, gint64 lease) {
  std::string out =
      "{\"request_put\":{\"key\":\"" + base64(key) + "\",\"value\":\"" + base64(value) + "\"";
  if (lease) out += ",\"lease\":\"" + std::to_string(lease) + "\"";
  return out + "}}";
}

std::string remove(const std::string &key, bool prefix) {
  std::string out = "{\"request_delete_range\":{\"key\":\"" + base64(key) + "\"";
  if (prefix) out += ",\"range_end\":\"" + base64(prefix_end(key)) + "\"";
  return out + "}}";
}

std::string absent(const std::string &key) {
  return "{\"key\":\"" + base64(key) +
         "\",\"target\":\"CREATE\",\"create_revision\":\"0\",\"result\":\"EQUAL\"}";
}

std::string leased(const std::string &key, gint64 lease) {
  return "{\"key\":\"" + base64(key) + "\",\"target\":\"LEASE\",\"lease\":\"" +
         std::to_string(lease) + "\",\"result\":\"EQUAL\"}";
}

std::string value_is(const std::string &key, const std::string &value) {
  return "{\"key\":\"" + base64(key) + "\",\"target\":\"VALUE\",\"value\":\"" + base64(value) +
         "\",\"result\":\"EQUAL\"}";
}

std::string txn(const std::vector<std::string> &compare, const std::vector<std::string> &success,
                const std::vector<std::string> &failure) {
  auto list = [](const std::vector<std::string> &items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "]";
  };
  return "{\"compare\":" + list(compare) + ",\"success\":" + list(success) +
         ",\"failure\":" + list(failure) + "}";
}

}  // namespace etcd

struct EtcdClient::Call {
  EtcdClient *client;
  std::weak_ptr<int> alive;
  std::string path, body;
  Done done;
  size_t first = 0, tried = 0;
  size_t limit = 0;    // how many endpoints it may ask, one after another
  std::string errors;  // each endpoint's, for the reply when none answers
  GCancellable *cancel = nullptr;
  guint timer = 0;
  SoupMessage *message = nullptr;
  std::string endpoint;
  std::string token;             // the login's, given with this attempt
  bool logged_in_again = false;  // once a call, when etcd said its token was no longer good
  bool racing = false;           // one of post_to_all's: its answer moves no current endpoint
  std::weak_ptr<Call> me;        // for its deadline's timer
  unsigned attempt = 0;          // the attempt on its way; an answer of an ended one is dropped
};

// One attempt's message on its way, for its answer.
struct EtcdClient::Sent {
  std::shared_ptr<Call> call;
  unsigned attempt;
  SoupMessage *message;  // a reference of its own
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, guint timeout_ms)
    : endpoints_(std::move(endpoints)),
      timeout_ms_(timeout_ms),
      // A watch holds a connection for its life: room beside it for the calls. The session's own
      // timeout bounds the blocking calls (post_sync); the asynchronous ones have a timer each.
      session_(etcd_session(
          soup_session_new_with_options("max-conns-per-host", 16, "max-conns", 64, "timeout",
                                        std::max(1u, (timeout_ms + 999) / 1000), nullptr))),
      alive_(std::make_shared<int>(0)) {}

EtcdClient::~EtcdClient() {
  alive_.reset();
  soup_session_abort(session_);
  g_object_unref(session_);
}

std::string EtcdClient::current() const {
  return endpoints_.empty() ? "" : endpoints_[current_.load() % endpoints_.size()];
}

void EtcdClient::post(const std::string &path, const std::string &body, Done done) {
  ask(path, body, current_.load(), endpoints_.size(), std::move(done));
}

void EtcdClient::ask(const std::string &path, const std::string &body, size_t first, size_t limit,
                     Done done, bool racing) {
  auto call = std::make_shared<Call>();
  call->client = this;
  call->alive = alive_;
  call->path = path;
  call->body = body;
  call->done = std::move(done);
  call->first = first;
  call->racing = racing;
  call->limit = limit;
  call->me = call;
  attempt(std::move(call));
}

void EtcdClient::post_to_all(const std::string &path, const std::string &body, Done done,
                             guint hedge_ms) {
  auto race = std::make_shared<Race>();
  race->done = std::move(done);
  const size_t runners = endpoints_.size();
  if (runners == 0) {
    race->done(EtcdReply(nullptr, kNoneAnswered));
    return;
  }
  race->current = current_.load() % runners;
  race->alive = alive_;
  // Weak: the race holds ask_others, which holds this; the asks' answers hold the race.
  const std::weak_ptr<Race> weak = race;
  auto ask_one = [this, weak, path, body, runners](size_t i) {
    std::shared_ptr<Race> race = weak.lock();
    if (!race) return;
    ask(
        path, body, i, 1,
        [this, race, runners, i](EtcdReply reply) {
          race->take(i, std::move(reply), runners, &current_);
        },
        true);
  };
  race->ask_others = [weak, ask_one, runners] {
    std::shared_ptr<Race> race = weak.lock();
    if (!race || race->others_asked) return;
    race->others_asked = true;
    race->stop_hedge();
    for (size_t i = 0; i < runners; ++i)
      if (i != race->current) ask_one(i);
  };
  if (hedge_ms == 0) {
    race->ask_others();
    ask_one(race->current);
    return;
  }
  // The current endpoint alone first; the others once it fails or stays silent hedge_ms. The
  // timer holds the race until it fires or is removed.
  race->hedged = true;
  auto *held = new std::shared_ptr<Race>(race);
  race->hedge_timer = g_timeout_add_full(
      G_PRIORITY_DEFAULT, hedge_ms,
      [](gpointer data) -> gboolean {
        auto &r = *static_cast<std::shared_ptr<Race> *>(data);
        r->hedge_timer = 0;
        if (!r->answered && !r->alive.expired()) r->ask_others();
        return G_SOURCE_REMOVE;
      },
      held, [](gpointer data) { delete static_cast<std::shared_ptr<Race> *>(data); });
  ask_one(race->current);
}

void EtcdClient::Race::stop_hedge() {
  if (hedge_timer) g_source_remove(hedge_timer);
  hedge_timer = 0;
}

void EtcdClient::Race::take(size_t i, EtcdReply reply, size_t runners,
                            std::atomic<size_t> *asked_first) {
  if (reply.ok() && first_good < 0) first_good = static_cast<long>(i);
  if (!reply.ok() && i == current) current_failed = true;
  if (current_failed && first_good >= 0) *asked_first = static_cast<size_t>(first_good);
  if (answered) return;
  if (reply.ok()) {
    answered = true;
    // Hedged: a member slower than the hedge is asked first no more (all of a site's hosts
    // would otherwise keep asking one busy member, each renewal forwarded).
    if (hedged && others_asked) *asked_first = i;
    stop_hedge();
    done(std::move(reply));
    return;
  }
  std::string why = reply.error();
  if (why.rfind(kNoneAnswered, 0) == 0) why.erase(0, sizeof kNoneAnswered - 1);
  errors += (errors.empty() ? "" : "; ") + why;
  if (i == current) ask_others();
  if (++failed < runners) return;
  answered = true;
  done(EtcdReply(nullptr, kNoneAnswered + errors));
}

void EtcdClient::attempt(std::shared_ptr<Call> call) {
  if (call->tried >= call->limit) {
    call->done(EtcdReply(nullptr, kNoneAnswered + call->errors));
    return;
  }
  if (etcd_login::needed(call->path)) {
    log_in(std::move(call));
    return;
  }
  const size_t index = (call->first + call->tried) % endpoints_.size();
  call->endpoint = endpoints_[index];
  call->message = soup_message_new("POST", (call->endpoint + call->path).c_str());
  etcd_login::authorize(call->message, &call->token);
  GBytes *bytes = g_bytes_new(call->body.data(), call->body.size());
  soup_message_set_request_body_from_bytes(call->message, "application/json", bytes);
  g_bytes_unref(bytes);
  call->cancel = g_cancellable_new();
  // The deadline ends the attempt whether or not its answer comes: libsoup 3.2 leaves a message
  // whose TLS handshake etcd refused (no client certificate) unfinished for good ("code should
  // not be reached" in soup-connection.c), cancelled or not; a renewal that never ended would
  // stop every renewal after it.
  call->timer = g_timeout_add(
      timeout_ms_,
      [](gpointer data) -> gboolean {
        auto *c = static_cast<Call *>(data);
        c->timer = 0;
        g_cancellable_cancel(c->cancel);
        if (std::shared_ptr<Call> call = c->me.lock(); call && !call->alive.expired())
          call->client->end_attempt(
              call,
              EtcdReply(nullptr, call->endpoint + ": no answer within " +
                                     std::to_string(call->client->timeout_ms_) + " ms"),
              true);
        return G_SOURCE_REMOVE;
      },
      call.get());
  auto *sent = new Sent{call, call->attempt, SOUP_MESSAGE(g_object_ref(call->message))};
  soup_session_send_and_read_async(session_, call->message, G_PRIORITY_DEFAULT, call->cancel,
                                   on_answer, sent);
}

void EtcdClient::log_in(std::shared_ptr<Call> call) {
  const size_t index = (call->first + call->tried) % endpoints_.size();
  ask(etcd_login::kPath, etcd_login::request(), index, 1, [this, call](EtcdReply reply) {
    if (reply.ok() && etcd_login::take(reply)) {
      attempt(call);
    } else if (reply.error().rfind(kNoneAnswered, 0) == 0) {  // this endpoint: the next one
      call->errors +=
          (call->errors.empty() ? "" : "; ") + reply.error().substr(sizeof kNoneAnswered - 1);
      call->tried++;
      attempt(call);
    } else {
      call->done(etcd_login::refused(reply));
    }
  });
}

void EtcdClient::on_answer(GObject *source, GAsyncResult *result, gpointer data) {
  std::unique_ptr<Sent> sent(static_cast<Sent *>(data));
  GError *error = nullptr;
  GBytes *body = soup_session_send_and_read_finish(SOUP_SESSION(source), result, &error);
  const guint status = soup_message_get_status(sent->message);
  g_object_unref(sent->message);
  std::shared_ptr<Call> call = std::move(sent->call);
  const bool ended = sent->attempt != call->attempt;  // by its deadline, meanwhile
  if (ended || call->alive.expired()) {               // or the client is gone: nobody to tell
    if (!ended && call->timer) g_source_remove(call->timer);
    if (!ended) call->timer = 0;
    g_clear_error(&error);
    if (body) g_bytes_unref(body);
    return;
  }
  bool retry = true;
  EtcdReply reply;
  if (error) {
    reply = EtcdReply(nullptr, call->endpoint + ": " + error->message);
    g_clear_error(&error);
  } else {
    reply = read_answer(call->endpoint, status, body, &retry);
  }
  if (body) g_bytes_unref(body);
  call->client->end_attempt(std::move(call), std::move(reply), retry);
}

void EtcdClient::end_attempt(std::shared_ptr<Call> call, EtcdReply reply, bool retry) {
  call->attempt++;
  if (call->timer) g_source_remove(call->timer);
  call->timer = 0;
  g_clear_object(&call->message);
  g_clear_object(&call->cancel);
  if (!call->logged_in_again && etcd_login::stale(reply)) {  // a token again, then the same ask
    call->logged_in_again = true;
    etcd_login::forget(call->token);
    attempt(std::move(call));
    return;
  }
  if (reply.ok() || !retry) {
    if (!call->racing) current_ = (call->first + call->tried) % endpoints_.size();
    call->done(std::move(reply));
    return;
  }
  call->errors += (call->errors.empty() ? "" : "; ") + reply.error();
  call->tried++;
  attempt(std::move(call));
}

EtcdReply EtcdClient::post_sync(const std::string &path, const std::string &body) {
  std::string errors;
  const size_t first = current_.load();
  for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
    const size_t index = (first + tried) % endpoints_.size();
    bool retry = true;
    EtcdReply reply = send_sync(index, path, body, &retry);
    if (reply.ok() || !retry) {
      current_ = index;
      return reply;
    }
    errors += (errors.empty() ? "" : "; ") + reply.error();
  }
  return EtcdReply(nullptr, kNoneAnswered + errors);
}

EtcdReply EtcdClient::send_sync(size_t index, const std::string &path, const std::string &body,
                                bool *retry) {
  for (int attempt = 0;; ++attempt) {
    if (etcd_login::needed(path)) {
      const EtcdReply login = exchange(index, etcd_login::kPath, etcd_login::request(), retry);
      if (!login.ok() || !etcd_login::take(login))
        return *retry ? login : etcd_login::refused(login);
    }
    std::string token;
    EtcdReply reply = exchange(index, path, body, retry, &token);
    if (attempt > 0 || !etcd_login::stale(reply)) return reply;
    etcd_login::forget(token);  // a token again, then the same ask
  }
}

EtcdReply EtcdClient::exchange(size_t index, const std::string &path, const std::string &body,
                               bool *retry, std::string *token) {
  SoupMessage *message = soup_message_new("POST", (endpoints_[index] + path).c_str());
  etcd_login::authorize(message, token);
  GBytes *bytes = g_bytes_new(body.data(), body.size());
  soup_message_set_request_body_from_bytes(message, "application/json", bytes);
  g_bytes_unref(bytes);
  GError *error = nullptr;
  GBytes *answer = soup_session_send_and_read(session_, message, nullptr, &error);
  *retry = true;
  EtcdReply reply;
  if (error) {
    reply = EtcdReply(nullptr, endpoints_[index] + ": " + error->message);
    g_clear_error(&error);
  } else {
    reply = read_answer(endpoints_[index], soup_message_get_status(message), answer, retry);
  }
  if (answer) g_bytes_unref(answer);
  g_object_unref(message);
  return reply;
}

std::string EtcdClient::check_endpoints(const std::string &list, std::vector<std::string> *out) {
  std::vector<std::string> endpoints;
  gchar **items = g_strsplit(list.c_str(), ",", -1);
  std::string why;
  for (gchar **item = items; *item && why.empty(); ++item) {
    std::string endpoint = g_strstrip(*item);
    if (endpoint.empty()) continue;
    GUri *uri = g_uri_parse(endpoint.c_str(), G_URI_FLAGS_NONE, nullptr);
    if (!uri ||
        (g_strcmp0(g_uri_get_scheme(uri), "http") != 0 &&
         g_strcmp0(g_uri_get_scheme(uri), "https") != 0) ||
        !g_uri_get_host(uri) || g_uri_get_port(uri) <= 0 ||
        (*g_uri_get_path(uri) && g_strcmp0(g_uri_get_path(uri), "/")))
      why = "an endpoint is http(s)://HOST:PORT, not \"" + endpoint + "\"";
    if (uri) g_uri_unref(uri);
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    endpoints.push_back(endpoint);
  }
  g_strfreev(items);
  if (why.empty() && endpoints.empty()) why = "names no endpoint";
  if (why.empty() && out) *out = std::move(endpoints);
  return why;
}

}  // namespace cudanms::service
