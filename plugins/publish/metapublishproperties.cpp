#include "metapublishproperties.h"

#include "detectorproperties.h"

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

MetaPublishSettings::MetaPublishSettings() : flush_timeout_ms(DEFAULT_FLUSH_TIMEOUT_MS) {
  mqtt.address = DEFAULT_ADDRESS;
  mqtt.topic = DEFAULT_TOPIC;
  mqtt.qos = DEFAULT_QOS;
  mqtt.max_queued = DEFAULT_MAX_QUEUED;
}

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

void gst_meta_publish_install_properties(GObjectClass *klass) {
  g_object_class_install_property(
      klass, PROP_METHOD,
      g_param_spec_enum("method", "Method", "Where the messages go", GST_TYPE_META_PUBLISH_METHOD,
                        static_cast<gint>(DEFAULT_METHOD), settable()));
  g_object_class_install_property(
      klass, PROP_FORMAT,
      g_param_spec_enum("format", "Format",
                        "The messages' JSON: cudanms's own or DL Streamer gvametaconvert's",
                        GST_TYPE_DETECTIONS_FORMAT, static_cast<gint>(DEFAULT_FORMAT), settable()));
  install_string(klass, PROP_CAMERA_ID, "camera-id", "Camera id",
                 "Names the stream in every message (\"source\"); empty leaves it out", "");
  install_string(klass, PROP_LOCATION, "location", "Location",
                 "method=file: the file (replaced at start); empty or '-': stdout",
                 DEFAULT_LOCATION);
  install_string(klass, PROP_ADDRESS, "address", "Address",
                 "method=mqtt: the broker, host:port or a URI (tcp://, ssl://)", DEFAULT_ADDRESS);
  install_string(klass, PROP_TOPIC, "topic", "Topic", "method=mqtt: the topic", DEFAULT_TOPIC);
  install_string(klass, PROP_EVENTS_TOPIC, "events-topic", "Events topic",
                 "method=mqtt: each counting event (boxcount) as a message of its own to this "
                 "topic; empty: TOPIC/events",
                 "");
  install_string(klass, PROP_CLIENT_ID, "client-id", "Client id",
                 "method=mqtt: the MQTT client id; empty: cudanms-<pid>-<element name>", "");
  g_object_class_install_property(
      klass, PROP_QOS,
      g_param_spec_int("qos", "QoS",
                       "method=mqtt: 0 (at most once) or 1 (at least once: each message counts "
                       "as published when the broker acknowledged it)",
                       0, 1, DEFAULT_QOS, settable()));
  g_object_class_install_property(
      klass, PROP_TLS,
      g_param_spec_boolean("tls", "TLS", "method=mqtt: connect with TLS (ssl://)", FALSE,
                           settable()));
  install_string(klass, PROP_CA_FILE, "ca-file", "CA file",
                 "method=mqtt, TLS: PEM file of the certificates to trust", "");
  install_string(klass, PROP_CERT_FILE, "cert-file", "Certificate file",
                 "method=mqtt, TLS: PEM file of the client's certificate", "");
  install_string(klass, PROP_KEY_FILE, "key-file", "Key file",
                 "method=mqtt, TLS: PEM file of the client's private key", "");
  install_string(klass, PROP_USERNAME, "username", "User name",
                 "method=mqtt: user name for the broker", "");
  install_string(klass, PROP_PASSWORD, "password", "Password",
                 "method=mqtt: password for the broker", "");
  g_object_class_install_property(
      klass, PROP_MAX_QUEUED,
      g_param_spec_uint("max-queued", "Max queued",
                        "method=mqtt: messages kept while the broker is slow or away; past "
                        "it the oldest is dropped and counted",
                        1, G_MAXINT, DEFAULT_MAX_QUEUED, settable()));
  g_object_class_install_property(
      klass, PROP_FLUSH_TIMEOUT,
      g_param_spec_uint("flush-timeout", "Flush timeout",
                        "method=mqtt: milliseconds the queue gets to drain when the element "
                        "stops; what is left is counted as dropped",
                        0, G_MAXINT, DEFAULT_FLUSH_TIMEOUT_MS, settable()));
  g_object_class_install_property(
      klass, PROP_PUBLISHED,
      g_param_spec_uint64("published", "Published",
                          "Messages published (MQTT) or lines written (file)", 0, G_MAXUINT64, 0,
                          readable()));
  g_object_class_install_property(
      klass, PROP_DROPPED,
      g_param_spec_uint64("dropped", "Dropped", "Messages dropped: queue full, or left at stop", 0,
                          G_MAXUINT64, 0, readable()));
  g_object_class_install_property(
      klass, PROP_QUEUED,
      g_param_spec_uint64("queued", "Queued", "Messages waiting for the broker", 0, G_MAXUINT64, 0,
                          readable()));
  g_object_class_install_property(
      klass, PROP_CONNECTED,
      g_param_spec_boolean("connected", "Connected", "Connected to the broker now", FALSE,
                           readable()));

  gst_type_mark_as_plugin_api(GST_TYPE_META_PUBLISH_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_DETECTIONS_FORMAT, static_cast<GstPluginAPIFlags>(0));
}

