#include "mqttpublisher.h"

#include <MQTTAsync.h>

#include <algorithm>
#include <utility>

namespace {

// Paho's thread calls these; `context` is the publisher.
int ignore_message(void *, char *topic, int, MQTTAsync_message *message) {
  MQTTAsync_freeMessage(&message);
  MQTTAsync_free(topic);
  return 1;
}
void on_connection_lost(void *context, char *cause) {
  static_cast<MqttPublisher *>(context)->connection_lost();
  if (cause) MQTTAsync_free(cause);
}
void on_connected(void *context, MQTTAsync_successData *) {
  static_cast<MqttPublisher *>(context)->connected(true, "");
}
void on_connect_failed(void *context, MQTTAsync_failureData *response) {
  std::string reason = "could not connect";
  if (response && response->message) {
    reason = response->message;
  } else if (response && response->code > 0) {
    reason = "the broker refused the connection (MQTT return code " +
             std::to_string(response->code) + ")";
  } else if (response) {
    reason = MQTTAsync_strerror(response->code);
  }
  static_cast<MqttPublisher *>(context)->connected(false, reason);
}
void on_sent(void *context, MQTTAsync_successData *response) {
  static_cast<MqttPublisher *>(context)->sent(response->token, true);
}
void on_send_failed(void *context, MQTTAsync_failureData *response) {
  static_cast<MqttPublisher *>(context)->sent(response ? response->token : -1, false);
}
void on_status_sent(void *context, MQTTAsync_successData *) {
  static_cast<MqttPublisher *>(context)->status_sent(true);
}
void on_status_failed(void *context, MQTTAsync_failureData *) {
  static_cast<MqttPublisher *>(context)->status_sent(false);
}

}  // namespace

MqttPublisher::MqttPublisher(MqttOptions options, Listener listener)
    : options_(std::move(options)), listener_(std::move(listener)) {}

MqttPublisher::~MqttPublisher() { stop(std::chrono::milliseconds(0)); }

std::string MqttPublisher::uri_of(const std::string &address, bool tls) {
  if (address.find("://") != std::string::npos) return address;
  return (tls ? "ssl://" : "tcp://") + address;
}

bool MqttPublisher::start(std::string *error) {
  if (options_.topic.empty()) {
    *error = "no topic";
    return false;
  }
  if (options_.qos != 0 && options_.qos != 1) {
    *error = "qos must be 0 or 1";
    return false;
  }
  uri_ = uri_of(options_.address, options_.tls);
  if (!create_client(error)) return false;
  stopping_ = false;
  worker_ = std::thread([this] { run(); });
  return true;
}

bool MqttPublisher::create_client(std::string *error) {
  MQTTAsync client = nullptr;
  int rc = MQTTAsync_create(&client, uri_.c_str(), options_.client_id.c_str(),
                            MQTTCLIENT_PERSISTENCE_NONE, nullptr);
  if (rc == MQTTASYNC_SUCCESS) {
    rc = MQTTAsync_setCallbacks(client, this, &on_connection_lost, &ignore_message, nullptr);
    if (rc != MQTTASYNC_SUCCESS) MQTTAsync_destroy(&client);
  }
  if (rc != MQTTASYNC_SUCCESS) {
    *error = "cannot create an MQTT client for " + uri_ + ": " + MQTTAsync_strerror(rc);
    return false;
  }
  client_ = client;
  return true;
}

void MqttPublisher::push(std::string message) { push("", std::move(message)); }

void MqttPublisher::push(std::string topic, std::string message) {
  enqueue({std::move(topic), std::move(message), nullptr});
}

void MqttPublisher::push_reliable(std::string topic, std::string message,
                                  std::function<void()> delivered) {
  enqueue({std::move(topic), std::move(message), std::move(delivered)});
}

void MqttPublisher::enqueue(Message message) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    queue_.push_back(std::move(message));
    trim_queue();
  }
  wake_.notify_one();
}

