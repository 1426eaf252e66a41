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
 * A box gets "members" (the candidates it stands for) where cudanms counted them: method=group,
 * or min-neighbors above 0.
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

#include <gst/video/video.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "detectionsjson.h"
#include "elementclass.h"
#include "linesfile.h"
#include "propertytable.h"

GST_DEBUG_CATEGORY_STATIC(gst_json_meta_writer_debug);
#define GST_CAT_DEFAULT gst_json_meta_writer_debug

#define DEFAULT_LOCATION ""

struct GstJsonMetaWriterPrivate {
  std::mutex lock; /* guards location */
  std::string location = DEFAULT_LOCATION;

  /* Streaming thread (and start/stop) only. */
  LinesFile out;
  DetectionsStream stream;
};

ELEMENT_DEFINE(GstJsonMetaWriter, gst_json_meta_writer, GstBaseTransform, GST_TYPE_BASE_TRANSFORM,
               jsonmetawriter, "JSON lines writer of detection metadata");

static gboolean gst_json_meta_writer_start(GstBaseTransform *trans) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  std::string location;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    location = priv->location;
  }
  priv->stream.reset();
  if (!priv->out.open(location)) {
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_WRITE,
                      ("Could not open \"%s\" for writing", location.c_str()),
                      ("%s", g_strerror(errno)));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "writing JSON lines to %s", priv->out.name().c_str());
  return TRUE;
}

static gboolean gst_json_meta_writer_stop(GstBaseTransform *trans) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  if (!priv->out.close()) {
    GST_ELEMENT_ERROR(self, RESOURCE, CLOSE, ("Could not close \"%s\"", priv->out.name().c_str()),
                      ("%s", g_strerror(errno)));
    return FALSE;
  }
  return TRUE;
}

static gboolean gst_json_meta_writer_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GST_JSON_META_WRITER(trans)->priv->stream.on_event(event);
  return GST_BASE_TRANSFORM_CLASS(gst_json_meta_writer_parent_class)->sink_event(trans, event);
}

static GstFlowReturn gst_json_meta_writer_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstJsonMetaWriter *self = GST_JSON_META_WRITER(trans);
  GstJsonMetaWriterPrivate *priv = self->priv;
  gsize length = 0;
  gchar *line = priv->stream.encode(GST_OBJECT(self), buf, DetectionsFormat::kCudanms, "",
                                    &trans->segment, &length);
  const bool ok = priv->out.write_line(line, length);
  g_free(line);
  if (!ok) {
    GST_ELEMENT_ERROR(self, RESOURCE, WRITE, ("Could not write to %s", priv->out.name().c_str()),
                      ("%s", g_strerror(errno)));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

static void gst_json_meta_writer_class_init(GstJsonMetaWriterClass *klass) {
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  own_private<GstJsonMetaWriter>(klass);
  PropertyTable<GstJsonMetaWriterPrivate>(G_OBJECT_CLASS(klass), locked_private<GstJsonMetaWriter>)
      .field(
          g_param_spec_string("location", "Location",
                              "File to write the JSON lines to (replaced at start); empty or "
                              "'-': stdout",
                              DEFAULT_LOCATION,
                              static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY |
                                                       G_PARAM_STATIC_STRINGS)),
          &GstJsonMetaWriterPrivate::location);

  describe_element(
      klass, "Detection metadata JSON writer", "Sink/Metadata/Video",
      "Writes each frame's NMS result and kept boxes as one JSON object per line, passing the "
      "frames on untouched",
      "video/x-raw(ANY)");

  ELEMENT_VFUNCS(trans_class, gst_json_meta_writer, start, stop, sink_event, transform_ip);
  transform_reads_only(trans_class);
}
