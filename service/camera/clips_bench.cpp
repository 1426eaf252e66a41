// cudanms-clips-bench: what event clips cost a host, per frame (docs/performance.md). Encodes
// --seconds of 1080p noise at 30 frames/s once (x264enc at 4 Mbit/s, as a camera's stream, a
// keyframe a second), then feeds
// its access units to --cameras EventClips, as their decoders' taps would, at full speed, each
// camera an event every --event-every seconds of its stream; and reports the host CPU time (every
// thread: the taps, the rings, the clips' muxing and writing) per frame and the clips made.
//
//   cudanms-clips-bench [--cameras 32] [--seconds 60] [--event-every 10] [--dir DIR]
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "event_clips.h"

namespace {

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The encoded stream: its caps and its access units, in order.
struct Stream {
  GstCaps *caps = nullptr;
  std::vector<GstBuffer *> units;
};

bool encode(int seconds, Stream *out) {
  const std::string description =
      "videotestsrc pattern=snow num-buffers=" + std::to_string(seconds * 30) +
      " ! video/x-raw,width=1920,height=1080,framerate=30/1 ! x264enc speed-preset=ultrafast "
      "tune=zerolatency bframes=0 key-int-max=30 bitrate=4000 ! h264parse ! fakesink name=sink";
  GstElement *pipeline = gst_parse_launch(description.c_str(), nullptr);
  if (!pipeline) return false;
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstPad *pad = gst_element_get_static_pad(sink, "sink");
  gst_pad_add_probe(
      pad,
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *s = static_cast<Stream *>(data);
        if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
          s->units.push_back(gst_buffer_ref(GST_PAD_PROBE_INFO_BUFFER(info)));
        } else if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_CAPS) {
          GstCaps *caps = nullptr;
          gst_event_parse_caps(GST_PAD_PROBE_INFO_EVENT(info), &caps);
          gst_caps_replace(&s->caps, caps);
        }
        return GST_PAD_PROBE_OK;
      },
      out, nullptr);
  gst_object_unref(pad);
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, GST_CLOCK_TIME_NONE, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool ok = GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
  gst_message_unref(end);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return ok && out->caps && !out->units.empty();
}

}  // namespace

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  int cameras = 32, seconds = 60;
  double event_every = 10;
  const gchar *dir = nullptr;
  const GOptionEntry entries[] = {
      {"cameras", 0, 0, G_OPTION_ARG_INT, &cameras, "cameras fed (default 32)", "N"},
      {"seconds", 0, 0, G_OPTION_ARG_INT, &seconds, "seconds of stream a camera (default 60)", "S"},
      {"event-every", 0, 0, G_OPTION_ARG_DOUBLE, &event_every,
       "seconds of stream between a camera's events (default 10)", "S"},
      {"dir", 0, 0, G_OPTION_ARG_FILENAME, &dir, "where the clips go (default a temporary one)",
       "DIR"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext *context = g_option_context_new("- what event clips cost a host, per frame");
  g_option_context_add_main_entries(context, entries, nullptr);
  GError *error = nullptr;
  if (!g_option_context_parse(context, &argc, &argv, &error) || cameras < 1 || seconds < 1 ||
      event_every <= 0) {
    fprintf(stderr, "cudanms-clips-bench: %s\n", error ? error->message : "bad arguments");
    return 2;
  }
  g_option_context_free(context);
  const std::string folder = dir ? dir : g_dir_make_tmp("cudanms-clips-XXXXXX", nullptr);

  Stream stream;
  if (!encode(seconds, &stream)) {
    fprintf(stderr, "cudanms-clips-bench: cannot encode the test stream\n");
    return 1;
  }
  std::atomic<int> made{0}, failed{0};
  std::vector<std::unique_ptr<cudanms::service::EventClips>> clips;
  for (int c = 0; c < cameras; c++) {
    clips.push_back(std::make_unique<cudanms::service::EventClips>(
        "cam" + std::to_string(c), folder + "/cam" + std::to_string(c), 5, 5,
        [&](const std::string &, const std::string &why) { (why.empty() ? made : failed)++; }));
    clips.back()->on_caps(stream.caps, false);
  }
  const GstClockTime every = static_cast<GstClockTime>(event_every * GST_SECOND);
  const double cpu_before = cpu_seconds();
  const gint64 wall_before = g_get_monotonic_time();
  guint64 event_id = 1;
  // x264enc's times start 1000 hours in: events counted from the stream's first.
  GstClockTime next_event = GST_BUFFER_PTS(stream.units.front()) + every;
  guint64 events = 0;
  for (GstBuffer *unit : stream.units) {
    const GstClockTime pts = GST_BUFFER_PTS(unit);
    const bool event = pts >= next_event;
    events += event;
    if (event) next_event += every;
    for (auto &c : clips) {
      c->on_unit(unit, false);
      if (event) c->on_event(pts, event_id);
    }
    event_id += event;
  }
  clips.clear();  // the open clips finished and waited for
  const double cpu = cpu_seconds() - cpu_before;
  const double wall = (g_get_monotonic_time() - wall_before) / 1e6;
  const double frames = static_cast<double>(stream.units.size()) * cameras;
  printf("%d cameras x %zu frames (1080p H.264, %d s at 30 fps), %" G_GUINT64_FORMAT
         " events a camera (one every %.0f s): %d clips made, %d failed\n",
         cameras, stream.units.size(), seconds, events, event_every, made.load(), failed.load());
  printf("host CPU: %.2f us a frame (%.2f s for %.0f frames, in %.2f s)\n", cpu / frames * 1e6, cpu,
         frames, wall);
  for (GstBuffer *unit : stream.units) gst_buffer_unref(unit);
  gst_caps_unref(stream.caps);
  if (!dir) {  // the temporary folder's clips are no one's
    GDir *cameras_in = g_dir_open(folder.c_str(), 0, nullptr);
    while (const gchar *camera = cameras_in ? g_dir_read_name(cameras_in) : nullptr) {
      const std::string sub = folder + "/" + camera;
      if (GDir *files = g_dir_open(sub.c_str(), 0, nullptr)) {
        while (const gchar *name = g_dir_read_name(files)) g_remove((sub + "/" + name).c_str());
        g_dir_close(files);
      }
      g_rmdir(sub.c_str());
    }
    if (cameras_in) g_dir_close(cameras_in);
    g_rmdir(folder.c_str());
  }
  return failed.load() ? 1 : 0;
}
