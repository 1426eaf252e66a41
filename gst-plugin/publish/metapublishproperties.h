/* metapublish's settable properties: where the messages go and how (MetaPublishSettings). */
#pragma once

#include <gst/gst.h>

#include <string>

#include "detectionsjson.h"
#include "mqttpublisher.h"
#include "propertytable.h"

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

/* Installs the settings' properties on @klass (the element answers for what it counted). */
void gst_meta_publish_install_properties(GObjectClass *klass,
                                         PropertyTable<MetaPublishSettings>::StateOf settings_of);
