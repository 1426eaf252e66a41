/**
 * SECTION:element-metapublish
 * @title: metapublish
 *
 * Publishes one JSON message per frame with the frame's detections (the kept boxes of a
 * #GstCudaNmsResultMeta, else the frame's #GstVideoRegionOfInterestMeta), to an MQTT broker
 * (method=mqtt, Eclipse Paho's C client) or to a file of JSON lines (method=file), in cudanms's
 * format or in DL Streamer gvametaconvert's (format=dlstreamer), so that consumers written for
 * DL Streamer read them unchanged. camera-id names the stream in every message ("source").
 * Frames that boxcount counted carry their events and running counts in the message; with
 * method=mqtt each event also goes as a message of its own (kind, name, direction, track_id,
 * label, source, frame, pts) to events-topic, by default TOPIC/events.
 *
 * The streaming thread never waits on the network: messages go through a queue of at most
 * max-queued to a publishing thread. While the broker is unreachable that thread reconnects
 * with back-off (0.1 s doubling to 5 s); when the queue is full the oldest message is dropped.
 * Drops are counted (the read-only "dropped" property) and reported at most once a second as an
 * element message "metapublish-dropped" (fields: dropped, the total, and new). The first failed
 * connection of an outage is a warning on the bus; each connection an element message
 * "metapublish-connected", each lost one "metapublish-disconnected". At the end of the stream
 * the queue gets flush-timeout to drain; what is left is counted as dropped.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=vtest.avi ! decodebin ! videoconvert ! cvdetect ! cudanms !
 *     metapublish method=mqtt address=broker.local:1883 topic=site/cameras camera-id=cam-7
 *     format=dlstreamer ! fakesink
 * mosquitto_sub -h broker.local -t site/cameras
 * ]|
 */
#include "gstmetapublish.h"

#include <gst/video/video.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "detectionsjson.h"
#include "linesfile.h"
#include "mqttpublisher.h"

GST_DEBUG_CATEGORY_STATIC(gst_meta_publish_debug);
#define GST_CAT_DEFAULT gst_meta_publish_debug

enum class PublishMethod { kFile, kMqtt };

#define GST_TYPE_META_PUBLISH_METHOD (gst_meta_publish_method_get_type())
static GType gst_meta_publish_method_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(PublishMethod::kFile), "JSON lines to a file or stdout", "file"},
      {static_cast<gint>(PublishMethod::kMqtt), "MQTT messages to a broker", "mqtt"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) {
    g_once_init_leave(&type, g_enum_register_static("GstMetaPublishMethod", values));
  }
  return type;
}

enum {
  PROP_0,
  PROP_METHOD,
  PROP_FORMAT,
  PROP_CAMERA_ID,
  PROP_LOCATION,
  PROP_ADDRESS,
  PROP_TOPIC,
  PROP_EVENTS_TOPIC,
  PROP_CLIENT_ID,
  PROP_QOS,
  PROP_TLS,
  PROP_CA_FILE,
  PROP_CERT_FILE,
  PROP_KEY_FILE,
  PROP_USERNAME,
  PROP_PASSWORD,
  PROP_MAX_QUEUED,
  PROP_FLUSH_TIMEOUT,
  PROP_PUBLISHED,
  PROP_DROPPED,
  PROP_QUEUED,
  PROP_CONNECTED,
};

#define DEFAULT_METHOD PublishMethod::kFile
#define DEFAULT_FORMAT DetectionsFormat::kCudanms
#define DEFAULT_LOCATION ""
#define DEFAULT_ADDRESS "localhost:1883"
#define DEFAULT_TOPIC "cudanms/detections"
#define DEFAULT_QOS 0
#define DEFAULT_MAX_QUEUED 1000
#define DEFAULT_FLUSH_TIMEOUT_MS 2000

#define CAPS_STR "video/x-raw(ANY)"

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));

