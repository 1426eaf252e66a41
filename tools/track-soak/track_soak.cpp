// cudanms-track-soak: the tracking chain run for minutes, its resident memory sampled, to show
// that tracks that come and go leave nothing behind:
//   appsrc (a moving scene's boxes as candidates, 320x240 frames) ! cudanms ! boxtrack !
//   boxcount (a line and a zone) ! boxoverlay (trails) ! jsonmetawriter (to /dev/null) ! fakesink
// Every --churn seconds of frames the scene is replaced by a new one: every track is lost, then
// removed, and as many new ones start (ids climb for ever; the state must not).
//   cudanms-track-soak [--minutes M] [--objects N] [--sample S] [--churn S]
// Prints "t=...s rss=... KiB" per sample, then RSS after the first minute (or the first sample
// past a tenth of the run), at the end, and the least-squares slope after it in KiB/min.
#include <gst/app/gstappsrc.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "commandline.h"
#include "moving_scene.h"

namespace {

constexpr int kWidth = 320, kHeight = 240, kFps = 30;

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 16, '\n');
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  double minutes = 10, sample_s = 10, churn_s = 20;
  gint objects = 40;
  const GOptionEntry entries[] = {
      {"minutes", 0, 0, G_OPTION_ARG_DOUBLE, &minutes, "How long (default 10)", "M"},
      {"objects", 0, 0, G_OPTION_ARG_INT, &objects, "Objects in the scene (default 40)", "N"},
      {"sample", 0, 0, G_OPTION_ARG_DOUBLE, &sample_s, "Seconds between RSS samples (default 10)",
       "S"},
      {"churn", 0, 0, G_OPTION_ARG_DOUBLE, &churn_s,
       "Seconds of frames between new scenes (default 20)", "S"},
      {}};
  const CommandLineHelp help{"",
                             "Runs cudanms ! boxtrack ! boxcount ! boxoverlay on a moving scene "
                             "for minutes and samples the process's resident memory."};
  std::string parse_error;
  if (!gst_cv_parse_command_line(help, entries, &argc, &argv, &parse_error)) {
    std::fprintf(stderr, "cudanms-track-soak: %s\n", parse_error.c_str());
    return 2;
  }
  if (minutes <= 0 || sample_s <= 0 || churn_s <= 0 || objects < 1) {
    std::fprintf(stderr,
                 "cudanms-track-soak: --minutes, --sample and --churn must be above 0, "
                 "--objects at least 1\n");
    return 2;
  }

  const std::string launch =
      "appsrc name=src format=time max-buffers=4 caps=video/x-raw,format=RGBx,width=" +
      std::to_string(kWidth) + ",height=" + std::to_string(kHeight) +
      ",framerate=30/1 ! cudanms ! boxtrack name=track ! boxcount normalized=true "
      "lines=middle:0.5,0,0.5,1 zones=\"left:0,0 0.5,0 0.5,1 0,1\" ! boxoverlay trail-length=30 ! "
      "jsonmetawriter location=/dev/null ! fakesink sync=false";
  GError *error = nullptr;
  GstElement *pipeline =
      gst_parse_launch_full(launch.c_str(), nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!pipeline) {
    std::fprintf(stderr, "cudanms-track-soak: %s (GST_PLUGIN_PATH: the build's plugins)\n",
                 error->message);
    return 1;
  }
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstBus *bus = gst_element_get_bus(pipeline);
  // An error ends the run, at once and said.
  auto failed = [&] {
    GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
    if (!m) return false;
    GError *e = nullptr;
    gst_message_parse_error(m, &e, nullptr);
    std::fprintf(stderr, "cudanms-track-soak: %s\n", e->message);
    g_clear_error(&e);
    gst_message_unref(m);
    return true;
  };
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE || failed())
    return 1;

  cudanms::tools::MovingSceneOptions options;
  options.objects = static_cast<size_t>(objects);
  options.width = kWidth;
  options.height = kHeight;
  uint64_t seed = 1;
  auto scene = std::make_unique<cudanms::tools::MovingScene>(options, seed);
  const size_t frame_bytes = static_cast<size_t>(kWidth) * kHeight * 4;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<std::pair<double, long>> samples;
  double next_sample = 0;
  for (guint64 frame = 0; elapsed() < minutes * 60; frame++) {
    if (frame > 0 && frame % static_cast<guint64>(churn_s * kFps) == 0)
      scene = std::make_unique<cudanms::tools::MovingScene>(options, ++seed);
    // At most max-buffers frames ahead of the pipeline, never waiting on one that failed.
    guint64 queued = 0;
    while (g_object_get(src, "current-level-buffers", &queued, NULL), queued >= 4) {
      if (failed()) return 1;
      g_usleep(100);
    }
    GstBuffer *buf = gst_buffer_new_allocate(nullptr, frame_bytes, nullptr);
    gst_buffer_memset(buf, 0, 0, frame_bytes);
    GST_BUFFER_PTS(buf) = gst_util_uint64_scale(frame, GST_SECOND, kFps);
    GST_BUFFER_DURATION(buf) = gst_util_uint64_scale(1, GST_SECOND, kFps);
    const std::vector<cudanms::Detection> dets = scene->next();
    GstCudaNmsCandidatesMeta *c =
        gst_buffer_add_cuda_nms_candidates_meta(buf, static_cast<guint>(dets.size()));
    for (const cudanms::Detection &d : dets)
      gst_cuda_nms_candidates_meta_append(c, d.x1, d.y1, d.x2, d.y2, d.score, d.class_id);
    if (gst_app_src_push_buffer(GST_APP_SRC(src), buf) != GST_FLOW_OK) {
      std::fprintf(stderr, "cudanms-track-soak: the pipeline stopped\n");
      return 1;
    }
    if (elapsed() >= next_sample) {
      samples.emplace_back(elapsed(), resident_kib());
      std::printf("t=%.0fs frames=%llu rss=%ld KiB\n", samples.back().first,
                  static_cast<unsigned long long>(frame), samples.back().second);
      std::fflush(stdout);
      next_sample += sample_s;
    }
  }
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool eos = end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
  if (end) gst_message_unref(end);
  gst_object_unref(bus);
  guint64 next_id = 0;
  GstElement *track = gst_bin_get_by_name(GST_BIN(pipeline), "track");
  if (track) {
    g_object_get(track, "next-id", &next_id, NULL);
    gst_object_unref(track);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(src);
  gst_object_unref(pipeline);

  // The slope after the warm-up: the first minute, or a tenth of a short run.
  const double warm = std::min(60.0, minutes * 6);
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  long first = 0, last = samples.empty() ? 0 : samples.back().second;
  for (const auto &[t, rss] : samples) {
    if (t < warm) continue;
    if (n == 0) first = rss;
    n++;
    sx += t;
    sy += rss;
    sxx += t * t;
    sxy += t * rss;
  }
  const double slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60 : 0;
  std::printf(
      "track-soak: %.1f min, %llu ids given, RSS after %.0f s %ld KiB, at the end %ld KiB, slope "
      "after it %.1f KiB/min\n",
      minutes, static_cast<unsigned long long>(next_id > 0 ? next_id - 1 : 0), warm, first, last,
      slope);
  return eos ? 0 : 1;
}
