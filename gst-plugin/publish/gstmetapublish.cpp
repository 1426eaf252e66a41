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
#include "elementclass.h"
#include "linesfile.h"
#include "metapublishproperties.h"
#include "mqttpublisher.h"

GST_DEBUG_CATEGORY_STATIC(gst_meta_publish_debug);
#define GST_CAT_DEFAULT gst_meta_publish_debug

struct GstMetaPublishPrivate {
  std::mutex lock; /* guards the settings */
  MetaPublishSettings settings;

  /* Streaming thread (and start/stop) only. */
  PublishMethod running_method = PublishMethod::kFile;
  DetectionsFormat running_format = DetectionsFormat::kCudanms;
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

ELEMENT_DEFINE(GstMetaPublish, gst_meta_publish, GstBaseTransform, GST_TYPE_BASE_TRANSFORM,
               metapublish, "Detection metadata publisher (MQTT, file)");

/* The read-only counts: the publisher's, or the lines written to the file. */
static void gst_meta_publish_install_counts(GObjectClass *klass) {
  using Private = GstMetaPublishPrivate;
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  auto stats = [](const Private &priv) {
    return priv.publisher ? priv.publisher->stats() : MqttStats();
  };
  PropertyTable<Private>(klass, locked_private<GstMetaPublish>)
      .read_only(g_param_spec_uint64("published", "Published",
                                     "Messages published (MQTT) or lines written (file)", 0,
                                     G_MAXUINT64, 0, ro),
                 [stats](const Private &priv, GValue *value) {
                   g_value_set_uint64(value,
                                      priv.publisher ? stats(priv).published : priv.written.load());
                 })
      .read_only(
          g_param_spec_uint64("dropped", "Dropped", "Messages dropped: queue full, or left at stop",
                              0, G_MAXUINT64, 0, ro),
          [stats](const Private &priv, GValue *value) {
            g_value_set_uint64(value, stats(priv).dropped);
          })
      .read_only(g_param_spec_uint64("queued", "Queued", "Messages waiting for the broker", 0,
                                     G_MAXUINT64, 0, ro),
                 [stats](const Private &priv, GValue *value) {
                   g_value_set_uint64(value, stats(priv).queued);
                 })
      .read_only(
          g_param_spec_boolean("connected", "Connected", "Connected to the broker now", FALSE, ro),
          [stats](const Private &priv, GValue *value) {
            g_value_set_boolean(value, stats(priv).connected);
          });
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
    priv->running_method = priv->settings.method;
    priv->running_format = priv->settings.format;
    priv->running_camera_id = priv->settings.camera_id;
    priv->running_events_topic = priv->settings.events_topic.empty()
                                     ? priv->settings.mqtt.topic + "/events"
                                     : priv->settings.events_topic;
    location = priv->settings.location;
    mqtt = priv->settings.mqtt;
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
    flush_ms = priv->settings.flush_timeout_ms;
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

static gboolean gst_meta_publish_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GST_META_PUBLISH(trans)->priv->stream.on_event(event);
  return GST_BASE_TRANSFORM_CLASS(gst_meta_publish_parent_class)->sink_event(trans, event);
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

static void gst_meta_publish_class_init(GstMetaPublishClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  own_private<GstMetaPublish>(klass);
  gst_meta_publish_install_properties(
      gobject_class, locked_member<GstMetaPublish, &GstMetaPublishPrivate::settings>);
  gst_meta_publish_install_counts(gobject_class);

  describe_element(
      klass, "Detection metadata publisher", "Sink/Metadata/Video",
      "Publishes each frame's detections as JSON to an MQTT broker or a file, in cudanms's or DL "
      "Streamer gvametaconvert's format, passing the frames on untouched",
      "video/x-raw(ANY)");

  ELEMENT_VFUNCS(trans_class, gst_meta_publish, start, stop, sink_event, transform_ip);
  transform_reads_only(trans_class);
}