void MqttPublisher::trim_queue() {
  // The oldest ordinary message goes first; reliable ones are never dropped here.
  auto next = queue_.begin();
  while (queue_.size() > std::max<size_t>(options_.max_queued, 1)) {
    next = std::find_if(next, queue_.end(), [](const Message &m) { return !m.delivered; });
    if (next == queue_.end()) break;
    next = queue_.erase(next);
    stats_.dropped++;
  }
  stats_.queued = queue_.size();
}

void MqttPublisher::set_status(std::string topic, std::string message) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    status_topic_ = std::move(topic);
    status_ = std::move(message);
    status_pending_ = true;
  }
  wake_.notify_one();
}

void MqttPublisher::stop(std::chrono::milliseconds flush) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (!worker_.joinable()) return;
    stopping_ = true;
    flush_deadline_ = std::chrono::steady_clock::now() + flush;
  }
  wake_.notify_all();
  worker_.join();
  auto client = static_cast<MQTTAsync>(client_);
  if (client && MQTTAsync_isConnected(client)) {
    MQTTAsync_disconnectOptions options = MQTTAsync_disconnectOptions_initializer;
    options.timeout = 500;
    MQTTAsync_disconnect(client, &options);
  }
  if (client) MQTTAsync_destroy(&client);  // after it no callback runs: the counts below are final
  client_ = nullptr;
  std::lock_guard<std::mutex> guard(lock_);
  stats_.dropped += queue_.size() + in_flight_.size();
  queue_.clear();
  in_flight_.clear();
  stats_.queued = 0;
  stats_.connected = false;
}

MqttStats MqttPublisher::stats() const {
  std::lock_guard<std::mutex> guard(lock_);
  return stats_;
}

void MqttPublisher::connected(bool ok, const std::string &reason) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    connect_result_ = ok ? 1 : -1;
    connect_reason_ = reason;
  }
  wake_.notify_all();
}

void MqttPublisher::connection_lost() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    lost_ = true;
  }
  wake_.notify_all();
}

void MqttPublisher::sent(int token, bool ok) {
  std::function<void()> delivered;
  {
    std::lock_guard<std::mutex> guard(lock_);
    auto found = std::find_if(in_flight_.begin(), in_flight_.end(),
                              [token](const auto &entry) { return entry.first == token; });
    if (found == in_flight_.end()) {
      // Confirmed before MQTTAsync_sendMessage returned; or after the message was requeued, to
      // be sent and counted again.
      if (ok) confirmed_early_.insert(token);
    } else if (ok) {
      delivered = std::move(found->second.delivered);
      in_flight_.erase(found);
      stats_.published++;
    } else {
      lost_ = true;  // the worker requeues it with the others and reconnects
    }
  }
  wake_.notify_all();
  if (delivered) delivered();
}

void MqttPublisher::status_sent(bool ok) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (statuses_in_flight_ > 0) statuses_in_flight_--;
    if (!ok) {
      status_pending_ = true;  // the latest status, again, after the reconnection
      lost_ = true;
    }
  }
  wake_.notify_all();
}

