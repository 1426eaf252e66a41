/* dnndetect's own properties (the shared ones are GstCudaNmsDetector's): what the network is and
 * how its input is made and batched, and the counters it reads back. */
#pragma once

#include <cudanms/dnn.h>
#include <gst/gst.h>

#include <string>

#include "gstcudanmsdetector.h"
#include "propertytable.h"

typedef enum {
  GST_DNN_DETECT_DECODER_BLAZEFACE,
  GST_DNN_DETECT_DECODER_YOLO,
} GstDnnDetectDecoder;

/* What its own properties say (guarded by the base's lock). */
struct DnnDetectSettings {
  GstDnnDetectDecoder decoder = GST_DNN_DETECT_DECODER_BLAZEFACE;
  int input_width = 0, input_height = 0;
  bool letterbox = true;
  std::string mean, scale;
  bool cuda_graphs = true;
  int batch_size = 1;
  guint batch_timeout = 20000;
  std::string batch_group;

  /* The network's input: the decoder's own unless set; false (and *why) for a bad mean or
   * scale. */
  bool input_spec(cudanms::dnn::InputSpec *spec, std::string *why) const;
  /* @model (the shared property), or where the README's set-up keeps the converted BlazeFace
   * model. */
  std::string model_path(const std::string &model) const;
};

/* Since start: frames, the sum over frames of the frames in their forward, those replaying a CUDA
 * graph and those upstream wrote into the pinned memory the element proposed. */
struct DnnDetectCounters {
  guint64 frames = 0, batched_frames = 0, graphed_frames = 0, frames_in_pinned_memory = 0;
};

/* Installs its own properties on @klass: the settings, and the counters read-only. */
void gst_dnn_detect_install_properties(GObjectClass *klass,
                                       PropertyTable<DnnDetectSettings>::StateOf settings_of,
                                       PropertyTable<DnnDetectCounters>::StateOf counters_of);
/* The shared "model" property's blurb, which names the default model's place. */
const gchar *gst_dnn_detect_model_blurb();
