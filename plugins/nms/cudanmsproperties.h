/* The cudanms element's properties: their specs, and the values of the settable ones with what a
 * value that could not be used left behind. The element holds its lock around every call. */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

#include "backend.h"
#include "cudanms/nms.h"
#include "cudanmslabels.h"

enum {
  PROP_0,
  PROP_IOU_THRESHOLD,
  PROP_OVERLAP,
  PROP_METHOD,
  PROP_SCORE_THRESHOLD,
  PROP_MAX_CANDIDATES,
  PROP_MAX_DETECTIONS,
  PROP_CLASS_AGNOSTIC,
  PROP_CLASS_GROUPS,
  PROP_SOFT_DECAY,
  PROP_SIGMA,
  PROP_MIN_NEIGHBORS,
  PROP_GROUP_EPS,
  PROP_BACKEND,
  PROP_GPU_ID,
  PROP_BATCH_STREAMS,
  PROP_KEEP_CANDIDATES,
  PROP_STATS_INTERVAL,
  PROP_TIME_GPU,
  PROP_LABELS,
  PROP_LABELS_FILE,
  /* Read-only: the element's totals. */
  PROP_FRAMES,
  PROP_CANDIDATES_TOTAL,
  PROP_DETECTIONS_TOTAL,
  PROP_LAST_LATENCY_US,
};

/* What the settable properties say; copied under the lock at the top of each frame. */
struct Settings {
  double iou_threshold = 0.5;
  cudanms::Overlap overlap = cudanms::Overlap::kIoU;
  cudanms::Method method = cudanms::Method::kGreedy;
  double score_threshold = 0.0;
  // Set by the user: method=group applies it then only (groupRectangles looks at no score).
  bool score_threshold_set = false;
  guint max_candidates = 4096;
  guint max_detections = 0;
  bool class_agnostic = false;
  std::vector<std::vector<int32_t>> class_groups;
  cudanms::SoftDecay soft_decay = cudanms::SoftDecay::kGaussian;
  double sigma = 0.5;
  guint min_neighbors = 0;
  double group_eps = 0.2;
  GstCudaNmsBackend backend = GST_CUDA_NMS_BACKEND_AUTO;
  int gpu_id = 0;
  bool batch_streams = false;
  bool keep_candidates = false;
  guint stats_interval = 0;
  bool time_gpu = false;
  ClassLabels::Table labels;      /* from labels or labels-file, whichever was set last */
  guint64 backend_generation = 0; /* bumped when the NMS context must be made again */

  cudanms::Params params() const;
};

struct CudaNmsProperties {
  Settings settings;
  std::string labels_text;
  std::string labels_file;
  std::string labels_file_error; /* why labels-file could not be read; empty: it could */
  std::string class_groups_text;
  std::string class_groups_error; /* why class-groups is not valid; empty: it is */

  /* Installs every property of the element, the read-only ones included, on @klass. */
  static void install(GObjectClass *klass);

  /* Sets or gets a settable property; FALSE when @prop_id is not one. A labels-file that cannot
   * be read, or class-groups that are not valid, leave the settings as they were and say why in
   * labels_file_error or class_groups_error. */
  bool set(guint prop_id, const GValue *value);
  bool get(guint prop_id, GValue *value) const;
};
