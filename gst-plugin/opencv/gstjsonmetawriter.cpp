/**
 * SECTION:element-jsonmetawriter
 * @title: jsonmetawriter
 *
 * Writes one line of JSON per frame to a file, or to stdout when location is empty or "-":
 *
 * |[
 * {"frame":0,"pts":0,"width":768,"height":576,"candidates":74,"kept":6,"backend":"cpu",
 *  "nms_latency_us":21.4,"boxes":[{"label":"person","class_id":0,"score":2.31,
 *  "x":357.3,"y":165.0,"w":53.3,"h":106.7}, ...]}
 * ]|
 *
 * pts is in nanoseconds (null when the buffer has none). With a #GstCudaNmsResultMeta on the
 * frame, candidates, kept, backend, nms_latency_us and the boxes (best score first) come from it;
 * without one, the boxes are the frame's #GstVideoRegionOfInterestMeta (score from their
 * "detection" structure) and candidates is the size of its #GstCudaNmsCandidatesMeta, if any.
 * Labels are the ones detectors announce (cvdetect does), else the ROI type or the class id.
 *
 * The frames pass through untouched and are never mapped. Each line is flushed as it is
 * written, so `tail -f` follows a live stream.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 ... ! cvdetect ! cudanms ! jsonmetawriter location=detections.jsonl ! fakesink
 * ]|
 */
#include "gstjsonmetawriter.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <json-glib/json-glib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "labels.h"

GST_DEBUG_CATEGORY_STATIC(gst_json_meta_writer_debug);
#define GST_CAT_DEFAULT gst_json_meta_writer_debug

enum {
  PROP_0,
  PROP_LOCATION,
};

#define DEFAULT_LOCATION ""

#define CAPS_STR "video/x-raw(ANY)"

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));

struct GstJsonMetaWriterPrivate {
  std::mutex lock; /* guards location */
  std::string location = DEFAULT_LOCATION;

  /* Streaming thread (and start/stop) only. */
  FILE *out = nullptr;
  bool out_is_stdout = false;
  std::string out_name;
  guint64 frame = 0;
  int width = 0;
  int height = 0;
  std::map<gint, std::string> labels;
  JsonGenerator *generator = nullptr;
};

struct _GstJsonMetaWriter {
  GstBaseTransform parent;
  GstJsonMetaWriterPrivate *priv;
};

#define gst_json_meta_writer_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstJsonMetaWriter, gst_json_meta_writer, GST_TYPE_BASE_TRANSFORM,
                        GST_DEBUG_CATEGORY_INIT(gst_json_meta_writer_debug, "jsonmetawriter", 0,
                                                "JSON lines writer of detection metadata"));
GST_ELEMENT_REGISTER_DEFINE(jsonmetawriter, "jsonmetawriter", GST_RANK_NONE,
                            GST_TYPE_JSON_META_WRITER);

static void gst_json_meta_writer_finalize(GObject *object);
static void gst_json_meta_writer_set_property(GObject *object, guint prop_id, const GValue *value,
                                              GParamSpec *pspec);
static void gst_json_meta_writer_get_property(GObject *object, guint prop_id, GValue *value,
                                              GParamSpec *pspec);
static gboolean gst_json_meta_writer_start(GstBaseTransform *trans);
static gboolean gst_json_meta_writer_stop(GstBaseTransform *trans);
static gboolean gst_json_meta_writer_set_caps(GstBaseTransform *trans, GstCaps *incaps,
                                              GstCaps *outcaps);
static gboolean gst_json_meta_writer_sink_event(GstBaseTransform *trans, GstEvent *event);
static GstFlowReturn gst_json_meta_writer_transform_ip(GstBaseTransform *trans, GstBuffer *buf);

static void gst_json_meta_writer_class_init(GstJsonMetaWriterClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  gobject_class->finalize = gst_json_meta_writer_finalize;
  gobject_class->set_property = gst_json_meta_writer_set_property;
  gobject_class->get_property = gst_json_meta_writer_get_property;

  g_object_class_install_property(
      gobject_class, PROP_LOCATION,
      g_param_spec_string("location", "Location",
                          "File to write the JSON lines to (replaced at start); empty or '-': "
                          "stdout",
                          DEFAULT_LOCATION,
                          static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY |
                                                   G_PARAM_STATIC_STRINGS)));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "Detection metadata JSON writer", "Sink/Metadata/Video",
      "Writes each frame's NMS result and kept boxes as one JSON object per line, passing the "
      "frames on untouched",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_json_meta_writer_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_json_meta_writer_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR(gst_json_meta_writer_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_json_meta_writer_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_json_meta_writer_transform_ip);
  trans_class->transform_ip_on_passthrough = TRUE;
}

