/* dnndetect's own properties (the shared ones are GstCudaNmsDetector's): what the network is and
 * how its input is made and batched, and the counters it reads back. */
#pragma once

#include <cudanms/dnn.h>
#include <gst/gst.h>

#include <string>

#include "gstcudanmsdetector.h"

typedef enum {
  GST_DNN_DETECT_DECODER_BLAZEFACE,
  GST_DNN_DETECT_DECODER_YOLO,
} GstDnnDetectDecoder;

/* What its own properties say, from the base's copy of them. */
struct DnnDetectSettings {
  std::string model;
  GstDnnDetectDecoder decoder;
  int input_width, input_height;
  bool letterbox;
  std::string mean, scale;
  bool cuda_graphs;
  int batch_size;
  guint batch_timeout;
  std::string batch_group;

  explicit DnnDetectSettings(const GstCudaNmsDetectorValues &own);

  /* The network's input: the decoder's own unless set; false (and *why) for a bad mean or
   * scale. */
  bool input_spec(cudanms::dnn::InputSpec *spec, std::string *why) const;
  /* The model property, or where the README's set-up keeps the converted BlazeFace model. */
  std::string model_path() const;
};

/* Since start: frames, the sum over frames of the frames in their forward, those replaying a CUDA
 * graph and those upstream wrote into the pinned memory the element proposed. */
struct DnnDetectCounters {
  guint64 frames = 0, batched_frames = 0, graphed_frames = 0, frames_in_pinned_memory = 0;
};

/* Installs the properties on @klass (the base keeps their values); gst_dnn_detect_get_counter
 * answers the read-only ones, FALSE for an id that is not one of them. */
void gst_dnn_detect_install_properties(GObjectClass *klass);
bool gst_dnn_detect_get_counter(const DnnDetectCounters &counters, guint prop_id, GValue *value);
