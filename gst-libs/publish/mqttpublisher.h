/* Publishes messages to an MQTT broker (Eclipse Paho's asynchronous C client, MQTTAsync) from
 * a worker thread, so that the caller never waits on the network. Between them, a bounded queue:
 * when it is full the oldest message is dropped (a live consumer wants the latest detections)
 * and counted. The worker connects, and reconnects after a failure or a lost connection, with
 * exponential back-off; a message whose publication failed goes back to the head of the queue.
 * Up to kInFlight messages are sent and not yet confirmed by Paho's thread. (Paho's synchronous
 * MQTTClient sleeps 100 ms whenever a QoS 1 publish waits, 10 messages a second: paho.mqtt.c
 * issues #38 and #452.) A QoS 1 message counts as published once the broker acknowledged it;
 * those unconfirmed when the connection drops go back to the head of the queue (so a broker may
 * get one twice: MQTT's "at least once"). QoS 0 counts a message once the client wrote it to the
 * socket, and what a broker that died meanwhile never read is lost uncounted (MQTT's "at most
 * once"). A status (set_status) is one retained message that is never dropped: the latest one
 * is sent first, and again after every reconnection, so that a broker that restarted without
 * its retained store learns it back; the last will (MqttOptions::will_*) is the status the
 * broker publishes for us when the connection dies without a goodbye. No GStreamer here: the
 * element (gstmetapublish.cpp) and the camera service turn events into their own reports. */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

struct MqttOptions {
  std::string address;  // host:port, or a Paho URI (tcp://, ssl://, mqtt://, mqtts://)
  std::string topic;
  std::string client_id;
  int qos = 0;  // 0 or 1
  bool tls = false;
  std::string ca_file, cert_file, key_file;  // TLS: trust store, client certificate and key
  std::string username, password;
  size_t max_queued = 1000;
  int keep_alive_s = 10;
  int connect_timeout_s = 2;
  std::chrono::milliseconds min_backoff{100}, max_backoff{5000};
  // The last will, retained, QoS 1; none when will_topic is empty.
  std::string will_topic, will_message;
};

struct MqttStats {
  uint64_t published = 0;
  uint64_t dropped = 0;  // overflowed the queue, or still queued when stopped
  uint64_t queued = 0;
  uint64_t connects = 0;  // successful connections, the first one included
  bool connected = false;
};

enum class MqttEvent {
  kConnected,      // detail: the server URI
  kConnectFailed,  // the first failure of an outage; detail: Paho's reason
  kConnectionLost  // detail: Paho's reason
};

class MqttPublisher {
 public:
  using Listener = std::function<void(MqttEvent, const std::string &detail)>;

  MqttPublisher(MqttOptions options, Listener listener);
  ~MqttPublisher();  // stop(0) if still running
  MqttPublisher(const MqttPublisher &) = delete;
  MqttPublisher &operator=(const MqttPublisher &) = delete;

  // Creates the client and starts the worker; false with a reason for bad options. The first
  // connection is the worker's: a broker that is down is not an error here.
  bool start(std::string *error);
  // Queues a message for the topic of the options (or `topic`); never blocks on the network.
  void push(std::string message);
  void push(std::string topic, std::string message);
  // A message that must arrive (a counting event): QoS 1 whatever the options say, never
  // dropped from a full queue (ordinary messages make room), and `delivered` called on Paho's
  // thread once the broker acknowledged it. One still queued when the publisher stops is not
  // delivered: the caller keeps it until told (an outbox).
  void push_reliable(std::string topic, std::string message, std::function<void()> delivered);
  // The retained status on `topic` (QoS 1): replaces any not yet sent, never dropped.
  void set_status(std::string topic, std::string message);
  // Gives the worker up to `flush` to publish what is queued, then stops it; what is left is
  // counted as dropped.
  void stop(std::chrono::milliseconds flush);
  MqttStats stats() const;
  const std::string &server_uri() const { return uri_; }

  // "host:port" as a Paho URI (tcp:// or ssl://); URIs with a scheme pass unchanged.
  static std::string uri_of(const std::string &address, bool tls);

 private:
  static constexpr size_t kInFlight = 32;

  bool create_client(std::string *error);  // client_, with our callbacks
  void run();
  bool connect_once(std::unique_lock<std::mutex> &guard, std::string *reason);
  // run()'s parts, with lock_ held through `guard`.
  void reconnect(std::unique_lock<std::mutex> &guard, std::chrono::milliseconds *backoff,
                 bool *outage_reported);
  void send_next(std::unique_lock<std::mutex> &guard);
  void requeue_in_flight();  // with lock_ held
  bool send_status(std::unique_lock<std::mutex> &guard);
  void send_failed(std::unique_lock<std::mutex> &guard, int rc);

 public:  // for Paho's thread, through the callbacks in mqttpublisher.cpp
  void connected(bool ok, const std::string &reason);
  void connection_lost();
  void sent(int token, bool ok);
  void status_sent(bool ok);

 private:
  MqttOptions options_;
  Listener listener_;
  std::string uri_;
  void *client_ = nullptr;  // MQTTAsync

  mutable std::mutex lock_;
  std::condition_variable wake_;
  struct Message {
    std::string topic;  // "": the options' topic
    std::string payload;
    std::function<void()> delivered;  // a reliable message's (push_reliable)
  };
  void enqueue(Message message);
  void trim_queue();  // with lock_ held: ordinary messages past max_queued dropped, oldest first
  std::deque<Message> queue_;
  std::deque<std::pair<int, Message>> in_flight_;  // (token, message), oldest first
  std::set<int> confirmed_early_;  // confirmed before MQTTAsync_sendMessage returned
  std::string status_topic_, status_;
  bool status_pending_ = false;  // set_status since the last send, or a new connection
  int statuses_in_flight_ = 0;   // sent, not yet acknowledged by the broker
  bool lost_ = false;            // Paho reported the connection lost, or a send failed
  int connect_result_ = 0;       // 0 pending, 1 connected, -1 failed
  std::string connect_reason_;
  MqttStats stats_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point flush_deadline_;
  std::thread worker_;
};