static void gst_json_meta_writer_init(GstJsonMetaWriter *self) {
  self->priv = new GstJsonMetaWriterPrivate();
  /* The default, applied here (the member initialiser takes it from DEFAULT_LOCATION). */
  self->priv->location = DEFAULT_LOCATION;
  /* Reads metadata only: passthrough, so the buffer is neither copied nor made writable. */
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static void gst_json_meta_writer_finalize(GObject *object) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_json_meta_writer_set_property(GObject *object, guint prop_id, const GValue *value,
                                              GParamSpec *pspec) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  switch (prop_id) {
    case PROP_LOCATION: {
      const gchar *location = g_value_get_string(value);
      self->priv->location = location ? location : "";
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_json_meta_writer_get_property(GObject *object, guint prop_id, GValue *value,
                                              GParamSpec *pspec) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  switch (prop_id) {
    case PROP_LOCATION:
      g_value_set_string(value, self->priv->location.c_str());
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static gboolean gst_json_meta_writer_start(GstBaseTransform *trans) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  std::string location;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    location = priv->location;
  }
  priv->frame = 0;
  priv->width = priv->height = 0;
  priv->labels.clear();
  if (location.empty() || location == "-") {
    priv->out = stdout;
    priv->out_is_stdout = true;
    priv->out_name = "stdout";
  } else {
    priv->out = fopen(location.c_str(), "w");
    if (!priv->out) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_WRITE,
                        ("Could not open \"%s\" for writing", location.c_str()),
                        ("%s", g_strerror(errno)));
      return FALSE;
    }
    priv->out_is_stdout = false;
    priv->out_name = location;
  }
  priv->generator = json_generator_new();
  GST_INFO_OBJECT(self, "writing JSON lines to %s", priv->out_name.c_str());
  return TRUE;
}

static gboolean gst_json_meta_writer_stop(GstBaseTransform *trans) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  gboolean ok = TRUE;
  if (priv->out && !priv->out_is_stdout && fclose(priv->out) != 0) {
    GST_ELEMENT_ERROR(self, RESOURCE, CLOSE, ("Could not close \"%s\"", priv->out_name.c_str()),
                      ("%s", g_strerror(errno)));
    ok = FALSE;
  } else if (priv->out_is_stdout) {
    fflush(stdout);
  }
  priv->out = nullptr;
  g_clear_object(&priv->generator);
  return ok;
}

static gboolean gst_json_meta_writer_set_caps(GstBaseTransform *trans, GstCaps *incaps,
                                              GstCaps *outcaps) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstVideoInfo info;
  (void)outcaps;
  if (gst_video_info_from_caps(&info, incaps)) {
    self->priv->width = GST_VIDEO_INFO_WIDTH(&info);
    self->priv->height = GST_VIDEO_INFO_HEIGHT(&info);
  }
  return TRUE;
}

static gboolean gst_json_meta_writer_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  gint class_id;
  std::string label;
  if (gst_cv_label_event_parse(event, &class_id, &label)) self->priv->labels[class_id] = label;
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static void add_box(JsonBuilder *b, const std::string &label, gint class_id, double score, double x,
                    double y, double w, double h) {
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "label");
  json_builder_add_string_value(b, label.c_str());
  json_builder_set_member_name(b, "class_id");
  json_builder_add_int_value(b, class_id);
  json_builder_set_member_name(b, "score");
  json_builder_add_double_value(b, score);
  json_builder_set_member_name(b, "x");
  json_builder_add_double_value(b, x);
  json_builder_set_member_name(b, "y");
  json_builder_add_double_value(b, y);
  json_builder_set_member_name(b, "w");
  json_builder_add_double_value(b, w);
  json_builder_set_member_name(b, "h");
  json_builder_add_double_value(b, h);
  json_builder_end_object(b);
}