// Starts a connection and waits for Paho's answer (at most the connect timeout and a second).
bool MqttPublisher::connect_once(std::unique_lock<std::mutex> &guard, std::string *reason) {
  MQTTAsync_connectOptions connect = MQTTAsync_connectOptions_initializer;
  connect.keepAliveInterval = options_.keep_alive_s;
  connect.cleansession = 1;
  connect.connectTimeout = options_.connect_timeout_s;
  connect.onSuccess = &on_connected;
  connect.onFailure = &on_connect_failed;
  connect.context = this;
  if (!options_.username.empty()) connect.username = options_.username.c_str();
  if (!options_.password.empty()) connect.password = options_.password.c_str();
  MQTTAsync_willOptions will = MQTTAsync_willOptions_initializer;
  if (!options_.will_topic.empty()) {
    will.topicName = options_.will_topic.c_str();
    will.message = options_.will_message.c_str();
    will.retained = 1;
    will.qos = 1;
    connect.will = &will;
  }
  MQTTAsync_SSLOptions ssl = MQTTAsync_SSLOptions_initializer;
  if (options_.tls || uri_.rfind("ssl://", 0) == 0 || uri_.rfind("mqtts://", 0) == 0) {
    if (!options_.ca_file.empty()) ssl.trustStore = options_.ca_file.c_str();
    if (!options_.cert_file.empty()) ssl.keyStore = options_.cert_file.c_str();
    if (!options_.key_file.empty()) ssl.privateKey = options_.key_file.c_str();
    connect.ssl = &ssl;
  }
  if (!client_ && !create_client(reason)) return false;  // the last one could not be replaced
  connect_result_ = 0;
  guard.unlock();
  const int rc = MQTTAsync_connect(static_cast<MQTTAsync>(client_), &connect);
  guard.lock();
  if (rc != MQTTASYNC_SUCCESS) {
    *reason = MQTTAsync_strerror(rc);
    return false;
  }
  // Paho answers within its timeout twice over (MQTT 3.1.1, then 3.1), and a second.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(2 * options_.connect_timeout_s + 1);
  wake_.wait_until(guard, deadline, [this] { return connect_result_ != 0; });
  if (connect_result_ == 1) return true;
  if (connect_result_ == -1) {
    *reason = connect_reason_;
    return false;
  }
  // No answer: Paho's attempt is still pending. Connecting again on that client was seen never
  // to succeed (publishers whose first connection met a hung broker stayed offline after it
  // went on: test_metapublish's ReliableMessagesReachABrokerThatHung). A new client starts
  // clean; destroying the old one ends its callbacks.
  *reason = "no answer from the broker";
  guard.unlock();
  auto stuck = static_cast<MQTTAsync>(client_);
  MQTTAsync_destroy(&stuck);
  client_ = nullptr;
  std::string error;
  const bool created = create_client(&error);
  guard.lock();
  if (!created) *reason += "; " + error;
  return false;
}

void MqttPublisher::requeue_in_flight() {
  if (statuses_in_flight_ > 0) status_pending_ = true;  // lost with the connection, perhaps
  statuses_in_flight_ = 0;
  for (auto entry = in_flight_.rbegin(); entry != in_flight_.rend(); ++entry) {
    queue_.push_front(std::move(entry->second));
  }
  in_flight_.clear();
  confirmed_early_.clear();
  trim_queue();  // only when newer messages filled the queue meanwhile
}

// Sends the status, retained, QoS 1, outside the window of counted messages (a status lost
// with the connection is sent again after the next one). False when the connection failed.
bool MqttPublisher::send_status(std::unique_lock<std::mutex> &guard) {
  const std::string topic = status_topic_, message = status_;
  status_pending_ = false;
  MQTTAsync_message m = MQTTAsync_message_initializer;
  m.payload = const_cast<char *>(message.data());
  m.payloadlen = static_cast<int>(message.size());
  m.qos = 1;
  m.retained = 1;
  MQTTAsync_responseOptions response = MQTTAsync_responseOptions_initializer;
  response.onSuccess = &on_status_sent;
  response.onFailure = &on_status_failed;
  response.context = this;
  statuses_in_flight_++;
  guard.unlock();
  const int rc =
      MQTTAsync_sendMessage(static_cast<MQTTAsync>(client_), topic.c_str(), &m, &response);
  guard.lock();
  if (rc == MQTTASYNC_SUCCESS) return true;
  statuses_in_flight_--;
  status_pending_ = true;
  send_failed(guard, rc);
  return false;
}

// A send that failed: what is in flight goes back to the head of the queue, and the worker
// reconnects.
void MqttPublisher::send_failed(std::unique_lock<std::mutex> &guard, int rc) {
  stats_.connected = false;
  requeue_in_flight();
  guard.unlock();
  if (listener_) listener_(MqttEvent::kConnectionLost, MQTTAsync_strerror(rc));
  guard.lock();
}

