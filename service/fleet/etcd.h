// A client of etcd v3 through its JSON gateway (etcd 3.4: /v3/kv/range, put, deleterange, txn,
// /v3/lease/grant, keepalive, revoke, /v3/watch), over libsoup 3. Keys and values are byte
// strings, base64 on the wire; revisions and lease ids are decimal strings there. A cluster is
// several endpoints: a request that cannot reach one (refused, timed out, or a member without
// a leader) goes to the next, and the one that answered is asked first next time.
//
// post() runs on the main loop (its answer comes there); post_sync() may be called from any
// thread (libsoup 3.2's sessions send from any thread), for a camera's streaming thread that must
// know its counts are stored before it publishes them.
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cudanms::service {

struct EtcdKeyValue {
  std::string key, value;
  gint64 create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

// What etcd answered, or why nothing did.
class EtcdReply {
 public:
  EtcdReply() = default;
  EtcdReply(JsonNode *root, std::string error);  // takes `root`
  ~EtcdReply();
  EtcdReply(const EtcdReply &other);
  EtcdReply &operator=(EtcdReply other);

  // etcd answered: a result, or a transaction whose comparisons failed.
  bool ok() const { return root_ != nullptr && error_.empty(); }
  // Why not: no endpoint answered ("unreachable: ..."), or etcd's own error.
  const std::string &error() const { return error_; }
  // The store's revision when it answered.
  gint64 revision() const;
  // A transaction's comparisons held (its success operations ran).
  bool succeeded() const;
  // A range's keys, or those of the `index`th response of a transaction.
  std::vector<EtcdKeyValue> kvs(int index = -1) const;
  // A lease's id (grant) and time to live (grant, keepalive: 0 when the lease is gone).
  gint64 lease_id() const;
  gint64 ttl() const;
  JsonObject *object() const;  // the answer's top object, or null

 private:
  JsonNode *root_ = nullptr;
  std::string error_;
};

// The JSON of a transaction's parts, and of the requests (etcd_txn's text is a request body).
namespace etcd {
std::string range(const std::string &key, bool prefix = false);
std::string put(const std::string &key, const std::string &value, gint64 lease = 0);
std::string remove(const std::string &key, bool prefix = false);
std::string absent(const std::string &key);                // compare: no such key
std::string leased(const std::string &key, gint64 lease);  // compare: the key's lease is it
std::string value_is(const std::string &key, const std::string &value);  // compare
std::string txn(const std::vector<std::string> &compare, const std::vector<std::string> &success,
                const std::vector<std::string> &failure = {});
// The end of the range of every key that starts with `prefix`.
std::string prefix_end(const std::string &prefix);
}  // namespace etcd

// etcd over TLS (https:// endpoints, etcd's --cert-file and --client-cert-auth): the CA its
// certificate is checked against ("" : the system's) and this host's client certificate and key;
// PEM files.
struct EtcdTls {
  std::string ca, certificate, key;
  bool on() const { return !ca.empty() || !certificate.empty(); }
};
// The process's etcd TLS (in place of any before), for every client and watch made after it (a
// site has one etcd): "" or why the files cannot be used (their content never said).
std::string use_etcd_tls(const EtcdTls &tls);
// `session` (a new one to etcd) given use_etcd_tls()'s CA and certificate; returned.
SoupSession *etcd_session(SoupSession *session);

// etcd's own users (etcd 3.4's auth enable): this host logs in as `user` with the password that
// `password_file` holds (its first line), and gives etcd's token with every request.
struct EtcdLogin {
  std::string user, password_file;
  bool on() const { return !user.empty(); }
};
// The process's etcd login (in place of any before), for every client and watch: "" or why the
// password cannot be read (the password itself never said). An empty login: none.
std::string use_etcd_login(const EtcdLogin &login);
// Both: how this process reaches its site's etcd.
std::string use_etcd(const EtcdTls &tls, const EtcdLogin &login);

class EtcdClient {
 public:
  using Done = std::function<void(EtcdReply)>;
  // `endpoints`: http://HOST:PORT each; `timeout_ms`: what one endpoint gets to answer.
  EtcdClient(std::vector<std::string> endpoints, guint timeout_ms = 1000);
  ~EtcdClient();
  EtcdClient(const EtcdClient &) = delete;
  EtcdClient &operator=(const EtcdClient &) = delete;

  // POST `body` to `path` (/v3/kv/txn ...) on the main loop; `done` there, unless the client is
  // destroyed first.
  void post(const std::string &path, const std::string &body, Done done);
  // The same, asked of every endpoint: the first good answer is `done`'s, or every endpoint's
  // error when none gives one. For idempotent requests that must not wait out the members that
  // stopped answering one after another (a lease's renewal during an election). `hedge_ms` 0:
  // all at once; else the current endpoint first and the others once it fails or has not
  // answered within hedge_ms (a third of the requests while it answers).
  void post_to_all(const std::string &path, const std::string &body, Done done, guint hedge_ms = 0);
  // The same as post, blocking, from any thread.
  EtcdReply post_sync(const std::string &path, const std::string &body);

  const std::vector<std::string> &endpoints() const { return endpoints_; }
  // The endpoint asked first from now on (a site's hosts spread over the members).
  void ask_first(size_t index) { current_ = index % std::max<size_t>(1, endpoints_.size()); }
  // The endpoint that answered last (asked first next time).
  std::string current() const;
  SoupSession *session() const { return session_; }

  // Checks an endpoint list "http://h:p[,http://h:p...]": "" when good, else why not.
  static std::string check_endpoints(const std::string &list, std::vector<std::string> *out);

 private:
  struct Call;
  struct Sent;
  // A request raced over the endpoints (post_to_all). The endpoint asked first stays what it was
  // while it answers: one that merely answered first this time would move it (and, for a fleet
  // host, its watch) to and fro.
  struct Race {
    Done done;
    size_t failed = 0;
    bool answered = false;
    bool others_asked = false;
    std::string errors;
    size_t current = 0;
    long first_good = -1;  // the endpoint whose good answer came first
    bool current_failed = false;
    bool hedged = false;
    guint hedge_timer = 0;
    std::function<void()> ask_others;
    std::weak_ptr<int> alive;  // the client's

    // Endpoint i's answer, of `runners`: done with the first good one, or with every error;
    // `asked_first` moved as above.
    void take(size_t i, EtcdReply reply, size_t runners, std::atomic<size_t> *asked_first);
    void stop_hedge();
  };
  // Asks up to `limit` endpoints one after another, from endpoints_[first].
  // The endpoint that answers becomes the one asked first, unless `racing` (post_to_all decides).
  void ask(const std::string &path, const std::string &body, size_t first, size_t limit, Done done,
           bool racing = false);
  void attempt(std::shared_ptr<Call> call);
  // A token for the login (etcd_login.h) from the endpoint the call asks next, then the call.
  void log_in(std::shared_ptr<Call> call);
  // post_sync's ask of one endpoint, logging in first where a token is needed.
  EtcdReply send_sync(size_t index, const std::string &path, const std::string &body, bool *retry);
  // One request to one endpoint, blocking, with the token held (into *token).
  EtcdReply exchange(size_t index, const std::string &path, const std::string &body, bool *retry,
                     std::string *token = nullptr);
  static void on_answer(GObject *source, GAsyncResult *result, gpointer data);
  // The attempt on its way ended with `reply` (its answer, or its deadline's): the call done, or
  // asked again (a token again, the next endpoint when `retry`).
  void end_attempt(std::shared_ptr<Call> call, EtcdReply reply, bool retry);

  std::vector<std::string> endpoints_;
  guint timeout_ms_;
  SoupSession *session_;
  std::shared_ptr<int> alive_;  // pending calls hold it weakly
  std::atomic<size_t> current_{0};
};

// A watch of a key range from a revision on: its events as they come, on the main loop. It ends
// (broken) when its endpoint goes away or etcd cancels it (compacted: the revision is gone);
// whoever made it reads the range again and watches anew.
struct EtcdEvent {
  bool deleted = false;
  EtcdKeyValue kv;
};

class EtcdWatch {
 public:
  using Events = std::function<void(const std::vector<EtcdEvent> &events, gint64 revision)>;
  using Broken = std::function<void(const std::string &why)>;
  // Watches [key, range_end) from `start_revision` through `client`'s current endpoint.
  EtcdWatch(EtcdClient *client, std::string key, std::string range_end, gint64 start_revision,
            Events events, Broken broken);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch &) = delete;
  EtcdWatch &operator=(const EtcdWatch &) = delete;
  const std::string &endpoint() const { return endpoint_; }

 private:
  static void on_opened(GObject *source, GAsyncResult *result, gpointer data);
  static void on_line(GObject *source, GAsyncResult *result, gpointer data);
  void read_next();
  void fail(const std::string &why);

  Events events_;
  Broken broken_;
  std::string endpoint_;
  GCancellable *cancel_;
  SoupMessage *message_ = nullptr;
  GDataInputStream *lines_ = nullptr;
  bool ended_ = false;
};

}  // namespace cudanms::service