/* The boxes of the frame's ROI metas, in the order they were added; returns how many. */
static guint add_roi_boxes(GstJsonMetaWriter *self, JsonBuilder *b, GstBuffer *buf) {
  guint n = 0;
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta_filtered(buf, &state,
                                                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
    auto *roi = reinterpret_cast<GstVideoRegionOfInterestMeta *>(meta);
    const gchar *roi_type = g_quark_to_string(roi->roi_type);
    gint class_id = 0;
    double score = 1.0;
    std::string label = roi_type ? roi_type : "";
    if (GstStructure *d = gst_video_region_of_interest_meta_get_param(roi, "detection")) {
      gst_structure_get_double(d, "confidence", &score);
      if (gst_structure_get_int(d, "label_id", &class_id))
        label = gst_cv_label_lookup(self->priv->labels, class_id, roi_type);
      if (const gchar *l = gst_structure_get_string(d, "label")) label = l;
    }
    add_box(b, label, class_id, score, roi->x, roi->y, roi->w, roi->h);
    n++;
  }
  return n;
}

static GstFlowReturn gst_json_meta_writer_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf);

  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "frame");
  json_builder_add_int_value(b, static_cast<gint64>(priv->frame));
  json_builder_set_member_name(b, "pts");
  if (GST_BUFFER_PTS_IS_VALID(buf)) {
    json_builder_add_int_value(b, static_cast<gint64>(GST_BUFFER_PTS(buf)));
  } else {
    json_builder_add_null_value(b);
  }
  json_builder_set_member_name(b, "width");
  json_builder_add_int_value(b, priv->width);
  json_builder_set_member_name(b, "height");
  json_builder_add_int_value(b, priv->height);
  json_builder_set_member_name(b, "candidates");
  if (result) {
    json_builder_add_int_value(b, static_cast<gint64>(result->candidates_in));
  } else {
    GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(buf);
    if (c && !gst_cuda_nms_candidates_meta_map(c, nullptr)) {  // device candidates: downloaded once
      GST_WARNING_OBJECT(self, "could not download the device candidates to count them");
    }
    json_builder_add_int_value(b, c ? c->n : 0);
  }
  if (result) {
    json_builder_set_member_name(b, "kept");
    json_builder_add_int_value(b, result->n_kept);
    json_builder_set_member_name(b, "backend");
    json_builder_add_string_value(b, result->backend ? result->backend : "");
    json_builder_set_member_name(b, "nms_latency_us");
    json_builder_add_double_value(b, result->latency_ns / 1000.0);
  }
  json_builder_set_member_name(b, "boxes");
  json_builder_begin_array(b);
  guint n_boxes = 0;
  if (result) {
    for (guint i = 0; i < result->n_kept; i++) {
      const gfloat *box = result->boxes + 4 * static_cast<size_t>(i);
      const gint class_id = result->class_ids[i];
      /* cudanms names every kept box; a result meta from elsewhere may leave labels NULL. */
      const gchar *label = result->labels ? result->labels[i] : nullptr;
      add_box(b, label ? std::string(label) : gst_cv_label_lookup(priv->labels, class_id), class_id,
              result->scores[i], box[0], box[1], box[2] - box[0], box[3] - box[1]);
    }
    n_boxes = result->n_kept;
  } else {
    n_boxes = add_roi_boxes(self, b, buf);
  }
  json_builder_end_array(b);
  if (!result) {
    json_builder_set_member_name(b, "kept");
    json_builder_add_int_value(b, n_boxes);
  }
  json_builder_end_object(b);

  JsonNode *root = json_builder_get_root(b);
  json_generator_set_root(priv->generator, root);
  gsize length = 0;
  gchar *line = json_generator_to_data(priv->generator, &length);
  json_node_unref(root);
  g_object_unref(b);

  const bool ok = fwrite(line, 1, length, priv->out) == length && fputc('\n', priv->out) != EOF &&
                  fflush(priv->out) == 0;
  g_free(line);
  if (!ok) {
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE, ("Could not write to %s", priv->out_name.c_str()),
                      ("%s", g_strerror(errno)));
    return GST_FLOW_ERROR;
  }
  priv->frame++;
  return GST_FLOW_OK;
}