// Not connected: one attempt, or after a failed one the back-off (a stop cuts it short; while
// flushing the retries go on until the flush deadline).
void MqttPublisher::reconnect(std::unique_lock<std::mutex> &guard,
                              std::chrono::milliseconds *backoff, bool *outage_reported) {
  lost_ = false;
  std::string reason;
  if (connect_once(guard, &reason)) {
    stats_.connected = true;
    stats_.connects++;
    status_pending_ = !status_.empty();  // the broker may have lost it: say it again
    *backoff = options_.min_backoff;
    *outage_reported = false;
    guard.unlock();
    if (listener_) listener_(MqttEvent::kConnected, uri_);
    guard.lock();
    return;
  }
  if (!*outage_reported && listener_) {
    *outage_reported = true;
    guard.unlock();
    listener_(MqttEvent::kConnectFailed, reason);
    guard.lock();
  }
  const auto until = std::chrono::steady_clock::now() + *backoff;
  if (stopping_) {
    wake_.wait_until(guard, std::min(until, flush_deadline_));
  } else {
    wake_.wait_until(guard, until, [this] { return stopping_; });
  }
  *backoff = std::min(*backoff * 2, options_.max_backoff);
}

// The queue's first message to the broker: confirmed, in flight, or back at the head of the
// queue with a reconnect.
void MqttPublisher::send_next(std::unique_lock<std::mutex> &guard) {
  Message message = std::move(queue_.front());
  queue_.pop_front();
  stats_.queued = queue_.size();

  MQTTAsync_message m = MQTTAsync_message_initializer;
  m.payload = message.payload.data();
  m.payloadlen = static_cast<int>(message.payload.size());
  m.qos = message.delivered ? 1 : options_.qos;
  m.retained = 0;
  MQTTAsync_responseOptions response = MQTTAsync_responseOptions_initializer;
  response.onSuccess = &on_sent;
  response.onFailure = &on_send_failed;
  response.context = this;
  guard.unlock();
  // Paho copies the payload: `message` stays ours, for a resend.
  const std::string &topic = message.topic.empty() ? options_.topic : message.topic;
  const int rc =
      MQTTAsync_sendMessage(static_cast<MQTTAsync>(client_), topic.c_str(), &m, &response);
  guard.lock();
  if (rc == MQTTASYNC_SUCCESS) {
    if (confirmed_early_.erase(response.token) > 0) {
      stats_.published++;
      if (message.delivered) {
        guard.unlock();
        message.delivered();
        guard.lock();
      }
    } else {
      in_flight_.emplace_back(response.token, std::move(message));
    }
    return;
  }
  // Not sent: back to the head of the queue, with the unconfirmed ones, and reconnect.
  in_flight_.emplace_back(-1, std::move(message));
  send_failed(guard, rc);
}

void MqttPublisher::run() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  bool outage_reported = false;
  std::unique_lock<std::mutex> guard(lock_);
  for (;;) {
    if (stopping_ &&
        ((queue_.empty() && in_flight_.empty() && !status_pending_ && statuses_in_flight_ == 0) ||
         std::chrono::steady_clock::now() >= flush_deadline_)) {
      break;
    }
    if (lost_ && stats_.connected) {
      stats_.connected = false;
      requeue_in_flight();
      guard.unlock();
      if (listener_) listener_(MqttEvent::kConnectionLost, "the connection to the broker was lost");
      guard.lock();
    }
    if (!stats_.connected) {
      reconnect(guard, &backoff, &outage_reported);
      continue;
    }
    if (status_pending_) {
      if (!send_status(guard)) continue;
    }
    if (queue_.empty() || in_flight_.size() >= kInFlight) {
      // Wait for work or for room in the window (not merely for a stop: while flushing, Paho's
      // thread needs the lock to confirm what is in flight).
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      if (stopping_) until = std::min(until, flush_deadline_);
      wake_.wait_until(guard, until, [this] {
        return lost_ || status_pending_ || (!queue_.empty() && in_flight_.size() < kInFlight) ||
               (stopping_ && queue_.empty() && in_flight_.empty() && statuses_in_flight_ == 0);
      });
      continue;
    }
    send_next(guard);
  }
}
