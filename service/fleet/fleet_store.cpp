#include "fleet_store.h"

#include <mutex>

namespace cudanms::service {
namespace {

// A camera's streaming thread waits this long at most for one endpoint.
constexpr guint kStoreTimeoutMs = 1000;

// One client a process for each cluster, made on the main loop and kept for the process's life:
// its connections serve every camera, and its session is never torn down on a camera's thread.
std::shared_ptr<EtcdClient> client_for(const std::vector<std::string> &endpoints) {
  static std::mutex lock;
  static auto *clients = new std::map<std::vector<std::string>, std::shared_ptr<EtcdClient>>();
  std::lock_guard<std::mutex> guard(lock);
  std::shared_ptr<EtcdClient> &client = (*clients)[endpoints];
  if (!client) client = std::make_shared<EtcdClient>(endpoints, kStoreTimeoutMs);
  return client;
}

}  // namespace

FleetStore::FleetStore(FleetStoreConfig config)
    : config_(std::move(config)), client_(client_for(config_.endpoints)) {}

std::string FleetStore::event_key(const std::string &state_key, guint64 id) {
  gchar *number = g_strdup_printf("%020" G_GUINT64_FORMAT, id);
  std::string key = state_key + "/events/" + number;
  g_free(number);
  return key;
}

FleetStore::Outcome FleetStore::save(const std::string &state,
                                     const std::map<guint64, std::string> &sent,
                                     const std::set<guint64> &delivered, std::string *why) {
  std::vector<std::string> ops = {etcd::put(config_.state_key, state)};
  for (const auto &[id, message] : sent)
    ops.push_back(etcd::put(event_key(config_.state_key, id), message));
  for (guint64 id : delivered) ops.push_back(etcd::remove(event_key(config_.state_key, id)));
  const EtcdReply reply = client_->post_sync(
      "/v3/kv/txn", etcd::txn({etcd::leased(config_.owner_key, config_.lease)}, ops));
  if (!reply.ok()) {
    *why = reply.error();
    return Outcome::kFailed;
  }
  return reply.succeeded() ? Outcome::kStored : Outcome::kNotOwner;
}

}  // namespace cudanms::service
