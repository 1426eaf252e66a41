/**
 * SECTION:element-cudanms
 * @title: cudanms
 *
 * Non-maximum suppression of a frame's candidate windows, on a CUDA GPU or on the CPU.
 *
 * Candidates come from a #GstCudaNmsCandidatesMeta (all of a frame's windows in packed arrays)
 * and/or #GstVideoRegionOfInterestMeta (score and class from a "detection" param structure,
 * the Intel DL Streamer convention; without one, score 1.0 and a class from the roi_type). The
 * element holds no NMS arithmetic: it clips the boxes to the frame and hands them to the
 * cudanms library (kernels/). The kept boxes leave as a #GstCudaNmsResultMeta, with the frame's
 * counts and the NMS latency, and as one #GstVideoRegionOfInterestMeta per kept box.
 *
 * The element never maps the frame, so it takes video in system memory or in CUDA memory.
 * Candidates a GPU detector left in device memory (cudacascade) are used in place when they live
 * in the element's CUDA context, the pipeline's GstCudaContext it shares the GStreamer way: only
 * the kept boxes reach the host. Other device candidates are downloaded once.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 ... ! cvdetect ! cudanms iou-threshold=0.45 method=greedy ! boxoverlay ! ...
 * ]|
 */
#include "gstcudanms.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <mutex>

#include "cudanmscontexts.h"
#include "cudanmsintake.h"
#include "cudanmslabels.h"
#include "cudanmsoutput.h"
#include "cudanmsproperties.h"
#include "cudanmsstats.h"
#include "elementclass.h"

GST_DEBUG_CATEGORY(gst_cuda_nms_debug); /* also the helper files' */
#define GST_CAT_DEFAULT gst_cuda_nms_debug

namespace {

bool default_cuda_available(std::string *why) { return cudanms::cuda_available(why); }

GstCudaNmsBackendHooks default_hooks() {
  return {default_cuda_available, cudanms::Context::create};
}

std::mutex hooks_lock;
GstCudaNmsBackendHooks hooks = default_hooks();

GstCudaNmsBackendHooks current_hooks() {
  std::lock_guard<std::mutex> guard(hooks_lock);
  return hooks;
}

/* The read-only properties. */
struct Totals {
  guint64 frames = 0;
  guint64 candidates = 0;
  guint64 detections = 0;
  double last_latency_us = 0.0;
};

}  // namespace

struct GstCudaNmsPrivate {
  std::mutex lock; /* guards properties and totals */
  CudaNmsProperties properties;
  Totals totals;

  /* Streaming thread (and start/stop, which never run concurrently with it) only. */
  ElementNms nms{current_hooks()};
  int width = 0; /* frame size from the caps; 0: unknown, no clipping */
  int height = 0;
  CandidateIntake intake;
  ClassLabels labels;
  FrameStats stats;
};

ELEMENT_DEFINE(GstCudaNms, gst_cuda_nms, GstBaseTransform, GST_TYPE_BASE_TRANSFORM, cudanms,
               "cudanms non-maximum suppression element");

/* Before start, start() makes a bad labels-file or class-groups an error; while running, the old
 * values stay, and say so. Posted with the lock released. */
static void gst_cuda_nms_property_changed(GObject *object, GParamSpec *pspec) {
  GstCudaNms *self = GST_CUDA_NMS(object);
  if (GST_STATE(self) <= GST_STATE_READY) return;
  std::string unreadable_labels, invalid_groups;
  {
    std::lock_guard<std::mutex> guard(self->priv->lock);
    if (g_str_equal(pspec->name, "labels-file"))
      unreadable_labels = self->priv->properties.labels_file_error;
    if (g_str_equal(pspec->name, "class-groups"))
      invalid_groups = self->priv->properties.class_groups_error;
  }
  if (!unreadable_labels.empty()) {
    GST_ELEMENT_WARNING(self, RESOURCE, OPEN_READ,
                        ("Could not read labels-file: the labels stay as they were"),
                        ("%s", unreadable_labels.c_str()));
  }
  if (!invalid_groups.empty()) {
    GST_ELEMENT_WARNING(self, LIBRARY, SETTINGS,
                        ("Invalid class-groups: the groups stay as they were"),
                        ("%s", invalid_groups.c_str()));
  }
}

