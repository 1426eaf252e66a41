// cudanms-run: runs a gst-launch style pipeline description with cudanms in it and reports what
// NMS did: a progress line every few seconds (frames, fps, candidates and kept boxes per frame)
// and one summary line at the end (frames, candidates, kept, NMS p50 latency, backend).
//
// The pipeline's elements are found by name: "nms" (cudanms; its src pad is watched for the
// result meta), "overlay" (the frame after it is the --snapshot), "src" (the source: an error
// or a warning from it followed by the end of the stream, means the source was lost: the outputs
// are finalized with an EOS and the exit status is 3). Exit status: 0 end of stream, 1 pipeline
// error, 2 usage, 3 source lost.
#include <glib-unix.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "commandline.h"
#include "percentile.h"
#include "pipelinestop.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSourceLost = 3;

struct Options {
  guint64 max_frames = 0;
  gchar *snapshot = nullptr;
  guint64 snapshot_frame = 0;
  double progress_s = 2.0;
  double finish_timeout_s = 10.0;
  gboolean quiet = FALSE;
};

struct Stats {
  std::mutex lock;
  guint64 frames = 0;
  guint64 candidates = 0;
  guint64 kept = 0;
  std::vector<double> latencies_us;
  std::string backend = "none";
  bool eos_sent = false;
  GstSample *snapshot = nullptr;
};

struct App {
  Options options;
  GstElement *pipeline = nullptr;
  GMainLoop *loop = nullptr;
  Stats stats;
  int exit_code = kExitOk;
  bool finishing = false;  // an EOS is on its way; the next EOS message ends the run
  bool source_lost = false;
  std::string source_warning;  // the last warning from the source
  gint64 started_us = 0;
  gint64 first_frame_us = 0;
  guint64 last_progress_frames = 0;
  double last_stats_p50 = -1;
  guint finish_timer = 0;
};

// After cudanms: counts every frame's result; past --max-frames, ends the stream there.
GstPadProbeReturn on_nms_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
  App *app = static_cast<App *>(data);
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
  bool send_eos = false;
  {
    std::lock_guard<std::mutex> guard(app->stats.lock);
    if (app->options.max_frames > 0 && app->stats.frames >= app->options.max_frames) {
      if (app->stats.eos_sent) return GST_PAD_PROBE_DROP;
      app->stats.eos_sent = send_eos = true;
    } else {
      app->stats.frames++;
      if (app->first_frame_us == 0) app->first_frame_us = g_get_monotonic_time();
      if (GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(buf)) {
        app->stats.candidates += r->candidates_in;
        app->stats.kept += r->n_kept;
        app->stats.latencies_us.push_back(r->latency_ns / 1000.0);
        if (r->backend) app->stats.backend = r->backend;
      }
    }
  }
  if (send_eos) {
    gst_pad_push_event(pad, gst_event_new_eos());
    return GST_PAD_PROBE_DROP;
  }
  return GST_PAD_PROBE_OK;
}

// After the overlay: keeps frame --snapshot-frame (or the last one, if the stream is shorter).
GstPadProbeReturn on_overlay_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
  App *app = static_cast<App *>(data);
  static guint64 seen = 0;
  const guint64 index = seen++;
  std::lock_guard<std::mutex> guard(app->stats.lock);
  if (app->stats.snapshot && index > app->options.snapshot_frame) return GST_PAD_PROBE_OK;
  GstCaps *caps = gst_pad_get_current_caps(pad);
  if (app->stats.snapshot) gst_sample_unref(app->stats.snapshot);
  // A copy: the frame itself goes back to its pool downstream.
  GstBuffer *copy = gst_buffer_copy_deep(GST_PAD_PROBE_INFO_BUFFER(info));
  app->stats.snapshot = gst_sample_new(copy, caps, nullptr, nullptr);
  gst_buffer_unref(copy);
  if (caps) gst_caps_unref(caps);
  return GST_PAD_PROBE_OK;
}

void print_progress(App *app) {
  guint64 frames, candidates, kept;
  {
    std::lock_guard<std::mutex> guard(app->stats.lock);
    frames = app->stats.frames;
    candidates = app->stats.candidates;
    kept = app->stats.kept;
  }
  if (frames == app->last_progress_frames) return;
  app->last_progress_frames = frames;
  const double elapsed = (g_get_monotonic_time() - app->first_frame_us) / 1e6;
  g_print("frames %" G_GUINT64_FORMAT "  %.1f fps  candidates %.1f/frame  kept %.1f/frame", frames,
          elapsed > 0 ? frames / elapsed : 0.0, double(candidates) / frames, double(kept) / frames);
  if (app->last_stats_p50 >= 0) g_print("  NMS p50 %.0f us", app->last_stats_p50);
  g_print("\n");
}

