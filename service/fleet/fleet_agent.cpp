#include "fleet_agent.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "counting_file.h"
#include "fleet_plan.h"
#include "fleet_store.h"
#include "log.h"
#include "metrics.h"

namespace cudanms::service {
namespace {

constexpr guint kRetryMs = 250;  // after a renewal or a read that got no answer
// The last renewal is at most a tenth of a TTL old when etcd stops answering, which leaves an
// election most of the fence's delay (3 of its 3.5 s at the default TTL).
constexpr double kRenewalsPerTtl = 10;
constexpr guint kJoinRetryMs = 1000;  // a lease or a registration that could not be had
constexpr guint kPlanDelayMs = 50;    // events that come together are planned once
// and a plan at most this often: while a site places its cameras, every claim is an event to
// every host (3 000 cameras, 100 hosts: 300 000), each of whose plans reads the whole site.
constexpr gint64 kPlanIntervalUs = 200000;
// Claims and reads of cameras on their way at once: a host given sixty cameras at its start
// claims them a few at a time, each answered within its timeout, not sixty queued behind one
// another on the client's connections.
constexpr size_t kMostTakes = 8;
// The site's whole read (every camera, host and owner: half a megabyte at 3 000 cameras) gets
// longer than a renewal: a busy etcd that takes more than a second over it would otherwise never
// let a host that starts have it.
constexpr guint kListTimeoutMs = 10000;
constexpr size_t kRecentRenewals = 256;
// The fleet's own keys of a host's [service] group: none is a camera's default.
const char *const kFleetKeys[] = {"fleet",    "site",      "host-id",
                                  "capacity", "fleet-ttl", "fleet-prefix"};

guint renewal_interval_ms(double ttl_s) {
  return static_cast<guint>(ttl_s * 1000 / kRenewalsPerTtl);
}

// When a host stops its cameras for want of a renewal: max(1 s, 0.3 TTL) before its lease may
// end (docs/fleet.md), so that their connections close before another host may claim them.
gint64 fence_deadline_us(gint64 lease_valid_until_us, double ttl_s) {
  return lease_valid_until_us - static_cast<gint64>(std::max(1.0, 0.3 * ttl_s) * 1e6);
}

// A host key's value (register_host()'s): its capacity and endpoint.
int capacity_of(const std::string &value, std::string *url) {
  JsonParser *parser = json_parser_new();
  int capacity = 1;
  if (json_parser_load_from_data(parser, value.c_str(), -1, nullptr) &&
      JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
    JsonObject *host = json_node_get_object(json_parser_get_root(parser));
    capacity = static_cast<int>(json_object_get_int_member_with_default(host, "capacity", 1));
    *url = json_object_get_string_member_with_default(host, "metrics", "");
  }
  g_object_unref(parser);
  return std::max(1, capacity);
}

}  // namespace

std::string FleetAgent::camera_defaults(const std::string &host_text) {
  GKeyFile *file = g_key_file_new();
  GKeyFile *defaults = g_key_file_new();
  if (g_key_file_load_from_data(file, host_text.c_str(), host_text.size(), G_KEY_FILE_NONE,
                                nullptr)) {
    gchar **keys = g_key_file_get_keys(file, "service", nullptr, nullptr);
    for (gchar **key = keys; key && *key; ++key) {
      if (std::find_if(std::begin(kFleetKeys), std::end(kFleetKeys),
                       [&](const char *k) { return g_str_equal(k, *key); }) != std::end(kFleetKeys))
        continue;
      gchar *value = g_key_file_get_value(file, "service", *key, nullptr);
      g_key_file_set_value(defaults, "service", *key, value);
      g_free(value);
    }
    g_strfreev(keys);
  }
  gchar *data = g_key_file_to_data(defaults, nullptr, nullptr);
  std::string out = data && *data ? data : "[service]\n";
  g_free(data);
  g_key_file_free(defaults);
  g_key_file_free(file);
  return out;
}

std::string advertised_url(const std::string &advertise, const std::string &listening) {
  if (!advertise.empty()) return advertise;
  GUri *uri = g_uri_parse(listening.c_str(), G_URI_FLAGS_NONE, nullptr);
  if (!uri) return listening;
  GInetAddress *ip = g_inet_address_new_from_string(g_uri_get_host(uri));
  std::string out = listening;
  if (ip && g_inet_address_get_is_any(ip)) {
    gchar *named = g_uri_join(G_URI_FLAGS_NONE, g_uri_get_scheme(uri), nullptr, g_get_host_name(),
                              g_uri_get_port(uri), "", nullptr, nullptr);
    out = named;
    g_free(named);
  }
  if (ip) g_object_unref(ip);
  g_uri_unref(uri);
  return out;
}

FleetAgent::FleetAgent(FleetSettings settings, const std::string &host_text, int units,
                       std::string metrics_url, Hooks hooks)
    : settings_(std::move(settings)),
      defaults_(camera_defaults(host_text)),
      units_(std::max(1, units)),
      metrics_url_(advertised_url(settings_.advertise_url, metrics_url)),
      hooks_(std::move(hooks)),
      client_(settings_.endpoints),
      renewals_client_(settings_.endpoints),
      reads_client_(settings_.endpoints, kListTimeoutMs) {}

FleetAgent::~FleetAgent() {
  for (guint timer : {renew_timer_, fence_timer_, plan_timer_, retry_timer_})
    if (timer) g_source_remove(timer);
}

void FleetAgent::start() {
  log_line("fleet: host %s of site %s (%d cameras at most), etcd at %s", settings_.host_id.c_str(),
           settings_.site.c_str(), units_ * settings_.capacity, client_.current().c_str());
  // Each host renews through a member of its own (by its id's hash): one member asked first by
  // every host of a site carried all their renewals, forwarded to the leader.
  renewals_client_.ask_first(g_str_hash(settings_.host_id.c_str()));
  hooks_.fence(0);  // nothing runs before the first renewal
  grant();
}

void FleetAgent::later(guint *timer, guint ms, void (FleetAgent::*step)()) {
  if (*timer) g_source_remove(*timer);
  struct Later {
    FleetAgent *self;
    guint *timer;
    void (FleetAgent::*step)();
  };
  *timer = g_timeout_add_full(
      G_PRIORITY_DEFAULT, ms,
      [](gpointer data) -> gboolean {
        auto *l = static_cast<Later *>(data);
        *l->timer = 0;
        (l->self->*l->step)();
        return G_SOURCE_REMOVE;
      },
      new Later{this, timer, step}, [](gpointer data) { delete static_cast<Later *>(data); });
}

void FleetAgent::retry(guint ms, void (FleetAgent::*step)()) { later(&retry_timer_, ms, step); }

void FleetAgent::degraded(const std::string &why) {
  degraded_why_ = why;
  if (etcd_answers_) log_line("fleet: %s", why.c_str());
  etcd_answers_ = false;
}

void FleetAgent::grant() {
  const gint64 sent = g_get_monotonic_time();
  const long long ttl = std::llround(settings_.ttl_s);
  client_.post("/v3/lease/grant", "{\"TTL\":\"" + std::to_string(ttl) + "\"}",
               [this, sent](EtcdReply reply) {
                 if (!reply.ok() || reply.lease_id() == 0 || reply.ttl() <= 0) {
                   degraded("no etcd: " + reply.error());
                   retry(kJoinRetryMs, &FleetAgent::grant);
                   return;
                 }
                 lease_ = reply.lease_id();
                 renew_sent_us_ = sent;
                 valid_until_us_ = sent + reply.ttl() * G_USEC_PER_SEC;
                 log_line("fleet: lease %lld of %lld s", lease_,
                          static_cast<long long>(reply.ttl()));
                 schedule_keep_alive(renewal_interval_ms(settings_.ttl_s));
                 register_host();
               });
}

void FleetAgent::register_host() {
  if (!lease_) return;
  const std::string key = settings_.key("hosts", settings_.host_id);
  gchar *value = g_strdup_printf(
      "{\"capacity\":%d,\"units\":%d,\"pid\":%d,\"hostname\":\"%s\",\"metrics\":\"%s\"}",
      units_ * settings_.capacity, units_, static_cast<int>(getpid()),
      escape_quoted(g_get_host_name()).c_str(), escape_quoted(metrics_url_).c_str());
  const std::string body =
      etcd::txn({etcd::absent(key)}, {etcd::put(key, value, lease_)}, {etcd::range(key)});
  g_free(value);
  client_.post("/v3/kv/txn", body, [this, key, lease = lease_](EtcdReply reply) {
    if (lease != lease_) return;
    if (!reply.ok()) {
      degraded("no etcd: " + reply.error());
      retry(kJoinRetryMs, &FleetAgent::register_host);
      return;
    }
    const std::vector<EtcdKeyValue> held = reply.kvs(0);
    if (!reply.succeeded() && !(held.size() == 1 && held[0].lease == lease_)) {
      const gint64 now = g_get_monotonic_time();
      if (!refused_since_us_) {
        refused_since_us_ = now;
        log_line(
            "fleet: host-id %s is held by a live lease in etcd (%s): another host, or this "
            "one before a restart; waiting up to %s for it to end",
            settings_.host_id.c_str(), key.c_str(), seconds_text(settings_.ttl_s + 2).c_str());
      }
      if (now - refused_since_us_ > static_cast<gint64>((settings_.ttl_s + 2) * 1e6)) {
        hooks_.refuse("fleet: host-id " + settings_.host_id + " is another live host's in site " +
                      settings_.site + " (" + key + " = " + (held.empty() ? "" : held[0].value) +
                      "): give each host a host-id of its own");
        return;
      }
      retry(kJoinRetryMs, &FleetAgent::register_host);
      return;
    }
    refused_since_us_ = 0;
    registered_ = true;
    log_line("fleet: host %s joined site %s", settings_.host_id.c_str(), settings_.site.c_str());
    fence_at_us_ = fence_deadline_us(valid_until_us_, settings_.ttl_s);
    if (g_get_monotonic_time() < fence_at_us_) {
      fenced_ = false;
      degraded_why_.clear();
      hooks_.fence(fence_at_us_);
      check_fence();
    }
    list();
  });
}

void FleetAgent::schedule_keep_alive(guint ms) {
  later(&renew_timer_, ms, &FleetAgent::keep_alive);
}

void FleetAgent::keep_alive() {
  if (!lease_ || renewing_) return;
  renewing_ = true;
  const gint64 sent = g_get_monotonic_time();
  // The member it asks first, then every other one at once if that one has not answered within
  // half a renewal's interval (250 ms at most): during an election the members that wait for a
  // leader would each use up a timeout in turn, and the fence comes 0.7 TTL after the last
  // renewal. Not all three every time: at 100 hosts that was ~600 requests a second of renewals.
  const guint hedge_ms = std::min(250u, renewal_interval_ms(settings_.ttl_s) / 2);
  renewals_client_.post_to_all(
      "/v3/lease/keepalive", "{\"ID\":\"" + std::to_string(lease_) + "\"}",
      [this, sent, lease = lease_](EtcdReply reply) {
        renewing_ = false;
        if (lease != lease_) return;
        if (!reply.ok()) {
          degraded("no etcd: " + reply.error());
          schedule_keep_alive(kRetryMs);
          check_fence();
          return;
        }
        if (reply.ttl() <= 0) {
          lose_lease("its lease " + std::to_string(lease_) + " has ended");
          return;
        }
        const gint64 now = g_get_monotonic_time();
        const double took = (now - sent) / 1e6;
        renewals_++;
        renew_sum_s_ += took;
        recent_renew_s_.push_back(took);
        if (recent_renew_s_.size() > kRecentRenewals) recent_renew_s_.pop_front();
        if (!etcd_answers_)
          log_line("fleet: etcd answers again (%s)", renewals_client_.current().c_str());
        etcd_answers_ = true;
        renew_sent_us_ = sent;
        valid_until_us_ = sent + reply.ttl() * G_USEC_PER_SEC;
        fence_at_us_ = fence_deadline_us(valid_until_us_, settings_.ttl_s);
        schedule_keep_alive(renewal_interval_ms(settings_.ttl_s));
        if (!registered_) return;
        if (now >= fence_at_us_) return;  // an answer too late to count on: fenced it stays
        hooks_.fence(fence_at_us_);
        check_fence();
        if (fenced_) {
          fenced_ = false;
          degraded_why_.clear();
          log_line("fleet: its lease %lld is still alive: its cameras run again", lease_);
          list();
        } else if (watch_ && watch_->endpoint() != client_.current()) {
          list();  // the watch's member stopped answering: watch through the one that answers
        }
      },
      hedge_ms);
}

void FleetAgent::check_fence() {
  if (fence_timer_) g_source_remove(fence_timer_);
  fence_timer_ = 0;
  const gint64 now = g_get_monotonic_time();
  if (!registered_ || fenced_) return;
  if (now >= fence_at_us_) {
    fence_now("no renewal of its lease for " + seconds_text((now - renew_sent_us_) / 1e6));
    return;
  }
  later(&fence_timer_, static_cast<guint>((fence_at_us_ - now) / 1000 + 1),
        &FleetAgent::check_fence);
}

void FleetAgent::fence_now(const std::string &why) {
  if (fenced_) return;
  fenced_ = true;
  degraded_why_ = why;
  log_line("fleet: fenced: %s: stopping its %zu cameras before its lease may end", why.c_str(),
           running_.size());
  // The workers stop every camera and start none until a renewal; their assignment stays: if
  // the lease outlives the outage, no other host could have run them, and each goes on from
  // its worker's own counts, which are the newest (those made while etcd did not answer too).
  hooks_.fence(0);
  losses_ += running_.size();
}

void FleetAgent::lose_lease(const std::string &why) {
  fence_now(why);
  log_line("fleet: %s: joining again with a new lease", why.c_str());
  // Its cameras may run elsewhere by now: none is this host's until it takes it again.
  running_.clear();
  releasing_.clear();
  seeds_.clear();
  push_config();
  lease_ = 0;
  registered_ = false;
  claiming_.clear();
  watch_.reset();
  if (renew_timer_) g_source_remove(renew_timer_);
  renew_timer_ = 0;
  grant();
}

void FleetAgent::list() {
  if (!registered_) return;
  const std::string body = etcd::txn(
      {}, {etcd::range(settings_.key("cameras"), true), etcd::range(settings_.key("hosts"), true),
           etcd::range(settings_.key("owners"), true)});
  reads_client_.post("/v3/kv/txn", body, [this, lease = lease_](EtcdReply reply) {
    if (lease != lease_) return;
    if (!reply.ok()) {
      degraded("no etcd: " + reply.error());
      retry(kRetryMs, &FleetAgent::list);
      return;
    }
    cameras_.clear();
    hosts_.clear();
    host_urls_.clear();
    owners_.clear();
    for (int i = 0; i < 3; ++i)
      for (const EtcdKeyValue &kv : reply.kvs(i)) apply(kv, false);
    watch(reply.revision() + 1);
    replan();
  });
}

void FleetAgent::watch(gint64 from_revision) {
  watch_ = std::make_unique<EtcdWatch>(
      &client_, settings_.key("cameras"), etcd::prefix_end(settings_.key("owners")), from_revision,
      [this](const std::vector<EtcdEvent> &events, gint64) { on_events(events); },
      [this](const std::string &why) {
        // Read the site again and watch anew (the watch is replaced there, not here, in its own
        // callback).
        log_line("fleet: the watch of etcd ended (%s): reading the site again", why.c_str());
        retry(kRetryMs, &FleetAgent::list);
      });
}

void FleetAgent::on_events(const std::vector<EtcdEvent> &events) {
  for (const EtcdEvent &event : events) apply(event.kv, event.deleted);
  replan_soon();
}

std::string FleetAgent::kind_of(const std::string &key, std::string *name) const {
  for (const char *kind : {"cameras", "hosts", "owners"}) {
    const std::string folder = settings_.key(kind);
    if (key.size() > folder.size() && key.compare(0, folder.size(), folder) == 0) {
      *name = key.substr(folder.size());
      return kind;
    }
  }
  return "";
}

void FleetAgent::apply(const EtcdKeyValue &kv, bool deleted) {
  std::string name;
  const std::string kind = kind_of(kv.key, &name);
  if (kind == "cameras") {
    if (deleted) {
      cameras_.erase(name);
      checked_.erase(name);
    } else {
      cameras_[name] = kv.value;
    }
  } else if (kind == "hosts") {
    if (deleted) {
      hosts_.erase(name);
      host_urls_.erase(name);
      if (name == settings_.host_id && registered_) {
        log_line("fleet: this host's key is gone from etcd: registering again");
        register_host();
      }
    } else {
      hosts_[name] = capacity_of(kv.value, &host_urls_[name]);
    }
  } else if (kind == "owners") {
    if (deleted) {
      owners_.erase(name);
    } else {
      owners_[name] = {kv.value, kv.lease};
    }
  }
}

void FleetAgent::replan_soon() {
  if (plan_timer_) return;
  const gint64 since = g_get_monotonic_time() - planned_us_;
  const gint64 wait_us = std::max<gint64>(kPlanDelayMs * 1000, kPlanIntervalUs - since);
  later(&plan_timer_, static_cast<guint>(wait_us / 1000), &FleetAgent::replan);
}

const FleetAgent::Checked &FleetAgent::checked(const std::string &camera) {
  const std::string &text = cameras_[camera];
  auto found = checked_.find(camera);
  if (found != checked_.end() && found->second.text == text) return found->second;
  Checked c = check_fleet_camera(camera, text, settings_.key("cameras", camera), defaults_);
  if (!c.error.empty())
    log_line("fleet: camera %s cannot run: %s", camera.c_str(), c.error.c_str());
  return checked_[camera] = std::move(c);
}

void FleetAgent::replan() {
  if (plan_timer_) g_source_remove(plan_timer_);
  plan_timer_ = 0;
  planned_us_ = g_get_monotonic_time();
  if (!registered_ || fenced_) return;
  const std::string &me = settings_.host_id;
  FleetView view;
  view.hosts = hosts_;
  view.hosts[me] = units_ * settings_.capacity;  // this host, even before its key shows
  std::set<std::string> mine;
  for (const auto &[camera, owner] : owners_) {
    if (owner.lease == lease_) {
      mine.insert(camera);
      view.owners[camera] = me;
    } else {
      // A key of this host's earlier lease is no camera of its own: it ends with that lease.
      view.owners[camera] = owner.host == me ? me + " (an earlier lease)" : owner.host;
    }
  }
  for (const auto &[camera, text] : cameras_) {
    const Checked &c = checked(camera);
    if (c.error.empty() && c.enabled) view.cameras.insert(camera);
  }
  unplaced_.clear();
  for (const std::string &camera : view.cameras)
    if (!view.owners.count(camera)) unplaced_.insert(camera);

  const FleetPlan plan = plan_fleet(view, me);
  for (const std::string &camera : plan.claims) {
    if (claiming_.size() >= kMostTakes) break;  // the rest at a plan after their answers
    if (!claiming_.count(camera)) claim(camera);
  }
  for (const std::string &camera : plan.releases)
    if (!releasing_.count(camera)) release(camera, "rebalancing: another host has room for it");

  std::set<std::string> run;
  for (const std::string &camera : mine) {
    if (!view.cameras.count(camera)) {
      if (!releasing_.count(camera))
        release(camera, cameras_.count(camera)
                            ? (checked(camera).error.empty() ? "disabled in etcd"
                                                             : "its keys in etcd cannot run")
                            : "removed from etcd");
      continue;
    }
    if (releasing_.count(camera)) continue;
    // A camera starts here only with its counts as etcd has them, which a claim's answer
    // carries (the watch may show its owner key first), or a read once it is this host's.
    if (running_.count(camera) || seeds_.count(camera))
      run.insert(camera);
    else if (!claiming_.count(camera) && claiming_.size() < kMostTakes)
      take(camera, false);
  }
  for (const std::string &camera : running_) {
    if (mine.count(camera)) continue;
    losses_++;
    log_line("fleet: camera %s: etcd no longer says this host owns it: stopping it",
             camera.c_str());
  }
  running_ = std::move(run);
  push_config();
}

void FleetAgent::claim(const std::string &camera) { take(camera, true); }

void FleetAgent::take(const std::string &camera, bool claim) {
  claiming_.insert(camera);
  const std::string owner = settings_.key("owners", camera);
  const std::string state = settings_.key("state", camera);
  // A claim puts the owner key if there is none; a camera this host owns already (its cameras
  // stopped by a fence, its lease still alive) is read while the key is still under its lease.
  // Either way its counts and undelivered events come in the same transaction.
  std::vector<std::string> reads = {etcd::range(state), etcd::range(state + "/events/", true)};
  std::vector<std::string> ops = reads;
  if (claim) ops.insert(ops.begin(), etcd::put(owner, settings_.host_id, lease_));
  const std::string body =
      etcd::txn({claim ? etcd::absent(owner) : etcd::leased(owner, lease_)}, ops);
  client_.post("/v3/kv/txn", body, [this, camera, state, claim, lease = lease_](EtcdReply reply) {
    claiming_.erase(camera);
    if (lease != lease_ || !registered_) return;
    if (!reply.ok()) {
      log_line("fleet: camera %s: etcd did not answer: %s", camera.c_str(), reply.error().c_str());
      // Planned again soon: no event may come (a claim that did not reach etcd changes nothing).
      later(&plan_timer_, kRetryMs, &FleetAgent::replan);
      return;
    }
    if (!reply.succeeded()) return;  // another host has it: the watch says which
    if (claim) claims_++;
    owners_[camera] = {settings_.host_id, lease_};
    const int first = claim ? 1 : 0;
    const std::vector<EtcdKeyValue> stored = reply.kvs(first), undelivered = reply.kvs(first + 1);
    CountingState counted;
    std::map<std::string, std::string> shapes;
    if (!stored.empty() && !parse_counting(stored[0].value, &counted, &shapes))
      log_line("fleet: camera %s: %s is no counts document: counting anew", camera.c_str(),
               state.c_str());
    for (const EtcdKeyValue &event : undelivered) {
      const std::string id = event.key.substr(event.key.rfind('/') + 1);
      counted.undelivered[g_ascii_strtoull(id.c_str(), nullptr, 10)] = event.value;
    }
    seeds_[camera] =
        stored.empty() && undelivered.empty() ? "" : counting_json(counted, shapes, true);
    guint64 total = 0;
    for (const auto &[line, in_out] : counted.lines) total += in_out.first + in_out.second;
    log_line("fleet: camera %s %s (its lines' counts: %" G_GUINT64_FORMAT
             ", events to send again: %zu)",
             camera.c_str(), claim ? "is this host's now" : "runs here again", total,
             counted.undelivered.size());
    replan_soon();
  });
}

void FleetAgent::release(const std::string &camera, const std::string &why) {
  releasing_.insert(camera);
  log_line("fleet: camera %s goes: %s", camera.c_str(), why.c_str());
  if (!running_.count(camera)) forget_owner_key(camera);  // nothing of it runs here
}

void FleetAgent::camera_stopped(const std::string &camera) {
  if (releasing_.count(camera) && !running_.count(camera)) forget_owner_key(camera);
}

void FleetAgent::forget_owner_key(const std::string &camera) {
  const std::string owner = settings_.key("owners", camera);
  client_.post(
      "/v3/kv/txn", etcd::txn({etcd::leased(owner, lease_)}, {etcd::remove(owner)}),
      [this, camera, lease = lease_](EtcdReply reply) {
        if (lease != lease_ || !releasing_.count(camera)) return;
        if (!reply.ok()) {  // etcd away: the next plan releases it again
          log_line("fleet: camera %s: cannot give it up yet: %s", camera.c_str(),
                   reply.error().c_str());
          releasing_.erase(camera);
          replan_soon();
          return;
        }
        releasing_.erase(camera);
        if (reply.succeeded()) {
          releases_++;
          owners_.erase(camera);
          log_line("fleet: camera %s stopped here: another host may take it", camera.c_str());
        } else {
          log_line("fleet: camera %s: its owner key is no longer this host's", camera.c_str());
        }
        replan_soon();
      });
}

void FleetAgent::push_config() {
  std::string text = defaults_;
  std::vector<CameraConfig> cameras;
  std::map<std::string, std::string> seeds;
  for (const std::string &camera : running_) {
    text += checked_[camera].group;
    cameras.push_back(checked_[camera].camera);
    const auto seed = seeds_.find(camera);
    if (seed != seeds_.end()) {
      if (!seed->second.empty()) seeds[camera] = std::move(seed->second);
      seeds_.erase(seed);
    }
  }
  if (text == last_config_ && seeds.empty()) return;
  last_config_ = text;
  hooks_.run(std::move(cameras), text, seeds, registered_ && !fenced_ ? lease_ : 0);
}

}  // namespace cudanms::service
