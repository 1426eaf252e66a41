// Every writable property of every element of the project, at its extremes, on a running
// element: no value may abort the process (a property once did: cudanms max-candidates=-1 sized
// its workspace by it and died of std::bad_alloc). An error or warning is a fine answer; a crash
// takes this test binary down, which fails the test.
#include <glib/gstdio.h>
#include <gst/app/gstappsrc.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cascade_support.h"
#include "gst-plugin/cv_support.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

// Values of a property worth trying: its range's ends and default, every enum value, odd text.
// Text values of a "location" are file names inside `dir`, or a directory, or unreachable.
std::vector<GValue> extreme_values(GParamSpec *pspec, const std::string &dir) {
  std::vector<GValue> values;
  auto add = [&](auto set) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, pspec->value_type);
    set(&v);
    values.push_back(v);
  };
  if (G_IS_PARAM_SPEC_UINT(pspec)) {
    auto *p = G_PARAM_SPEC_UINT(pspec);
    for (guint x : {p->minimum, p->maximum, p->default_value, p->maximum / 2 + 1})
      add([x](GValue *v) { g_value_set_uint(v, x); });
  } else if (G_IS_PARAM_SPEC_INT(pspec)) {
    auto *p = G_PARAM_SPEC_INT(pspec);
    for (gint x : {p->minimum, p->maximum, p->default_value})
      add([x](GValue *v) { g_value_set_int(v, x); });
  } else if (G_IS_PARAM_SPEC_UINT64(pspec)) {
    auto *p = G_PARAM_SPEC_UINT64(pspec);
    for (guint64 x : {p->minimum, p->maximum, p->default_value})
      add([x](GValue *v) { g_value_set_uint64(v, x); });
  } else if (G_IS_PARAM_SPEC_DOUBLE(pspec)) {
    auto *p = G_PARAM_SPEC_DOUBLE(pspec);
    for (gdouble x : {p->minimum, p->maximum, p->default_value})
      add([x](GValue *v) { g_value_set_double(v, x); });
  } else if (G_IS_PARAM_SPEC_BOOLEAN(pspec)) {
    for (gboolean x : {gboolean(FALSE), gboolean(TRUE)})
      add([x](GValue *v) { g_value_set_boolean(v, x); });
  } else if (G_IS_PARAM_SPEC_ENUM(pspec)) {
    GEnumClass *klass = G_PARAM_SPEC_ENUM(pspec)->enum_class;
    for (guint i = 0; i < klass->n_values; i++) {
      const gint x = klass->values[i].value;
      add([x](GValue *v) { g_value_set_enum(v, x); });
    }
  } else if (G_IS_PARAM_SPEC_STRING(pspec)) {
    const std::string long_text(100000, '9');
    std::vector<std::string> texts = {
        "",        "/nonexistent/file",        "0x0", "4294967295x4294967295", "-1x-1", ",,;x,",
        long_text, long_text + "x" + long_text};
    if (g_str_equal(pspec->name, "location"))
      texts = {"", "/nonexistent/file", dir, dir + "/out.jsonl", dir + "/" + long_text};
    for (const std::string &x : texts) add([x](GValue *v) { g_value_set_string(v, x.c_str()); });
  }
  return values;
}