struct GstMetaPublishPrivate {
  std::mutex lock; /* guards the settings */
  PublishMethod method = DEFAULT_METHOD;
  DetectionsFormat format = DEFAULT_FORMAT;
  std::string camera_id;
  std::string location = DEFAULT_LOCATION;
  std::string events_topic; /* "": the topic's /events */
  MqttOptions mqtt;
  guint flush_timeout_ms = DEFAULT_FLUSH_TIMEOUT_MS;

  /* Streaming thread (and start/stop) only. */
  PublishMethod running_method = DEFAULT_METHOD;
  DetectionsFormat running_format = DEFAULT_FORMAT;
  std::string running_camera_id;
  std::string running_events_topic;
  LinesFile file;
  std::unique_ptr<MqttPublisher> publisher;
  DetectionsStream stream;
  guint64 reported_dropped = 0;
  gint64 reported_at_us = 0;

  /* The file method's count (the MQTT one is the publisher's). */
  std::atomic<guint64> written{0};
};

struct _GstMetaPublish {
  GstBaseTransform parent;
  GstMetaPublishPrivate *priv;
};

#define gst_meta_publish_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstMetaPublish, gst_meta_publish, GST_TYPE_BASE_TRANSFORM,
                        GST_DEBUG_CATEGORY_INIT(gst_meta_publish_debug, "metapublish", 0,
                                                "Detection metadata publisher (MQTT, file)"));
GST_ELEMENT_REGISTER_DEFINE(metapublish, "metapublish", GST_RANK_NONE, GST_TYPE_META_PUBLISH);

static void gst_meta_publish_finalize(GObject *object);
static void gst_meta_publish_set_property(GObject *object, guint prop_id, const GValue *value,
                                          GParamSpec *pspec);
static void gst_meta_publish_get_property(GObject *object, guint prop_id, GValue *value,
                                          GParamSpec *pspec);
static gboolean gst_meta_publish_start(GstBaseTransform *trans);
static gboolean gst_meta_publish_stop(GstBaseTransform *trans);
static gboolean gst_meta_publish_set_caps(GstBaseTransform *trans, GstCaps *incaps,
                                          GstCaps *outcaps);
static gboolean gst_meta_publish_sink_event(GstBaseTransform *trans, GstEvent *event);
static GstFlowReturn gst_meta_publish_transform_ip(GstBaseTransform *trans, GstBuffer *buf);

static GParamFlags settable() {
  return static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY |
                                  G_PARAM_STATIC_STRINGS);
}
static GParamFlags readable() {
  return static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
}

static void install_string(GObjectClass *klass, guint id, const char *name, const char *nick,
                           const char *blurb, const char *default_value) {
  g_object_class_install_property(
      klass, id, g_param_spec_string(name, nick, blurb, default_value, settable()));
}