gboolean on_progress_timer(gpointer data) {
  App *app = static_cast<App *>(data);
  if (!app->options.quiet) print_progress(app);
  return G_SOURCE_CONTINUE;
}

gboolean on_finish_timeout(gpointer data) {
  App *app = static_cast<App *>(data);
  g_printerr("cudanms-run: the pipeline did not finish within %.0f s: stopping it\n",
             app->options.finish_timeout_s);
  app->finish_timer = 0;
  if (app->exit_code == kExitOk) app->exit_code = kExitError;
  g_main_loop_quit(app->loop);
  return G_SOURCE_REMOVE;
}

// Ends the stream at the elements the source feeds, so that muxers and writers finalize even
// though the source itself has stopped.
void finish_after_source(App *app, GstElement *source) {
  app->finishing = true;
  bool sent = false;
  GstIterator *it = gst_element_iterate_src_pads(source);
  GValue item = G_VALUE_INIT;
  while (gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstPad *pad = GST_PAD(g_value_get_object(&item));
    if (GstPad *peer = gst_pad_get_peer(pad)) {
      sent |= gst_pad_send_event(peer, gst_event_new_eos()) != FALSE;
      gst_object_unref(peer);
    }
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  if (!sent) {
    g_main_loop_quit(app->loop);
    return;
  }
  app->finish_timer = g_timeout_add(static_cast<guint>(app->options.finish_timeout_s * 1000),
                                    on_finish_timeout, app);
}

guint64 frames_of(App *app) {
  std::lock_guard<std::mutex> guard(app->stats.lock);
  return app->stats.frames;
}

bool from_element(GstMessage *message, GstElement *element) {
  return element && GST_MESSAGE_SRC(message) &&
         (GST_MESSAGE_SRC(message) == GST_OBJECT(element) ||
          gst_object_has_as_ancestor(GST_MESSAGE_SRC(message), GST_OBJECT(element)));
}

gboolean on_bus_message(GstBus *bus, GstMessage *message, gpointer data) {
  (void)bus;
  App *app = static_cast<App *>(data);
  switch (GST_MESSAGE_TYPE(message)) {
    case GST_MESSAGE_EOS:
      // rtspsrc ends the stream with an EOS after warning that the connection broke: that is a
      // lost source too, unlike an EOS after the server's own end of stream (RTCP BYE).
      if (!app->finishing && !app->source_lost && !app->source_warning.empty()) {
        g_printerr("cudanms-run: source lost after %" G_GUINT64_FORMAT
                   " frames: %s\ncudanms-run: the stream ended; the outputs are finalized\n",
                   frames_of(app), app->source_warning.c_str());
        app->exit_code = kExitSourceLost;
      }
      g_main_loop_quit(app->loop);
      break;
    case GST_MESSAGE_ERROR: {
      GError *error = nullptr;
      gchar *debug = nullptr;
      gst_message_parse_error(message, &error, &debug);
      GstElement *source = gst_bin_get_by_name(GST_BIN(app->pipeline), "src");
      if (from_element(message, source) && !app->finishing) {
        g_printerr("cudanms-run: source lost after %" G_GUINT64_FORMAT
                   " frames: %s\ncudanms-run: ending the stream; the outputs are finalized\n",
                   frames_of(app), error->message);
        if (debug) g_printerr("  (%s)\n", debug);
        app->exit_code = kExitSourceLost;
        app->source_lost = true;
        finish_after_source(app, source);
      } else if (!app->source_lost) {
        g_printerr("cudanms-run: error from %s: %s\n", GST_OBJECT_NAME(GST_MESSAGE_SRC(message)),
                   error->message);
        if (debug) g_printerr("  (%s)\n", debug);
        app->exit_code = kExitError;
        g_main_loop_quit(app->loop);
      }
      if (source) gst_object_unref(source);
      g_clear_error(&error);
      g_free(debug);
      break;
    }
    case GST_MESSAGE_WARNING: {
      GError *error = nullptr;
      gst_message_parse_warning(message, &error, nullptr);
      g_printerr("cudanms-run: warning from %s: %s\n", GST_OBJECT_NAME(GST_MESSAGE_SRC(message)),
                 error->message);
      GstElement *source = gst_bin_get_by_name(GST_BIN(app->pipeline), "src");
      if (from_element(message, source)) app->source_warning = error->message;
      if (source) gst_object_unref(source);
      g_clear_error(&error);
      break;
    }
    case GST_MESSAGE_ELEMENT:
      if (gst_message_has_name(message, "cudanms-stats")) {
        gst_structure_get_double(gst_message_get_structure(message), "latency-p50-us",
                                 &app->last_stats_p50);
      }
      break;
    default:
      break;
  }
  return TRUE;
}

gboolean on_signal(gpointer data) {
  App *app = static_cast<App *>(data);
  if (app->finishing) {
    g_printerr("cudanms-run: interrupted again: stopping now\n");
    if (app->exit_code == kExitOk) app->exit_code = kExitError;
    g_main_loop_quit(app->loop);
    return G_SOURCE_CONTINUE;
  }
  g_printerr("cudanms-run: interrupted: ending the stream (again to stop at once)\n");
  app->finishing = true;
  gst_element_send_event(app->pipeline, gst_event_new_eos());
  app->finish_timer = g_timeout_add(static_cast<guint>(app->options.finish_timeout_s * 1000),
                                    on_finish_timeout, app);
  return G_SOURCE_CONTINUE;
}

bool add_probe(App *app, const char *name, GstPadProbeCallback callback) {
  GstElement *element = gst_bin_get_by_name(GST_BIN(app->pipeline), name);
  if (!element) return false;
  GstPad *pad = gst_element_get_static_pad(element, "src");
  if (pad) {
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, callback, app, nullptr);
    gst_object_unref(pad);
  }
  gst_object_unref(element);
  return pad != nullptr;
}