static void gst_cuda_nms_install_totals(GObjectClass *klass) {
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  auto count = [ro](const char *name, const char *nick, const char *blurb) {
    return g_param_spec_uint64(name, nick, blurb, 0, G_MAXUINT64, 0, ro);
  };
  PropertyTable<GstCudaNmsPrivate>(klass, locked_private<GstCudaNms>)
      .field(
          count("frames", "Frames", "Frames processed since the element started"),
          [](auto &p) -> auto & { return p.totals.frames; })
      .field(
          count("candidates-total", "Candidates total",
                "Candidates received since the element started"),
          [](auto &p) -> auto & { return p.totals.candidates; })
      .field(
          count("detections-total", "Detections total", "Boxes kept since the element started"),
          [](auto &p) -> auto & { return p.totals.detections; })
      .field(
          g_param_spec_double("last-latency-us", "Last latency",
                              "Wall time of the last frame's NMS call, in microseconds", 0.0,
                              G_MAXDOUBLE, 0.0, ro),
          [](auto &p) -> auto & { return p.totals.last_latency_us; });
}

static gboolean gst_cuda_nms_start(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstCudaNmsPrivate *priv = self->priv;
  CudaNmsProperties p;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->totals = Totals();
    p = priv->properties;
  }
  if (!p.class_groups_error.empty()) {
    GST_ELEMENT_ERROR(self, LIBRARY, SETTINGS,
                      ("Invalid class-groups \"%s\"", p.class_groups_text.c_str()),
                      ("%s", p.class_groups_error.c_str()));
    return FALSE;
  }
  if (!p.labels_file_error.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                      ("Could not read labels-file \"%s\"", p.labels_file.c_str()),
                      ("%s", p.labels_file_error.c_str()));
    return FALSE;
  }
  priv->nms.reset(false);
  priv->stats.reset();
  priv->width = priv->height = 0;
  priv->intake.set_frame_size(0, 0);
  return priv->nms.ensure(GST_ELEMENT(self), p.settings);
}

static gboolean gst_cuda_nms_stop(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  self->priv->nms.reset(true);
  self->priv->labels.forget_announced();
  return TRUE;
}

/* The pipeline's CUDA context, handed over by the application or a neighbour... */
static void gst_cuda_nms_set_context(GstElement *element, GstContext *context) {
  GstCudaNms *self = GST_CUDA_NMS(element);
  int gpu_id;
  {
    std::lock_guard<std::mutex> guard(self->priv->lock);
    gpu_id = self->priv->properties.settings.gpu_id;
  }
  self->priv->nms.cuda().set_context(element, context, gpu_id);
  GST_ELEMENT_CLASS(gst_cuda_nms_parent_class)->set_context(element, context);
}

/* ...and shared with neighbours asking for it. */
static gboolean gst_cuda_nms_query(GstBaseTransform *trans, GstPadDirection direction,
                                   GstQuery *query) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  if (self->priv->nms.cuda().handle_query(GST_ELEMENT(self), query)) return TRUE;
  return GST_BASE_TRANSFORM_CLASS(gst_cuda_nms_parent_class)->query(trans, direction, query);
}

/* Label announcements of the detector upstream: remembered, and passed on. */
static gboolean gst_cuda_nms_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  if (self->priv->labels.learn(event))
    GST_DEBUG_OBJECT(self, "label event %" GST_PTR_FORMAT, event);
  return GST_BASE_TRANSFORM_CLASS(gst_cuda_nms_parent_class)->sink_event(trans, event);
}

static gboolean gst_cuda_nms_set_caps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstVideoInfo info;
  (void)outcaps;
  if (gst_video_info_from_caps(&info, incaps) && GST_VIDEO_INFO_WIDTH(&info) > 0 &&
      GST_VIDEO_INFO_HEIGHT(&info) > 0) {
    self->priv->width = GST_VIDEO_INFO_WIDTH(&info);
    self->priv->height = GST_VIDEO_INFO_HEIGHT(&info);
  } else {
    GST_INFO_OBJECT(self, "no frame size in %" GST_PTR_FORMAT ": boxes are not clipped", incaps);
    self->priv->width = self->priv->height = 0;
  }
  self->priv->intake.set_frame_size(self->priv->width, self->priv->height);
  return TRUE;
}

