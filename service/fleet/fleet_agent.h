// A fleet host's part in its site (docs/fleet.md), in the supervisor's process, on the main loop.
//
//   etcd  PREFIX/SITE/cameras/NAME   a camera's keys, as an INI [camera.NAME] group has them
//         PREFIX/SITE/hosts/HOST     a live host: its capacity (under its lease)
//         PREFIX/SITE/owners/NAME    the host that runs the camera (under that host's lease)
//         PREFIX/SITE/state/NAME     the camera's counts and ids; .../events/ID its undelivered
//                                    events (fleet_store.h)
//
// The host holds a lease of fleet-ttl seconds, renewed five times a lease, registers under it
// (refused while another live host has its host-id), reads the site and watches it. It claims
// the cameras the plan gives it (fleet_plan.h) with a transaction that holds only while no live
// lease owns them, reading their counts in the same transaction, and hands the cameras it owns
// to its workers as a config. A host that dies stops renewing: its lease ends, its owner keys
// vanish, the other hosts' watches fire and they claim its cameras. A host that cannot renew
// (etcd unreachable, itself stopped or cut off) fences itself: its workers stop every camera
// by the renewal's time plus the lease's less a margin (fence.h), so that a camera never runs on
// two hosts; it goes on with the same lease if etcd comes back before the lease ended, and with
// a new one, as a host that joins, if not. A camera it releases (rebalancing, removed from etcd)
// stops first; its owner key goes only once the worker says it has stopped.
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config.h"
#include "config_edit.h"
#include "etcd.h"
#include "fleet_camera_check.h"
#include "web.h"

namespace cudanms::service {

// Where the other hosts reach an endpoint that listens at `listening` (http(s)://HOST:PORT):
// `advertise` when given; else `listening`, an any-address (0.0.0.0, [::]) as this machine's name
// (which the others would otherwise dial as themselves).
std::string advertised_url(const std::string &advertise, const std::string &listening);

class FleetAgent {
 public:
  struct Hooks {
    // The cameras this host runs from now on: as they run (each read once, when etcd gave it)
    // and as a config's text (what the workers read); `seeds`: the counts (as counting_json has
    // them) of those it has just taken, to go on from; `lease`: the lease that owns them (0:
    // none).
    std::function<void(std::vector<CameraConfig> cameras, const std::string &text,
                       const std::map<std::string, std::string> &seeds, long long lease)>
        run;
    // The time by which the workers must have stopped every camera (0: now).
    std::function<void(gint64 fence_at_us)> fence;
    // This host cannot be one of the fleet (its host-id is another live host's): the reason.
    std::function<void(const std::string &why)> refuse;
  };

  // `settings`: the host's [service] fleet keys; `host_text`: its config file, whose [service]
  // group gives every camera its defaults; `units`: its GPUs (at least 1: the CPU);
  // `metrics_url`: where its endpoint listens (advertised_url() tells the others where it is).
  FleetAgent(FleetSettings settings, const std::string &host_text, int units,
             std::string metrics_url, Hooks hooks);
  ~FleetAgent();
  FleetAgent(const FleetAgent &) = delete;
  FleetAgent &operator=(const FleetAgent &) = delete;

  void start();
  // A worker has stopped `camera` (or died with it): a camera being released may go.
  void camera_stopped(const std::string &camera);

  // The fleet's metrics families, and its part of /health ("fleet": {...}); healthy() is
  // false while the host is not sure of its lease. These and the site's views below are in
  // fleet_agent_report.cpp.
  std::string metrics() const;
  void health(JsonBuilder *builder) const;
  bool healthy() const { return registered_ && !fenced_; }

