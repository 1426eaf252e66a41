/* gpufault: a test element that stands for a GPU failing under a camera. Passthrough; after
 * `after` frames, when the service has put it on GPU `fail-on-gpu` (the device of the CUDA
 * context the service gives the camera's pipeline, as the CUDA elements take theirs), it posts
 * once what cudanms and the detectors post when CUDA fails mid-stream: the "cudanms-gpu-failed"
 * message (gpufailure.h).
 * Built as a plugin of its own for the service's tests only: CI has no GPU to fail. */
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

#include <string>

#include "elementcudacontext.h"
#include "gpufailure.h"

G_BEGIN_DECLS
#define GST_TYPE_GPU_FAULT (gst_gpu_fault_get_type())
G_DECLARE_FINAL_TYPE(GstGpuFault, gst_gpu_fault, GST, GPU_FAULT, GstBaseTransform)
G_END_DECLS

struct _GstGpuFault {
  GstBaseTransform parent;
  gint gpu; /* its pipeline's CUDA context's device */
  gint fail_on_gpu;
  guint after;
  guint frames;
  gboolean failed;
};

G_DEFINE_TYPE(GstGpuFault, gst_gpu_fault, GST_TYPE_BASE_TRANSFORM)

enum { PROP_0, PROP_FAIL_ON_GPU, PROP_AFTER };

static void set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec) {
  GstGpuFault *self = GST_GPU_FAULT(object);
  switch (id) {
    case PROP_FAIL_ON_GPU:
      self->fail_on_gpu = g_value_get_int(value);
      break;
    case PROP_AFTER:
      self->after = g_value_get_uint(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

static void get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec) {
  GstGpuFault *self = GST_GPU_FAULT(object);
  switch (id) {
    case PROP_FAIL_ON_GPU:
      g_value_set_int(value, self->fail_on_gpu);
      break;
    case PROP_AFTER:
      g_value_set_uint(value, self->after);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
  }
}

static GstFlowReturn transform_ip(GstBaseTransform *transform, GstBuffer *) {
  GstGpuFault *self = GST_GPU_FAULT(transform);
  if (++self->frames >= self->after && !self->failed && self->gpu == self->fail_on_gpu) {
    self->failed = TRUE;
    gst_cv_post_gpu_failed(GST_ELEMENT(self), self->gpu,
                           "injected by the test on GPU " + std::to_string(self->gpu));
  }
  return GST_FLOW_OK;
}

static void set_context(GstElement *element, GstContext *context) {
  const int gpu = gst_cv_cuda_context_device(context);
  if (gpu >= 0) GST_GPU_FAULT(element)->gpu = gpu;
  GST_ELEMENT_CLASS(gst_gpu_fault_parent_class)->set_context(element, context);
}

static void gst_gpu_fault_class_init(GstGpuFaultClass *klass) {
  GObjectClass *object_class = G_OBJECT_CLASS(klass);
  object_class->set_property = set_property;
  object_class->get_property = get_property;
  const auto rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      object_class, PROP_FAIL_ON_GPU,
      g_param_spec_int("fail-on-gpu", "Fail on GPU", "The GPU that fails (-1: none)", -1, G_MAXINT,
                       -1, rw));
  g_object_class_install_property(
      object_class, PROP_AFTER,
      g_param_spec_uint("after", "After", "Frames before it fails", 0, G_MAXUINT, 10, rw));
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  element_class->set_context = set_context;
  gst_element_class_set_static_metadata(element_class, "GPU fault (tests)", "Filter/Video",
                                        "Posts a GPU failure's message on a chosen GPU", "cudanms");
  GstCaps *any = gst_caps_new_any();
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, any));
  gst_element_class_add_pad_template(element_class,
                                     gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, any));
  gst_caps_unref(any);
  GST_BASE_TRANSFORM_CLASS(klass)->transform_ip = transform_ip;
}

static void gst_gpu_fault_init(GstGpuFault *self) {
  self->fail_on_gpu = -1;
  self->after = 10;
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}

static gboolean plugin_init(GstPlugin *plugin) {
  return gst_element_register(plugin, "gpufault", GST_RANK_NONE, GST_TYPE_GPU_FAULT);
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsgpufault,
                  "A GPU failure for the camera service's tests", plugin_init, "0", "LGPL",
                  "cudanms", "https://cudanms.invalid/")