static GstFlowReturn gst_cuda_nms_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstCudaNmsPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->properties.settings;
  }

  /* GstBaseTransform hands an in-place, non-passthrough element a writable buffer; were it not,
   * every meta added below would be lost, so refuse loudly rather than silently. */
  if (!gst_buffer_is_writable(buf)) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Buffer is not writable"), (NULL));
    return GST_FLOW_ERROR;
  }
  if (!priv->nms.ensure(GST_ELEMENT(self), s)) return GST_FLOW_ERROR;

  gint64 latency_ns = 0;
  cudanms::CandidatesView view;
  cudanms::DeviceCandidatesView device;
  cudanms::Result &r = priv->nms.result();
  if (!priv->intake.device_view(buf, priv->nms.cuda_context(), &device) ||
      !priv->nms.run_in_place(GST_ELEMENT(self), s, device, &view, &latency_ns)) {
    std::string error;
    if (!priv->intake.map_all(buf, &error)) {
      GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read the device candidates"),
                        ("%s", error.c_str()));
      return GST_FLOW_ERROR;
    }
    view = priv->intake.gather(buf);
    if (!priv->nms.run(GST_ELEMENT(self), s, view, &latency_ns)) return GST_FLOW_ERROR;
  }
  const cudanms::Counts &counts = r.counts;
  GST_LOG_OBJECT(self,
                 "%" G_GSIZE_FORMAT " in, %" G_GSIZE_FORMAT " invalid, %" G_GSIZE_FORMAT
                 " below score, %" G_GSIZE_FORMAT " over capacity, %" G_GSIZE_FORMAT
                 " kept in %" G_GINT64_FORMAT " ns",
                 counts.in, counts.invalid, counts.below_score, counts.over_capacity, counts.kept,
                 latency_ns);
  priv->stats.note_over_capacity(GST_ELEMENT(self), s.max_candidates, counts.over_capacity);

  /* The view may point into a candidates meta: the result meta copies the kept boxes out
   * before the candidates go. */
  priv->labels.set_table(s.labels);
  const gchar *backend = priv->nms.backend_name();
  gst_cuda_nms_remove_result_metas(buf);
  GstCudaNmsResultMeta *result =
      gst_cuda_nms_add_result_meta(buf, view, r, priv->intake, priv->labels, latency_ns, backend);
  if (!s.keep_candidates) gst_cuda_nms_remove_candidate_metas(buf);
  if (result) {
    result->gpu_time_ns = static_cast<guint64>(r.device_time_us * 1000.0);
    gst_cuda_nms_add_roi_metas(buf, result, priv->width, priv->height);
  }

  const double latency_us = latency_ns / 1000.0;
  guint64 frames;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    frames = ++priv->totals.frames;
    priv->totals.candidates += counts.in;
    priv->totals.detections += counts.kept;
    priv->totals.last_latency_us = latency_us;
  }
  priv->stats.note_frame(GST_ELEMENT(self), s.stats_interval, counts, latency_us, frames, backend);
  return GST_FLOW_OK;
}

GstCudaNmsBackendHooks gst_cuda_nms_set_backend_hooks_for_testing(
    const GstCudaNmsBackendHooks *new_hooks) {
  std::lock_guard<std::mutex> guard(hooks_lock);
  const GstCudaNmsBackendHooks previous = hooks;
  hooks = new_hooks ? *new_hooks : default_hooks();
  return previous;
}

static void gst_cuda_nms_class_init(GstCudaNmsClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);

  own_private<GstCudaNms>(klass);
  gst_cuda_nms_install_properties(gobject_class,
                                  locked_member<GstCudaNms, &GstCudaNmsPrivate::properties>,
                                  gst_cuda_nms_property_changed);
  gst_cuda_nms_install_totals(gobject_class);

  describe_element(
      klass, "Non-maximum suppression", "Filter/Analyzer/Video",
      "Non-maximum suppression of a frame's candidate windows (cudanms candidates meta or "
      "region-of-interest metas) on a CUDA GPU or the CPU; kept boxes leave as metadata",
      "video/x-raw; video/x-raw(memory:CUDAMemory)");

  ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_cuda_nms, start, stop, set_caps, sink_event,
                 transform_ip, query);
  ELEMENT_VFUNCS(GST_ELEMENT_CLASS(klass), gst_cuda_nms, set_context);
}