  // Every camera of the site as etcd says it, for the operator's page.
  std::vector<SiteCamera> site() const;
  // The endpoint of the other host that runs `camera`, "" when none does (or this host).
  std::string owner_url(const std::string &camera) const;
  // The other live hosts' endpoints: host -> http://HOST:PORT.
  std::map<std::string, std::string> other_hosts() const;
  // The page's change to a camera's lines and zones (config_edit.h), put into its key in etcd
  // if no one changed the key meanwhile; its owner's watch applies it. `respond` gets 200, or
  // 404 no such camera, 400/409 as a config file's change, 409 changed meanwhile, 503 no etcd.
  void edit_shapes(const std::string &camera, const ShapesEdit &edit,
                   std::function<void(Reply)> respond);

  // The [service] group of a host's file without the fleet's own keys: the cameras' defaults.
  static std::string camera_defaults(const std::string &host_text);

 private:
  struct Owner {
    std::string host;
    long long lease = 0;
  };
  using Checked = FleetCameraCheck;

  void grant();
  void register_host();
  void keep_alive();
  void schedule_keep_alive(guint ms);
  void check_fence();
  void fence_now(const std::string &why);
  void lose_lease(const std::string &why);
  void list();
  void watch(gint64 from_revision);
  void on_events(const std::vector<EtcdEvent> &events);
  void apply(const EtcdKeyValue &kv, bool deleted);
  void replan_soon();
  void replan();
  void claim(const std::string &camera);
  // The camera's counts read (and, with `claim`, its owner key put) in one transaction; then it
  // may start here.
  void take(const std::string &camera, bool claim);
  void release(const std::string &camera, const std::string &why);
  void forget_owner_key(const std::string &camera);
  void push_config();
  const Checked &checked(const std::string &camera);
  void degraded(const std::string &why);
  // `step` after `ms`, on `timer` (one pending at a time: a new one replaces it).
  void later(guint *timer, guint ms, void (FleetAgent::*step)());
  void retry(guint ms, void (FleetAgent::*step)());  // later() on retry_timer_
  std::string kind_of(const std::string &key, std::string *name) const;

  const FleetSettings settings_;
  const std::string defaults_;  // the cameras' [service] defaults
  const int units_;
  const std::string metrics_url_;
  Hooks hooks_;
  EtcdClient client_;  // its answers never come after it (and so this agent) is gone
  // The lease's renewals, on connections of their own: never queued behind claims and reads.
  EtcdClient renewals_client_;
  // The site's whole read, with a longer timeout (fleet_agent.cpp: kListTimeoutMs).
  EtcdClient reads_client_;

  long long lease_ = 0;
  bool registered_ = false;
  bool fenced_ = true;  // nothing runs before the first renewal
  gint64 renew_sent_us_ = 0, valid_until_us_ = 0, fence_at_us_ = 0;
  gint64 refused_since_us_ = 0;
  gint64 planned_us_ = 0;  // the last plan's time
  bool renewing_ = false;
  guint renew_timer_ = 0, fence_timer_ = 0, plan_timer_ = 0, retry_timer_ = 0;
  std::string degraded_why_ = "not registered yet";
  bool etcd_answers_ = true;  // for the log: one line an outage

  std::unique_ptr<EtcdWatch> watch_;
  std::map<std::string, std::string> cameras_;    // name -> its keys' text
  std::map<std::string, int> hosts_;              // live host -> capacity
  std::map<std::string, std::string> host_urls_;  // live host -> its endpoint
  std::map<std::string, Owner> owners_;
  std::map<std::string, Checked> checked_;

  std::set<std::string> running_;    // handed to the workers
  std::set<std::string> claiming_;   // a claim in flight
  std::set<std::string> releasing_;  // stopping, to give up once stopped
  // Taken, not yet handed to the workers: their counts as etcd had them ("": none).
  std::map<std::string, std::string> seeds_;
  std::string last_config_;

  // Figures.
  guint64 claims_ = 0, losses_ = 0, releases_ = 0, renewals_ = 0;
  double renew_sum_s_ = 0;
  std::deque<double> recent_renew_s_;
  std::set<std::string> unplaced_;
};

}  // namespace cudanms::service