bool write_snapshot(App *app) {
  GstSample *sample = app->stats.snapshot;
  if (!sample) {
    g_printerr("cudanms-run: no frame reached the overlay: no snapshot written\n");
    return false;
  }
  GstCaps *png = gst_caps_new_empty_simple("image/png");
  GError *error = nullptr;
  GstSample *converted = gst_video_convert_sample(sample, png, 10 * GST_SECOND, &error);
  gst_caps_unref(png);
  bool ok = false;
  if (converted) {
    GstMapInfo map;
    GstBuffer *buf = gst_sample_get_buffer(converted);
    if (gst_buffer_map(buf, &map, GST_MAP_READ)) {
      ok = g_file_set_contents(app->options.snapshot, reinterpret_cast<const gchar *>(map.data),
                               map.size, &error);
      gst_buffer_unmap(buf, &map);
    }
    gst_sample_unref(converted);
  }
  if (!ok)
    g_printerr("cudanms-run: could not write %s: %s\n", app->options.snapshot,
               error ? error->message : "conversion failed");
  g_clear_error(&error);
  return ok;
}

}  // namespace

int main(int argc, char **argv) {
  App app;
  gint64 max_frames = 0, snapshot_frame = 0;
  GOptionEntry entries[] = {
      {"max-frames", 'n', 0, G_OPTION_ARG_INT64, &max_frames,
       "End the stream after N frames have passed cudanms (0: all)", "N"},
      {"snapshot", 0, 0, G_OPTION_ARG_FILENAME, &app.options.snapshot,
       "Write one frame, as it leaves the element named 'overlay', as PNG", "FILE"},
      {"snapshot-frame", 0, 0, G_OPTION_ARG_INT64, &snapshot_frame,
       "Which frame --snapshot takes (0: the first; the last if the stream is shorter)", "K"},
      {"progress", 0, 0, G_OPTION_ARG_DOUBLE, &app.options.progress_s,
       "Seconds between progress lines (default 2)", "S"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &app.options.quiet, "No progress lines", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  const CommandLineHelp help{
      "PIPELINE-DESCRIPTION",
      "Runs a gst-launch-1.0 style pipeline and reports cudanms progress and a summary.\n"
      "Named elements: 'nms' (cudanms), 'overlay' (for --snapshot), 'src' (the source: its\n"
      "errors end the stream cleanly with exit status 3, 'source lost')."};
  std::string parse_error;
  if (!gst_cv_parse_command_line(help, entries, &argc, &argv, &parse_error)) {
    g_printerr("cudanms-run: %s\n", parse_error.c_str());
    return kExitUsage;
  }
  if (argc < 2 || max_frames < 0 || snapshot_frame < 0) {
    g_printerr("usage: cudanms-run [--max-frames N] [--snapshot FILE] PIPELINE-DESCRIPTION\n");
    return kExitUsage;
  }
  app.options.max_frames = static_cast<guint64>(max_frames);
  app.options.snapshot_frame = static_cast<guint64>(snapshot_frame);

  // One argument is a whole description; several are its words, as gst-launch-1.0 takes them.
  GError *error = nullptr;
  if (argc == 2) {
    app.pipeline = gst_parse_launch(argv[1], &error);
  } else {
    gchar **words = g_new0(gchar *, argc);
    for (int i = 1; i < argc; i++) words[i - 1] = argv[i];
    app.pipeline = gst_parse_launchv(const_cast<const gchar **>(words), &error);
    g_free(words);
  }
  if (!app.pipeline || error) {
    g_printerr("cudanms-run: could not build the pipeline: %s\n",
               error ? error->message : "unknown error");
    g_clear_error(&error);
    return kExitError;
  }

  const bool have_nms = add_probe(&app, "nms", on_nms_buffer);
  if (!have_nms) g_printerr("cudanms-run: no element named 'nms': no NMS statistics\n");
  if (app.options.snapshot && !add_probe(&app, "overlay", on_overlay_buffer)) {
    g_printerr("cudanms-run: --snapshot needs an element named 'overlay'\n");
    gst_object_unref(app.pipeline);
    return kExitUsage;
  }

  app.loop = g_main_loop_new(nullptr, FALSE);
  GstBus *bus = gst_element_get_bus(app.pipeline);
  gst_bus_add_watch(bus, on_bus_message, &app);
  g_unix_signal_add(SIGINT, on_signal, &app);
  g_unix_signal_add(SIGTERM, on_signal, &app);
  if (app.options.progress_s > 0)
    g_timeout_add(static_cast<guint>(app.options.progress_s * 1000), on_progress_timer, &app);

  app.started_us = g_get_monotonic_time();
  if (gst_element_set_state(app.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    // The reason is an error message on the bus: let the loop report it.
    app.exit_code = kExitError;
  }
  g_main_loop_run(app.loop);
  // Where the detector named "detector" ran (cudacascade's device: a GPU or its CPU twin).
  std::string detector;
  if (GstElement *d = gst_bin_get_by_name(GST_BIN(app.pipeline), "detector")) {
    if (g_object_class_find_property(G_OBJECT_GET_CLASS(d), "device")) {
      gchar *device = nullptr;
      g_object_get(d, "device", &device, NULL);
      if (device && *device) {
        detector = std::string(", detector ") + GST_OBJECT_NAME(gst_element_get_factory(d)) +
                   " on " + device;
      }
      g_free(device);
    }
    gst_object_unref(d);
  }
  gst_cv_flush_jitterbuffers(app.pipeline);  // an RTSP camera's ended stream would hang NULL
  gst_element_set_state(app.pipeline, GST_STATE_NULL);
  const double elapsed = (g_get_monotonic_time() - app.started_us) / 1e6;

  if (app.options.snapshot && app.exit_code != kExitError) {
    if (write_snapshot(&app)) {
      g_print("snapshot: %s\n", app.options.snapshot);
    } else {
      app.exit_code = kExitError;  // it said why; a lost PNG is a failed run
    }
  }

  {
    std::lock_guard<std::mutex> guard(app.stats.lock);
    const Stats &s = app.stats;
    g_print("summary: frames %" G_GUINT64_FORMAT ", candidates %" G_GUINT64_FORMAT
            ", kept %" G_GUINT64_FORMAT ", NMS p50 %.1f us, backend %s%s, %.1f s (%.1f fps)\n",
            s.frames, s.candidates, s.kept, percentile(s.latencies_us, 0.5), s.backend.c_str(),
            detector.c_str(), elapsed, elapsed > 0 ? s.frames / elapsed : 0.0);
  }
  if (app.stats.snapshot) gst_sample_unref(app.stats.snapshot);
  gst_bus_remove_watch(bus);
  gst_object_unref(bus);
  gst_object_unref(app.pipeline);
  g_main_loop_unref(app.loop);
  g_free(app.options.snapshot);
  return app.exit_code;
}
