#include "metapublishproperties.h"

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

namespace {

const GParamFlags kReadWriteReady =
    static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);

GParamSpec *text(const char *name, const char *nick, const char *blurb, const char *default_value) {
  return g_param_spec_string(name, nick, blurb, default_value, kReadWriteReady);
}

/* Where the messages go and what they say. */
void install_destination(GObjectClass *klass,
                         PropertyTable<MetaPublishSettings>::StateOf settings_of) {
  const GParamFlags rw = kReadWriteReady;
  PropertyTable<MetaPublishSettings>(klass, settings_of)
      .field(g_param_spec_enum("method", "Method", "Where the messages go",
                               GST_TYPE_META_PUBLISH_METHOD, static_cast<gint>(DEFAULT_METHOD), rw),
             &MetaPublishSettings::method)
      .field(g_param_spec_enum("format", "Format",
                               "The messages' JSON: cudanms's own or DL Streamer gvametaconvert's",
                               GST_TYPE_DETECTIONS_FORMAT, static_cast<gint>(DEFAULT_FORMAT), rw),
             &MetaPublishSettings::format)
      .field(text("camera-id", "Camera id",
                  "Names the stream in every message (\"source\"); empty leaves it out", ""),
             &MetaPublishSettings::camera_id)
      .field(
          text("location", "Location",
               "method=file: the file (replaced at start); empty or '-': stdout", DEFAULT_LOCATION),
          &MetaPublishSettings::location)
      .field(
          text("address", "Address", "method=mqtt: the broker, host:port or a URI (tcp://, ssl://)",
               DEFAULT_ADDRESS),
          [](auto &s) -> auto & { return s.mqtt.address; })
      .field(
          text("topic", "Topic", "method=mqtt: the topic", DEFAULT_TOPIC),
          [](auto &s) -> auto & { return s.mqtt.topic; })
      .field(text("events-topic", "Events topic",
                  "method=mqtt: each counting event (boxcount) as a message of its own to this "
                  "topic; empty: TOPIC/events",
                  ""),
             &MetaPublishSettings::events_topic)
      .field(
          text("client-id", "Client id",
               "method=mqtt: the MQTT client id; empty: cudanms-<pid>-<element name>", ""),
          [](auto &s) -> auto & { return s.mqtt.client_id; })
      .field(
          g_param_spec_int("qos", "QoS",
                           "method=mqtt: 0 (at most once) or 1 (at least once: each message "
                           "counts as published when the broker acknowledged it)",
                           0, 1, DEFAULT_QOS, rw),
          [](auto &s) -> auto & { return s.mqtt.qos; });
}

/* The broker's TLS and credentials. */
void install_security(GObjectClass *klass,
                      PropertyTable<MetaPublishSettings>::StateOf settings_of) {
  const GParamFlags rw = kReadWriteReady;
  PropertyTable<MetaPublishSettings>(klass, settings_of)
      .field(
          g_param_spec_boolean("tls", "TLS", "method=mqtt: connect with TLS (ssl://)", FALSE, rw),
          [](auto &s) -> auto & { return s.mqtt.tls; })
      .field(
          text("ca-file", "CA file", "method=mqtt, TLS: PEM file of the certificates to trust", ""),
          [](auto &s) -> auto & { return s.mqtt.ca_file; })
      .field(
          text("cert-file", "Certificate file",
               "method=mqtt, TLS: PEM file of the client's certificate", ""),
          [](auto &s) -> auto & { return s.mqtt.cert_file; })
      .field(
          text("key-file", "Key file", "method=mqtt, TLS: PEM file of the client's private key",
               ""),
          [](auto &s) -> auto & { return s.mqtt.key_file; })
      .field(
          text("username", "User name", "method=mqtt: user name for the broker", ""),
          [](auto &s) -> auto & { return s.mqtt.username; })
      .field(
          text("password", "Password", "method=mqtt: password for the broker", ""),
          [](auto &s) -> auto & { return s.mqtt.password; });
}

/* What the queue holds while the broker is away, and how long it drains at the end. */
void install_queue(GObjectClass *klass, PropertyTable<MetaPublishSettings>::StateOf settings_of) {
  const GParamFlags rw = kReadWriteReady;
  PropertyTable<MetaPublishSettings>(klass, settings_of)
      .field(
          g_param_spec_uint("max-queued", "Max queued",
                            "method=mqtt: messages kept while the broker is slow or away; past "
                            "it the oldest is dropped and counted",
                            1, G_MAXINT, DEFAULT_MAX_QUEUED, rw),
          [](auto &s) -> auto & { return s.mqtt.max_queued; })
      .field(g_param_spec_uint("flush-timeout", "Flush timeout",
                               "method=mqtt: milliseconds the queue gets to drain when the element "
                               "stops; what is left is counted as dropped",
                               0, G_MAXINT, DEFAULT_FLUSH_TIMEOUT_MS, rw),
             &MetaPublishSettings::flush_timeout_ms);
}

}  // namespace

void gst_meta_publish_install_properties(GObjectClass *klass,
                                         PropertyTable<MetaPublishSettings>::StateOf settings_of) {
  install_destination(klass, settings_of);
  install_security(klass, settings_of);
  install_queue(klass, settings_of);

  gst_type_mark_as_plugin_api(GST_TYPE_META_PUBLISH_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_DETECTIONS_FORMAT, static_cast<GstPluginAPIFlags>(0));
}
