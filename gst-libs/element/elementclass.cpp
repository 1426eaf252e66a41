#include "elementclass.h"

void describe_element(gpointer klass, const char *long_name, const char *classification,
                      const char *description, const char *caps) {
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  gst_element_class_set_static_metadata(element_class, long_name, classification, description,
                                        "cudanms developers");
  if (caps) add_filter_pads(klass, caps);
}

void add_filter_pads(gpointer klass, const char *caps) {
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstCaps *pad_caps = gst_caps_from_string(caps);
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, pad_caps));
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, pad_caps));
  gst_caps_unref(pad_caps);
}

void transform_reads_only(GstBaseTransformClass *klass) {
  klass->passthrough_on_same_caps = TRUE;
  klass->transform_ip_on_passthrough = TRUE;
}