static void gst_meta_publish_class_init(GstMetaPublishClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  gobject_class->finalize = gst_meta_publish_finalize;
  gobject_class->set_property = gst_meta_publish_set_property;
  gobject_class->get_property = gst_meta_publish_get_property;

  g_object_class_install_property(
      gobject_class, PROP_METHOD,
      g_param_spec_enum("method", "Method", "Where the messages go", GST_TYPE_META_PUBLISH_METHOD,
                        static_cast<gint>(DEFAULT_METHOD), settable()));
  g_object_class_install_property(
      gobject_class, PROP_FORMAT,
      g_param_spec_enum("format", "Format",
                        "The messages' JSON: cudanms's own or DL Streamer gvametaconvert's",
                        GST_TYPE_DETECTIONS_FORMAT, static_cast<gint>(DEFAULT_FORMAT), settable()));
  install_string(gobject_class, PROP_CAMERA_ID, "camera-id", "Camera id",
                 "Names the stream in every message (\"source\"); empty leaves it out", "");
  install_string(gobject_class, PROP_LOCATION, "location", "Location",
                 "method=file: the file (replaced at start); empty or '-': stdout",
                 DEFAULT_LOCATION);
  install_string(gobject_class, PROP_ADDRESS, "address", "Address",
                 "method=mqtt: the broker, host:port or a URI (tcp://, ssl://)", DEFAULT_ADDRESS);
  install_string(gobject_class, PROP_TOPIC, "topic", "Topic", "method=mqtt: the topic",
                 DEFAULT_TOPIC);
  install_string(gobject_class, PROP_EVENTS_TOPIC, "events-topic", "Events topic",
                 "method=mqtt: each counting event (boxcount) as a message of its own to this "
                 "topic; empty: TOPIC/events",
                 "");
  install_string(gobject_class, PROP_CLIENT_ID, "client-id", "Client id",
                 "method=mqtt: the MQTT client id; empty: cudanms-<pid>-<element name>", "");
  g_object_class_install_property(
      gobject_class, PROP_QOS,
      g_param_spec_int("qos", "QoS",
                       "method=mqtt: 0 (at most once) or 1 (at least once: each message counts "
                       "as published when the broker acknowledged it)",
                       0, 1, DEFAULT_QOS, settable()));
  g_object_class_install_property(
      gobject_class, PROP_TLS,
      g_param_spec_boolean("tls", "TLS", "method=mqtt: connect with TLS (ssl://)", FALSE,
                           settable()));
  install_string(gobject_class, PROP_CA_FILE, "ca-file", "CA file",
                 "method=mqtt, TLS: PEM file of the certificates to trust", "");
  install_string(gobject_class, PROP_CERT_FILE, "cert-file", "Certificate file",
                 "method=mqtt, TLS: PEM file of the client's certificate", "");
  install_string(gobject_class, PROP_KEY_FILE, "key-file", "Key file",
                 "method=mqtt, TLS: PEM file of the client's private key", "");
  install_string(gobject_class, PROP_USERNAME, "username", "User name",
                 "method=mqtt: user name for the broker", "");
  install_string(gobject_class, PROP_PASSWORD, "password", "Password",
                 "method=mqtt: password for the broker", "");
  g_object_class_install_property(
      gobject_class, PROP_MAX_QUEUED,
      g_param_spec_uint("max-queued", "Max queued",
                        "method=mqtt: messages kept while the broker is slow or away; past "
                        "it the oldest is dropped and counted",
                        1, G_MAXINT, DEFAULT_MAX_QUEUED, settable()));
  g_object_class_install_property(
      gobject_class, PROP_FLUSH_TIMEOUT,
      g_param_spec_uint("flush-timeout", "Flush timeout",
                        "method=mqtt: milliseconds the queue gets to drain when the element "
                        "stops; what is left is counted as dropped",
                        0, G_MAXINT, DEFAULT_FLUSH_TIMEOUT_MS, settable()));
  g_object_class_install_property(
      gobject_class, PROP_PUBLISHED,
      g_param_spec_uint64("published", "Published",
                          "Messages published (MQTT) or lines written (file)", 0, G_MAXUINT64, 0,
                          readable()));
  g_object_class_install_property(
      gobject_class, PROP_DROPPED,
      g_param_spec_uint64("dropped", "Dropped", "Messages dropped: queue full, or left at stop", 0,
                          G_MAXUINT64, 0, readable()));
  g_object_class_install_property(
      gobject_class, PROP_QUEUED,
      g_param_spec_uint64("queued", "Queued", "Messages waiting for the broker", 0, G_MAXUINT64, 0,
                          readable()));
  g_object_class_install_property(
      gobject_class, PROP_CONNECTED,
      g_param_spec_boolean("connected", "Connected", "Connected to the broker now", FALSE,
                           readable()));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "Detection metadata publisher", "Sink/Metadata/Video",
      "Publishes each frame's detections as JSON to an MQTT broker or a file, in cudanms's or DL "
      "Streamer gvametaconvert's format, passing the frames on untouched",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_meta_publish_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_meta_publish_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR(gst_meta_publish_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_meta_publish_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_meta_publish_transform_ip);
  trans_class->transform_ip_on_passthrough = TRUE;
  gst_type_mark_as_plugin_api(GST_TYPE_META_PUBLISH_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_DETECTIONS_FORMAT, static_cast<GstPluginAPIFlags>(0));
}

