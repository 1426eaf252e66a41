// What a fleet host tells: its metrics families and /health's "fleet" part, the site's cameras
// for the operator's page, where the other hosts are (fleet_agent.h).
#include <glib.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "fleet_agent.h"
#include "metrics.h"

namespace cudanms::service {

std::string FleetAgent::metrics() const {
  const std::string host = "host=\"" + escape_quoted(settings_.host_id) + "\"";
  std::ostringstream out;
  auto family = [&](const char *name, const char *type, const char *help, double value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << "{" << host << "} " << value << "\n";
  };
  family("cudanms_fleet_up", "gauge",
         "1 while this host holds its etcd lease and is sure of it (not fenced)",
         healthy() ? 1 : 0);
  family("cudanms_fleet_cameras_owned", "gauge", "Cameras this host runs for its site",
         static_cast<double>(running_.size()));
  family("cudanms_fleet_claims_total", "counter", "Cameras this host took in etcd",
         static_cast<double>(claims_));
  family("cudanms_fleet_losses_total", "counter",
         "Cameras this host stopped because it was not sure of its lease (fenced) or etcd gave "
         "them to another host",
         static_cast<double>(losses_));
  family("cudanms_fleet_releases_total", "counter",
         "Cameras this host gave up for another host (rebalancing, removed or disabled in etcd)",
         static_cast<double>(releases_));
  family("cudanms_fleet_hosts", "gauge", "Live hosts of the site, as this host sees them",
         static_cast<double>(hosts_.size()));
  family("cudanms_fleet_cameras", "gauge", "Cameras of the site in etcd",
         static_cast<double>(cameras_.size()));
  family("cudanms_fleet_cameras_unowned", "gauge",
         "Cameras of the site that can run and no host runs (all full, or a host just died)",
         static_cast<double>(unplaced_.size()));
  std::vector<double> sorted(recent_renew_s_.begin(), recent_renew_s_.end());
  std::sort(sorted.begin(), sorted.end());
  auto quantile = [&](double q) -> double {
    if (sorted.empty()) return NAN;
    const size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
    return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
  };
  out << "# HELP cudanms_fleet_lease_renew_seconds Time etcd took to renew this host's lease "
         "(p50, p99 of the last 256)\n# TYPE cudanms_fleet_lease_renew_seconds summary\n";
  for (double q : {0.5, 0.99}) {
    char text[32];
    g_ascii_formatd(text, sizeof text, "%.6f", quantile(q));
    out << "cudanms_fleet_lease_renew_seconds{" << host << ",quantile=\"" << q << "\"} "
        << (std::isnan(quantile(q)) ? "NaN" : text) << "\n";
  }
  char sum[32];
  g_ascii_formatd(sum, sizeof sum, "%.6f", renew_sum_s_);
  out << "cudanms_fleet_lease_renew_seconds_sum{" << host << "} " << sum << "\n"
      << "cudanms_fleet_lease_renew_seconds_count{" << host << "} " << renewals_ << "\n";
  return out.str();
}

void FleetAgent::health(JsonBuilder *b) const {
  json_builder_set_member_name(b, "fleet");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "status");
  json_builder_add_string_value(b, healthy() ? "ok"
                                             : (etcd_answers_ ? "degraded (" + degraded_why_ + ")"
                                                              : std::string("degraded (no etcd)"))
                                                   .c_str());
  json_builder_set_member_name(b, "reason");
  json_builder_add_string_value(b, healthy() ? "" : degraded_why_.c_str());
  json_builder_set_member_name(b, "site");
  json_builder_add_string_value(b, settings_.site.c_str());
  json_builder_set_member_name(b, "host");
  json_builder_add_string_value(b, settings_.host_id.c_str());
  json_builder_set_member_name(b, "lease");
  json_builder_add_int_value(b, lease_);
  json_builder_set_member_name(b, "etcd");
  json_builder_add_string_value(b, client_.current().c_str());
  json_builder_set_member_name(b, "capacity");
  json_builder_add_int_value(b, units_ * settings_.capacity);
  json_builder_set_member_name(b, "cameras");
  json_builder_begin_array(b);
  for (const std::string &camera : running_) json_builder_add_string_value(b, camera.c_str());
  json_builder_end_array(b);
  json_builder_set_member_name(b, "hosts");
  json_builder_begin_object(b);
  for (const auto &[host, capacity] : hosts_) {
    int owned = 0;
    for (const auto &[camera, owner] : owners_) owned += owner.host == host;
    json_builder_set_member_name(b, host.c_str());
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "capacity");
    json_builder_add_int_value(b, capacity);
    json_builder_set_member_name(b, "cameras");
    json_builder_add_int_value(b, owned);
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "invalid");
  json_builder_begin_object(b);
  for (const auto &[camera, c] : checked_) {
    if (c.error.empty() || !cameras_.count(camera)) continue;
    json_builder_set_member_name(b, camera.c_str());
    json_builder_add_string_value(b, c.error.c_str());
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "unowned");
  json_builder_begin_array(b);
  for (const std::string &camera : unplaced_) json_builder_add_string_value(b, camera.c_str());
  json_builder_end_array(b);
  json_builder_end_object(b);
}

std::vector<SiteCamera> FleetAgent::site() const {
  std::vector<SiteCamera> out;
  for (const auto &[name, text] : cameras_) {
    SiteCamera c;
    c.name = name;
    if (const auto owner = owners_.find(name); owner != owners_.end()) {
      c.owner = owner->second.host;
      const auto url = host_urls_.find(c.owner);
      if (url != host_urls_.end()) c.owner_url = url->second;
    }
    if (const auto check = checked_.find(name);
        check != checked_.end() && check->second.text == text) {
      c.error = check->second.error;
      c.enabled = check->second.enabled;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string FleetAgent::owner_url(const std::string &camera) const {
  const auto owner = owners_.find(camera);
  if (owner == owners_.end() || owner->second.host == settings_.host_id) return "";
  const auto url = host_urls_.find(owner->second.host);
  return url == host_urls_.end() ? "" : url->second;
}

std::map<std::string, std::string> FleetAgent::other_hosts() const {
  std::map<std::string, std::string> out;
  for (const auto &[host, url] : host_urls_)
    if (host != settings_.host_id && hosts_.count(host) && !url.empty()) out[host] = url;
  return out;
}

}  // namespace cudanms::service
