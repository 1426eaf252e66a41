/* brightspot: a test detector for the fleet's tests, cheap enough to run a dozen cameras on CI's
 * two cores: the bounding box of a frame's bright pixels (luma above `threshold`) as one
 * candidate "ball", in a GstVideoRegionOfInterestMeta with DL Streamer's "detection" structure,
 * which cudanms reads as every detector's. The tests' cameras show videotestsrc's ball on black,
 * which crosses the middle of the frame back and forth: boxtrack follows it and boxcount counts
 * its crossings. Built as a plugin of its own for the service's tests and the fleet soak. */
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <algorithm>

G_BEGIN_DECLS
#define GST_TYPE_BRIGHT_SPOT (gst_bright_spot_get_type())
G_DECLARE_FINAL_TYPE(GstBrightSpot, gst_bright_spot, GST, BRIGHT_SPOT, GstBaseTransform)
G_END_DECLS

struct _GstBrightSpot {
  GstBaseTransform parent;
  guint threshold;
  GstVideoInfo info;
};

G_DEFINE_TYPE(GstBrightSpot, gst_bright_spot, GST_TYPE_BASE_TRANSFORM)

enum { PROP_0, PROP_THRESHOLD };

static void set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec) {
  if (id == PROP_THRESHOLD)
    GST_BRIGHT_SPOT(object)->threshold = g_value_get_uint(value);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static void get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec) {
  if (id == PROP_THRESHOLD)
    g_value_set_uint(value, GST_BRIGHT_SPOT(object)->threshold);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
}

static gboolean set_caps(GstBaseTransform *transform, GstCaps *incaps, GstCaps *) {
  return gst_video_info_from_caps(&GST_BRIGHT_SPOT(transform)->info, incaps);
}

static GstFlowReturn transform_ip(GstBaseTransform *transform, GstBuffer *buffer) {
  GstBrightSpot *self = GST_BRIGHT_SPOT(transform);
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, &self->info, buffer, GST_MAP_READ)) return GST_FLOW_ERROR;
  const int width = GST_VIDEO_FRAME_WIDTH(&frame), height = GST_VIDEO_FRAME_HEIGHT(&frame);
  const guint8 *luma = static_cast<const guint8 *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
  const int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
  int left = width, right = -1, top = height, bottom = -1;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      if (luma[y * stride + x] > self->threshold) {
        left = std::min(left, x);
        right = std::max(right, x);
        top = std::min(top, y);
        bottom = std::max(bottom, y);
      }
  gst_video_frame_unmap(&frame);
  if (right < 0) return GST_FLOW_OK;
  GstVideoRegionOfInterestMeta *roi = gst_buffer_add_video_region_of_interest_meta(
      buffer, "ball", left, top, right - left + 1, bottom - top + 1);
  gst_video_region_of_interest_meta_add_param(
      roi,
      gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.9, "label_id", G_TYPE_INT, 0,
                        "x_min", G_TYPE_DOUBLE, left / double(width), "y_min", G_TYPE_DOUBLE,
                        top / double(height), "x_max", G_TYPE_DOUBLE, (right + 1) / double(width),
                        "y_max", G_TYPE_DOUBLE, (bottom + 1) / double(height), nullptr));
  return GST_FLOW_OK;
}

static void gst_bright_spot_class_init(GstBrightSpotClass *klass) {
  GObjectClass *object_class = G_OBJECT_CLASS(klass);
  object_class->set_property = set_property;
  object_class->get_property = get_property;
  g_object_class_install_property(
      object_class, PROP_THRESHOLD,
      g_param_spec_uint("threshold", "Threshold", "Luma above this is the spot", 0, 255, 200,
                        static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS)));
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  gst_element_class_set_static_metadata(element_class, "Bright spot (tests)", "Filter/Video",
                                        "The bright pixels' bounding box as a candidate",
                                        "cudanms");
  GstCaps *caps = gst_caps_from_string("video/x-raw, format=(string){ I420, NV12, GRAY8 }");
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);
  GST_BASE_TRANSFORM_CLASS(klass)->set_caps = set_caps;
  GST_BASE_TRANSFORM_CLASS(klass)->transform_ip = transform_ip;
}

static void gst_bright_spot_init(GstBrightSpot *self) {
  self->threshold = 200;
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static gboolean plugin_init(GstPlugin *plugin) {
  return gst_element_register(plugin, "brightspot", GST_RANK_NONE, GST_TYPE_BRIGHT_SPOT);
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsbrightspot,
                  "A cheap test detector for the fleet's tests", plugin_init, "0", "LGPL",
                  "cudanms", "https://cudanms.invalid/")