bool gst_meta_publish_set_setting(MetaPublishSettings *s, guint prop_id, const GValue *value) {
  MqttOptions &mqtt = s->mqtt;
  switch (prop_id) {
    case PROP_METHOD:
      s->method = static_cast<PublishMethod>(g_value_get_enum(value));
      break;
    case PROP_FORMAT:
      s->format = static_cast<DetectionsFormat>(g_value_get_enum(value));
      break;
    case PROP_CAMERA_ID:
      s->camera_id = string_value(value);
      break;
    case PROP_LOCATION:
      s->location = string_value(value);
      break;
    case PROP_ADDRESS:
      mqtt.address = string_value(value);
      break;
    case PROP_TOPIC:
      mqtt.topic = string_value(value);
      break;
    case PROP_EVENTS_TOPIC:
      s->events_topic = string_value(value);
      break;
    case PROP_CLIENT_ID:
      mqtt.client_id = string_value(value);
      break;
    case PROP_QOS:
      mqtt.qos = g_value_get_int(value);
      break;
    case PROP_TLS:
      mqtt.tls = g_value_get_boolean(value);
      break;
    case PROP_CA_FILE:
      mqtt.ca_file = string_value(value);
      break;
    case PROP_CERT_FILE:
      mqtt.cert_file = string_value(value);
      break;
    case PROP_KEY_FILE:
      mqtt.key_file = string_value(value);
      break;
    case PROP_USERNAME:
      mqtt.username = string_value(value);
      break;
    case PROP_PASSWORD:
      mqtt.password = string_value(value);
      break;
    case PROP_MAX_QUEUED:
      mqtt.max_queued = g_value_get_uint(value);
      break;
    case PROP_FLUSH_TIMEOUT:
      s->flush_timeout_ms = g_value_get_uint(value);
      break;
    default:
      return false;
  }
  return true;
}

bool gst_meta_publish_get_setting(const MetaPublishSettings &s, const MetaPublishCounts &counts,
                                  guint prop_id, GValue *value) {
  const MqttOptions &mqtt = s.mqtt;
  switch (prop_id) {
    case PROP_METHOD:
      g_value_set_enum(value, static_cast<gint>(s.method));
      break;
    case PROP_FORMAT:
      g_value_set_enum(value, static_cast<gint>(s.format));
      break;
    case PROP_CAMERA_ID:
      g_value_set_string(value, s.camera_id.c_str());
      break;
    case PROP_LOCATION:
      g_value_set_string(value, s.location.c_str());
      break;
    case PROP_ADDRESS:
      g_value_set_string(value, mqtt.address.c_str());
      break;
    case PROP_TOPIC:
      g_value_set_string(value, mqtt.topic.c_str());
      break;
    case PROP_EVENTS_TOPIC:
      g_value_set_string(value, s.events_topic.c_str());
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
      g_value_set_uint(value, s.flush_timeout_ms);
      break;
    case PROP_PUBLISHED:
      g_value_set_uint64(value, counts.published);
      break;
    case PROP_DROPPED:
      g_value_set_uint64(value, counts.dropped);
      break;
    case PROP_QUEUED:
      g_value_set_uint64(value, counts.queued);
      break;
    case PROP_CONNECTED:
      g_value_set_boolean(value, counts.connected);
      break;
    default:
      return false;
  }
  return true;
}
