// cudanms-streams --preload: a file's first frames decoded once (and uploaded once with
// --preload-gpu), pushed again and again by every stream's appsrc: decoding excluded.
#include <gst/app/gstappsink.h>

#include <cstdio>

#include "streams_app.h"

namespace {

// A GstMemory counts the maps it is under in 8 bits: more than 255 at once corrupt its lock
// state (GStreamer-CRITICAL "gst_mini_object_unlock: assertion '(state & access_mode) ==
// access_mode' failed", then wrong maps). Every stream maps the frame it pushed, an I420 frame's
// three planes each: a copy of the preloaded frames serves at most 64 streams.
constexpr int kStreamsPerCopy = 64;

// One set of preloaded frames serves the streams i = j mod `preload_stride` (stream i runs on GPU
// i mod G): all streams, or one GPU's (--preload-gpu, or a --workers per-gpu worker's).
int copies_needed(const App &app) {
  const int streams = (app.options.streams + app.preload_stride - 1) / app.preload_stride;
  return (streams + kStreamsPerCopy - 1) / kStreamsPerCopy;
}
}  // namespace

// Stream i's copy: by its rank among the streams of its set.
size_t preloaded_copy(const App &app, int i) {
  return static_cast<size_t>(i / app.preload_stride / kStreamsPerCopy);
}

bool preload(App *app, unsigned gpu_index, std::string *error) {
  gchar *uri = gst_uri_is_valid(app->options.preload)
                   ? g_strdup(app->options.preload)
                   : gst_filename_to_uri(app->options.preload, nullptr);
  int width = 1920, height = 1080;
  if (sscanf(app->options.size, "%dx%d", &width, &height) != 2 || width <= 0 || height <= 0) {
    *error = std::string("--size must be WxH, not ") + app->options.size;
    g_free(uri);
    return false;
  }
  // In GPU memory as NV12, the layout NVDEC hands over.
  const bool gpu = app->options.preload_gpu;
  gchar *desc = g_strdup_printf(
      "uridecodebin uri=\"%s\" ! videoconvert ! videoscale ! "
      "video/x-raw,format=%s,width=%d,height=%d %s ! appsink name=frames sync=false",
      uri, gpu ? "NV12" : "I420", width, height,
      gpu ? "! cudaupload ! video/x-raw(memory:CUDAMemory)" : "");
  g_free(uri);
  GError *err = nullptr;
  GstElement *pipeline = gst_parse_launch_full(desc, nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &err);
  g_free(desc);
  if (!pipeline || err) {
    *error = std::string(err ? err->message : "cannot build the decoding pipeline") +
             (gpu ? " (--preload-gpu needs gst-plugins-bad's nvcodec: cudaupload)" : "");
    g_clear_error(&err);
    if (pipeline) gst_object_unref(pipeline);
    return false;
  }
  if (gpu) gst_element_set_context(pipeline, app->cuda_contexts.at(gpu_index));
  std::vector<GstBuffer *> frames;
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "frames");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  std::string decode_error;
  while (static_cast<int>(frames.size()) < app->options.preload_frames) {
    GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), GST_SECOND / 10);
    if (!sample) {
      if (GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
        GError *e = nullptr;
        gst_message_parse_error(m, &e, nullptr);
        decode_error = e->message;
        g_clear_error(&e);
        gst_message_unref(m);
        break;
      }
      if (gst_app_sink_is_eos(GST_APP_SINK(sink))) break;
      continue;
    }
    // A deep copy (in GPU memory too): the decoder's or the upload's pool gets its memory back.
    GstBuffer *copy = gst_buffer_copy_deep(gst_sample_get_buffer(sample));
    if (!app->preloaded_caps) app->preloaded_caps = gst_caps_ref(gst_sample_get_caps(sample));
    gst_sample_unref(sample);
    if (!copy) {
      decode_error = "a frame could not be copied";
      break;
    }
    frames.push_back(copy);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  if (frames.empty()) {
    *error = std::string("no frame could be decoded from ") + app->options.preload +
             (decode_error.empty() ? "" : ": " + decode_error);
    return false;
  }
  std::vector<std::vector<GstBuffer *>> &copies = app->preloaded[gpu_index];
  copies.push_back(frames);
  for (int k = 1; k < copies_needed(*app); ++k) {
    copies.emplace_back();
    for (GstBuffer *frame : frames) copies.back().push_back(gst_buffer_copy_deep(frame));
  }
  return true;
}

// The appsrc of a --preload stream asks for more: the next frame (a shallow copy: cudacascade
// reads the pixels and adds a meta), or the end of the stream.
void on_need_data(GstAppSrc *src, guint, gpointer data) {
  auto *s = static_cast<Stream *>(data);
  if (s->pushed >= s->limit) {
    gst_app_src_end_of_stream(src);
    return;
  }
  GstBuffer *frame = gst_buffer_copy((*s->source)[s->pushed % s->source->size()]);
  GST_BUFFER_PTS(frame) = s->pushed * s->duration;
  GST_BUFFER_DURATION(frame) = s->duration;
  s->pushed++;
  gst_app_src_push_buffer(src, frame);
}
