/* metapublish's properties: where the messages go and how (MetaPublishSettings), and what it
 * counted (read-only). */
#pragma once

#include <gst/gst.h>

#include <string>

#include "detectionsjson.h"
#include "mqttpublisher.h"

enum class PublishMethod { kFile, kMqtt };

/* What the settable properties say; the element keeps them under its lock. */
struct MetaPublishSettings {
  PublishMethod method = PublishMethod::kFile;
  DetectionsFormat format = DetectionsFormat::kCudanms;
  std::string camera_id;
  std::string location;
  std::string events_topic; /* "": the topic's /events */
  MqttOptions mqtt;
  guint flush_timeout_ms;

  MetaPublishSettings(); /* the properties' defaults */
};

/* The read-only properties' values now. */
struct MetaPublishCounts {
  guint64 published = 0, dropped = 0, queued = 0;
  bool connected = false;
};

/* Installs the properties on @klass; set and get answer them, FALSE for an id they do not
 * know. */
void gst_meta_publish_install_properties(GObjectClass *klass);
bool gst_meta_publish_set_setting(MetaPublishSettings *settings, guint prop_id,
                                  const GValue *value);
bool gst_meta_publish_get_setting(const MetaPublishSettings &settings,
                                  const MetaPublishCounts &counts, guint prop_id, GValue *value);