// Two BGRx frames with a few candidates (some outside the frame, one NaN) through
// appsrc ! element ! fakesink, to EOS or an error. Takes the element; true at EOS.
bool run_two_frames(GstElement *element) {
  bool eos = false;
  GstElement *pipeline = gst_pipeline_new(nullptr);
  GstElement *src = gst_element_factory_make("appsrc", nullptr);
  GstElement *sink = gst_element_factory_make("fakesink", nullptr);
  EXPECT_TRUE(src && sink);
  GstCaps *caps = gst_caps_from_string("video/x-raw,format=BGRx,width=64,height=48,framerate=30/1");
  g_object_set(src, "caps", caps, "format", GST_FORMAT_TIME, NULL);
  gst_caps_unref(caps);
  gst_bin_add_many(GST_BIN(pipeline), src, element, sink, NULL);
  EXPECT_TRUE(gst_element_link_many(src, element, sink, NULL));
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE) {
    for (int frame = 0; frame < 2; frame++) {
      GstBuffer *buf = gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr);
      gst_buffer_memset(buf, 0, 40 * frame, 64 * 48 * 4);
      GST_BUFFER_PTS(buf) = frame * GST_SECOND / 30;
      GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 4);
      gst_cuda_nms_candidates_meta_append(c, 2, 2, 30, 30, 0.9f, 0);
      gst_cuda_nms_candidates_meta_append(c, 4, 4, 32, 32, 0.8f, 1);
      gst_cuda_nms_candidates_meta_append(c, -100, -100, 1000, 1000, 0.5f, 0);
      gst_cuda_nms_candidates_meta_append(c, NAN, 0, 1, 1, 0.4f, 0);
      gst_buffer_add_video_region_of_interest_meta(buf, "thing", 10, 10, 20, 20);
      if (gst_app_src_push_buffer(GST_APP_SRC(src), buf) != GST_FLOW_OK) break;
    }
    gst_app_src_end_of_stream(GST_APP_SRC(src));
    GstBus *bus = gst_element_get_bus(pipeline);
    GstMessage *end = gst_bus_timed_pop_filtered(
        bus, 60 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    EXPECT_NE(end, nullptr) << "neither EOS nor an error within 60 s";
    eos = end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
    if (end) gst_message_unref(end);
    gst_object_unref(bus);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return eos;
}

TEST(PropertyExtremes, NoValueOfAnyPropertyAbortsTheProcess) {
  init_cv_elements_once();
  gchar *dir = g_dir_make_tmp("extremes-XXXXXX", nullptr);
  const std::string json = std::string(dir) + "/out.jsonl";
  size_t runs = 0, completed = 0;
  std::vector<const char *> factories = {"cudanms",        "cvdetect", "cudacascade", "boxoverlay",
                                         "jsonmetawriter", "boxtrack", "boxcount"};
  // blazeface with its default model, where tools/fetch-blazeface.sh put it.
  if (have_blazeface_model()) factories.push_back("blazeface");
  for (const char *factory : factories) {
    GstElement *probe = gst_element_factory_make(factory, nullptr);
    ASSERT_NE(probe, nullptr) << factory;
    const GType type = G_OBJECT_TYPE(probe);
    guint n = 0;
    GParamSpec **pspecs = g_object_class_list_properties(G_OBJECT_GET_CLASS(probe), &n);
    for (guint i = 0; i < n; i++) {
      GParamSpec *pspec = pspecs[i];
      if (pspec->owner_type != type || !(pspec->flags & G_PARAM_WRITABLE)) continue;
      for (GValue &value : extreme_values(pspec, dir)) {
        SCOPED_TRACE(std::string(factory) + " " + pspec->name + "=" + gst_value_serialize(&value));
        GstElement *element = gst_element_factory_make(factory, nullptr);
        // The writer's output goes to a file unless the property under test is its location.
        if (g_str_equal(factory, "jsonmetawriter"))
          g_object_set(element, "location", json.c_str(), NULL);
        // The cascade from wherever opencv-data is (the GPU host's recipe unpacks it elsewhere).
        if (g_str_equal(factory, "cudacascade"))
          g_object_set(element, "model", cascade_path("haarcascade_frontalface_alt2").c_str(),
                       NULL);
        g_object_set_property(G_OBJECT(element), pspec->name, &value);
        completed += run_two_frames(element);  // the pipeline takes the element
        g_value_unset(&value);
        ++runs;
      }
    }
    g_free(pspecs);
    gst_object_unref(probe);
  }
  EXPECT_GT(runs, 60u);
  // Most values are valid: the frames went through, the test did not just fail to start.
  EXPECT_GT(completed * 4, runs * 3) << completed << " of " << runs << " runs reached EOS";
  g_unlink(json.c_str());
  g_rmdir(dir);
  g_free(dir);
}

}  // namespace
}  // namespace cudanms::testing