static void gst_meta_publish_init(GstMetaPublish *self) {
  self->priv = new GstMetaPublishPrivate();
  /* The defaults, applied here. */
  MqttOptions &mqtt = self->priv->mqtt;
  mqtt.address = DEFAULT_ADDRESS;
  mqtt.topic = DEFAULT_TOPIC;
  mqtt.qos = DEFAULT_QOS;
  mqtt.max_queued = DEFAULT_MAX_QUEUED;
  /* Reads metadata only: passthrough, so the buffer is neither copied nor made writable. */
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static void gst_meta_publish_finalize(GObject *object) {
  GstMetaPublish *self = GST_META_PUBLISH(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static std::string string_of(const GValue *value) {
  const gchar *s = g_value_get_string(value);
  return s ? s : "";
}

static void gst_meta_publish_set_property(GObject *object, guint prop_id, const GValue *value,
                                          GParamSpec *pspec) {
  GstMetaPublishPrivate *priv = GST_META_PUBLISH(object)->priv;
  std::lock_guard<std::mutex> guard(priv->lock);
  MqttOptions &mqtt = priv->mqtt;
  switch (prop_id) {
    case PROP_METHOD:
      priv->method = static_cast<PublishMethod>(g_value_get_enum(value));
      break;
    case PROP_FORMAT:
      priv->format = static_cast<DetectionsFormat>(g_value_get_enum(value));
      break;
    case PROP_CAMERA_ID:
      priv->camera_id = string_of(value);
      break;
    case PROP_LOCATION:
      priv->location = string_of(value);
      break;
    case PROP_ADDRESS:
      mqtt.address = string_of(value);
      break;
    case PROP_TOPIC:
      mqtt.topic = string_of(value);
      break;
    case PROP_EVENTS_TOPIC:
      priv->events_topic = string_of(value);
      break;
    case PROP_CLIENT_ID:
      mqtt.client_id = string_of(value);
      break;
    case PROP_QOS:
      mqtt.qos = g_value_get_int(value);
      break;
    case PROP_TLS:
      mqtt.tls = g_value_get_boolean(value);
      break;
    case PROP_CA_FILE:
      mqtt.ca_file = string_of(value);
      break;
    case PROP_CERT_FILE:
      mqtt.cert_file = string_of(value);
      break;
    case PROP_KEY_FILE:
      mqtt.key_file = string_of(value);
      break;
    case PROP_USERNAME:
      mqtt.username = string_of(value);
      break;
    case PROP_PASSWORD:
      mqtt.password = string_of(value);
      break;
    case PROP_MAX_QUEUED:
      mqtt.max_queued = g_value_get_uint(value);
      break;
    case PROP_FLUSH_TIMEOUT:
      priv->flush_timeout_ms = g_value_get_uint(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_meta_publish_get_property(GObject *object, guint prop_id, GValue *value,
                                          GParamSpec *pspec) {
  GstMetaPublishPrivate *priv = GST_META_PUBLISH(object)->priv;
  std::lock_guard<std::mutex> guard(priv->lock);
  const MqttOptions &mqtt = priv->mqtt;
  const MqttStats stats = priv->publisher ? priv->publisher->stats() : MqttStats();
  switch (prop_id) {
    case PROP_METHOD:
      g_value_set_enum(value, static_cast<gint>(priv->method));
      break;
    case PROP_FORMAT:
      g_value_set_enum(value, static_cast<gint>(priv->format));
      break;
    case PROP_CAMERA_ID:
      g_value_set_string(value, priv->camera_id.c_str());
      break;
    case PROP_LOCATION:
      g_value_set_string(value, priv->location.c_str());
      break;
    case PROP_ADDRESS:
      g_value_set_string(value, mqtt.address.c_str());
      break;
    case PROP_TOPIC:
      g_value_set_string(value, mqtt.topic.c_str());
      break;
    case PROP_EVENTS_TOPIC:
      g_value_set_string(value, priv->events_topic.c_str());
      break;
    case PROP_CLIENT_ID:
      g_value_set_string(value, mqtt.client_id.c_str());
      break;
    case PROP_QOS:
      g_value_set_int(value, mqtt.qos);
      break;
    case PROP_TLS:
      g_value_set_boolean(value, mqtt.tls);
      break;
    case PROP_CA_FILE:
      g_value_set_string(value, mqtt.ca_file.c_str());
      break;
    case PROP_CERT_FILE:
      g_value_set_string(value, mqtt.cert_file.c_str());
      break;
    case PROP_KEY_FILE:
      g_value_set_string(value, mqtt.key_file.c_str());
      break;
    case PROP_USERNAME:
      g_value_set_string(value, mqtt.username.c_str());
      break;
    case PROP_PASSWORD:
      g_value_set_string(value, mqtt.password.c_str());
      break;
    case PROP_MAX_QUEUED:
      g_value_set_uint(value, static_cast<guint>(mqtt.max_queued));
      break;
    case PROP_FLUSH_TIMEOUT:
      g_value_set_uint(value, priv->flush_timeout_ms);
      break;
    case PROP_PUBLISHED:
      g_value_set_uint64(value, priv->publisher ? stats.published : priv->written.load());
      break;
    case PROP_DROPPED:
      g_value_set_uint64(value, stats.dropped);
      break;
    case PROP_QUEUED:
      g_value_set_uint64(value, stats.queued);
      break;
    case PROP_CONNECTED:
      g_value_set_boolean(value, stats.connected);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void post_element_message(GstMetaPublish *self, GstStructure *s) {
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), s));
}

/* Called from the publishing thread. */
static void on_mqtt_event(GstMetaPublish *self, guint max_queued, MqttEvent event,
                          const std::string &detail) {
  switch (event) {
    case MqttEvent::kConnected:
      GST_INFO_OBJECT(self, "connected to %s", detail.c_str());
      post_element_message(self, gst_structure_new("metapublish-connected", "uri", G_TYPE_STRING,
                                                   detail.c_str(), NULL));
      break;
    case MqttEvent::kConnectFailed:
      GST_ELEMENT_WARNING(self, RESOURCE, OPEN_WRITE, ("Cannot reach the MQTT broker"),
                          ("%s; retrying with back-off, keeping up to %u messages meanwhile",
                           detail.c_str(), max_queued));
      break;
    case MqttEvent::kConnectionLost:
      GST_WARNING_OBJECT(self, "lost the broker: %s", detail.c_str());
      post_element_message(self, gst_structure_new("metapublish-disconnected", "reason",
                                                   G_TYPE_STRING, detail.c_str(), NULL));
      break;
  }
}

static gboolean gst_meta_publish_start(GstBaseTransform *trans) {
  GstMetaPublish *self = GST_META_PUBLISH(trans);
  GstMetaPublishPrivate *priv = self->priv;
  std::string location;
  MqttOptions mqtt;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->running_method = priv->method;
    priv->running_format = priv->format;
    priv->running_camera_id = priv->camera_id;
    priv->running_events_topic =
        priv->events_topic.empty() ? priv->mqtt.topic + "/events" : priv->events_topic;
    location = priv->location;
    mqtt = priv->mqtt;
    priv->publisher.reset();
  }
  priv->stream.reset();
  priv->reported_dropped = 0;
  priv->reported_at_us = 0;
  priv->written = 0;
  if (priv->running_method == PublishMethod::kFile) {
    if (!priv->file.open(location)) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_WRITE,
                        ("Could not open \"%s\" for writing", location.c_str()),
                        ("%s", g_strerror(errno)));
      return FALSE;
    }
    return TRUE;
  }
  if (mqtt.client_id.empty()) {
    gchar *name = gst_object_get_name(GST_OBJECT(self));
    mqtt.client_id = "cudanms-" + std::to_string(getpid()) + "-" + name;
    g_free(name);
  }
  const guint max_queued = static_cast<guint>(mqtt.max_queued);
  auto publisher = std::make_unique<MqttPublisher>(
      mqtt, [self, max_queued](MqttEvent event, const std::string &detail) {
        on_mqtt_event(self, max_queued, event, detail);
      });
  std::string error;
  if (!publisher->start(&error)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Cannot publish to MQTT"), ("%s", error.c_str()));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "publishing to %s, topic %s", publisher->server_uri().c_str(),
                  mqtt.topic.c_str());
  std::lock_guard<std::mutex> guard(priv->lock);
  priv->publisher = std::move(publisher);
  return TRUE;
}

/* Drops since the last report, as an element message at most once a second (and at stop). */
static void report_drops(GstMetaPublish *self, bool now) {
  GstMetaPublishPrivate *priv = self->priv;
  if (!priv->publisher) return;
  const guint64 dropped = priv->publisher->stats().dropped;
  const gint64 time_us = g_get_monotonic_time();
  if (dropped == priv->reported_dropped ||
      (!now && time_us - priv->reported_at_us < G_USEC_PER_SEC))
    return;
  GST_WARNING_OBJECT(self, "dropped %" G_GUINT64_FORMAT " messages (%" G_GUINT64_FORMAT " in all)",
                     dropped - priv->reported_dropped, dropped);
  post_element_message(
      self, gst_structure_new("metapublish-dropped", "dropped", G_TYPE_UINT64, dropped, "new",
                              G_TYPE_UINT64, dropped - priv->reported_dropped, NULL));
  priv->reported_dropped = dropped;
  priv->reported_at_us = time_us;
}

static gboolean gst_meta_publish_stop(GstBaseTransform *trans) {
  GstMetaPublish *self = GST_META_PUBLISH(trans);
  GstMetaPublishPrivate *priv = self->priv;
  if (priv->running_method == PublishMethod::kFile) {
    if (!priv->file.close()) {
      GST_ELEMENT_ERROR(self, RESOURCE, CLOSE,
                        ("Could not close \"%s\"", priv->file.name().c_str()),
                        ("%s", g_strerror(errno)));
      return FALSE;
    }
    return TRUE;
  }
  guint flush_ms;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    flush_ms = priv->flush_timeout_ms;
  }
  /* The publisher stays (stopped) so that its counts remain readable until the next start. */
  if (priv->publisher) {
    priv->publisher->stop(std::chrono::milliseconds(flush_ms));
    report_drops(self, true);
    const MqttStats stats = priv->publisher->stats();
    GST_INFO_OBJECT(self, "published %" G_GUINT64_FORMAT ", dropped %" G_GUINT64_FORMAT,
                    stats.published, stats.dropped);
  }
  return TRUE;
}

static gboolean gst_meta_publish_set_caps(GstBaseTransform *trans, GstCaps *incaps,
                                          GstCaps *outcaps) {
  (void)outcaps;
  GST_META_PUBLISH(trans)->priv->stream.on_caps(incaps);
  return TRUE;
}

static gboolean gst_meta_publish_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GST_META_PUBLISH(trans)->priv->stream.on_event(event);
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static GstFlowReturn gst_meta_publish_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstMetaPublish *self = GST_META_PUBLISH(trans);
  GstMetaPublishPrivate *priv = self->priv;
  gsize length = 0;
  gchar *text = priv->stream.encode(GST_OBJECT(self), buf, priv->running_format,
                                    priv->running_camera_id, &trans->segment, &length);
  if (priv->running_method == PublishMethod::kFile) {
    const bool ok = priv->file.write_line(text, length);
    g_free(text);
    if (!ok) {
      GST_ELEMENT_ERROR(self, RESOURCE, WRITE, ("Could not write to %s", priv->file.name().c_str()),
                        ("%s", g_strerror(errno)));
      return GST_FLOW_ERROR;
    }
    priv->written++;
    return GST_FLOW_OK;
  }
  priv->publisher->push(std::string(text, length));
  g_free(text);
  for (std::string &event : priv->stream.encode_events(buf, priv->running_camera_id))
    priv->publisher->push(priv->running_events_topic, std::move(event));
  report_drops(self, false);
  return GST_FLOW_OK;
}
