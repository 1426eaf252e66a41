// cudanms-streams' figures: the probes that time each element's work on a frame, the GPU memory
// the process holds, and the summary at the end.
#include <gst/cudanms/cudanmsmeta.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "percentile.h"
#include "streams_app.h"

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

// Timing probes: an in-place element runs between its sink pad and its src pad on the stream's
// thread, so the two probes bracket exactly its work on the frame.

struct Probe {
  Stream *stream;
  int element;
};

GstPadProbeReturn on_enter(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *p = static_cast<Probe *>(data);
  p->stream->element_start_us[p->element] = g_get_monotonic_time();
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_leave(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *p = static_cast<Probe *>(data);
  Stream *s = p->stream;
  const gint64 now = g_get_monotonic_time();
  s->element_us[p->element].push_back(static_cast<double>(now - s->element_start_us[p->element]));
  if (p->element == 1) {
    s->chain_us.push_back(static_cast<double>(now - s->element_start_us[0]));
    if (const GstCudaNmsResultMeta *r =
            gst_buffer_get_cuda_nms_result_meta(GST_PAD_PROBE_INFO_BUFFER(info)))
      if (r->gpu_time_ns > 0) s->nms_gpu_us.push_back(r->gpu_time_ns / 1000.0);
    s->out_us.push_back(now);
    s->frames.fetch_add(1, std::memory_order_relaxed);
    if (s->host_cpu) s->host_cpu->frame_out(now);
  }
  return GST_PAD_PROBE_OK;
}

double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

// How long the process's threads have waited for a CPU while runnable, summed (the scheduler's
// own count, /proc/self/task/*/schedstat's second field); -1 where the kernel does not say. A
// chain short of CPUs shows here, where its own CPU time does not.
double threads_cpu_wait_s() {
  GDir *dir = g_dir_open("/proc/self/task", 0, nullptr);
  if (!dir) return -1;
  double sum = 0;
  bool read = false;
  while (const char *tid = g_dir_read_name(dir)) {
    const std::string path = std::string("/proc/self/task/") + tid + "/schedstat";
    FILE *f = std::fopen(path.c_str(), "r");
    if (!f) continue;  // the thread has just ended
    unsigned long long ran_ns = 0, waited_ns = 0;
    if (std::fscanf(f, "%llu %llu", &ran_ns, &waited_ns) == 2) sum += waited_ns / 1e9, read = true;
    std::fclose(f);
  }
  g_dir_close(dir);
  return read ? sum : -1;
}

// The time the hypervisor gave this machine's CPUs to others (/proc/stat's steal, all CPUs
// summed), seconds; -1 where the kernel does not say.
double cpus_steal_s() {
  FILE *f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long steal = 0;  // the eighth figure, after user ... softirq
  const int read = std::fscanf(f, "cpu %*u %*u %*u %*u %*u %*u %*u %llu", &steal);
  std::fclose(f);
  return read == 1 ? static_cast<double>(steal) / sysconf(_SC_CLK_TCK) : -1;
}

// One GPU's streams (--gpus): their frames/s from their first frame to their last, their
// elements' time per frame, and the memory the process added on the device.
struct GpuFigures {
  unsigned gpu = 0;
  int streams = 0;
  guint64 frames = 0;
  double fps = 0, detector_p50_us = 0, nms_p50_us = 0, memory_mib = 0;
};

double memory_mib(const App &app, unsigned gpu) {
  const auto running = app.gpu_used_running.find(gpu), before = app.gpu_used_before.find(gpu);
  if (running == app.gpu_used_running.end() || before == app.gpu_used_before.end()) return 0;
  return (running->second - std::min(running->second, before->second)) / (1024.0 * 1024.0);
}

GpuFigures gpu_figures(const App &app, unsigned gpu) {
  GpuFigures g;
  g.gpu = gpu;
  std::vector<double> detector, nms;
  gint64 first = G_MAXINT64, last = 0;
  for (const auto &s : app.streams) {
    if (s->gpu != static_cast<int>(gpu)) continue;
    g.streams++;
    g.frames += s->frames;
    detector.insert(detector.end(), s->element_us[0].begin(), s->element_us[0].end());
    nms.insert(nms.end(), s->element_us[1].begin(), s->element_us[1].end());
    if (!s->out_us.empty())
      first = std::min(first, s->out_us.front()), last = std::max(last, s->out_us.back());
  }
  if (last > first) g.fps = (g.frames - 1) / ((last - first) / 1e6);
  g.detector_p50_us = percentile(detector, 0.5);
  g.nms_p50_us = percentile(nms, 0.5);
  g.memory_mib = memory_mib(app, gpu);
  return g;
}

// Frames/s over the run's second half by time: past its start (streams starting one after
// another), which weighs in a short run's total and not in the rate cameras get hour after hour.
double second_half_fps(const App &app, gint64 first, gint64 last) {
  if (last <= first) return 0;
  const gint64 middle = first + (last - first) / 2;
  guint64 frames = 0;
  for (const auto &s : app.streams)
    frames += s->out_us.end() - std::upper_bound(s->out_us.begin(), s->out_us.end(), middle);
  return frames / ((last - middle) / 1e6);
}

}  // namespace

void HostCpu::frame_out(gint64 now_us) {
  const guint64 n = out.fetch_add(1, std::memory_order_relaxed) + 1;
  // Twice a run, on the thread of the frame that marks it: a small read a thread.
  if (n == half) {
    start_cpu_s = process_cpu_s();
    start_wait_s = threads_cpu_wait_s();
    start_steal_s = cpus_steal_s();
    start_us = now_us;
  }
  if (n == total) {
    end_cpu_s = process_cpu_s();
    end_wait_s = threads_cpu_wait_s();
    end_steal_s = cpus_steal_s();
    end_us = now_us;
  }
}

void watch(GstElement *element, Stream *stream, int which) {
  auto *probe = new Probe{stream, which};
  GstPad *sink = gst_element_get_static_pad(element, "sink");
  GstPad *src = gst_element_get_static_pad(element, "src");
  gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_BUFFER, on_enter, probe, nullptr);
  gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, on_leave, probe,
                    [](gpointer p) { delete static_cast<Probe *>(p); });
  gst_object_unref(sink);
  gst_object_unref(src);
}

size_t gpu_memory_used(unsigned gpu) {
#ifdef CUDANMS_HAVE_CUDA
  size_t free_bytes = 0, total = 0;
  if (cudaSetDevice(static_cast<int>(gpu)) == cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
    return total - free_bytes;
#else
  (void)gpu;
#endif
  return 0;
}

void sample_gpu_memory(App *app) {
  for (unsigned gpu : app->gpus)
    app->gpu_used_running[gpu] = std::max(app->gpu_used_running[gpu], gpu_memory_used(gpu));
}

namespace {

// Every figure of the run once, by its JSON name (wall_s, the run's wall time, only for the
// text); the text lines pick them from here.
using Figures = std::vector<std::pair<const char *, double>>;

double figure(const Figures &figures, const char *name) {
  for (const auto &f : figures)
    if (std::strcmp(f.first, name) == 0) return f.second;
  return 0.0;
}

// The streams' samples and counts, pooled.
struct Pooled {
  std::vector<double> detector, nms, chain, nms_gpu;
  guint64 frames = 0, published = 0, dropped = 0, pictures = 0;
  double slowest = 1e300, fastest = 0;
  gint64 first = G_MAXINT64, last = 0;  // the first and the last frame out of any stream
  double mean_batch = 0, mean_fill_ms = 0, mean_launch_ms = 0;
  double forward_gpu_ms = 0, decode_gpu_ms = 0, idle_gpu_ms = 0;
};

// The detector's stream: its share of time busy with batches (0 where it was not timed).
double stream_busy_percent(const Pooled &p) {
  const double busy = p.forward_gpu_ms + p.decode_gpu_ms;
  return busy > 0 ? 100.0 * busy / (busy + p.idle_gpu_ms) : 0.0;
}

Pooled pool_streams(const App &app) {
  Pooled p;
  const double n = static_cast<double>(app.streams.size());
  for (const auto &s : app.streams) {
    p.detector.insert(p.detector.end(), s->element_us[0].begin(), s->element_us[0].end());
    p.nms.insert(p.nms.end(), s->element_us[1].begin(), s->element_us[1].end());
    p.chain.insert(p.chain.end(), s->chain_us.begin(), s->chain_us.end());
    p.nms_gpu.insert(p.nms_gpu.end(), s->nms_gpu_us.begin(), s->nms_gpu_us.end());
    p.frames += s->frames;
    p.published += s->published;
    p.dropped += s->dropped;
    p.pictures += s->pictures;
    const double seconds = s->out_us.empty() ? 0 : (s->out_us.back() - s->out_us.front()) / 1e6;
    const double fps = seconds > 0 ? (s->frames - 1) / seconds : 0;
    p.slowest = std::min(p.slowest, fps);
    p.fastest = std::max(p.fastest, fps);
    if (!s->out_us.empty())
      p.first = std::min(p.first, s->out_us.front()), p.last = std::max(p.last, s->out_us.back());
    p.mean_batch += s->mean_batch / n;
    p.mean_fill_ms += s->mean_fill_ms / n;
    p.mean_launch_ms += s->mean_launch_ms / n;
    p.forward_gpu_ms += s->forward_gpu_ms / n;
    p.decode_gpu_ms += s->decode_gpu_ms / n;
    p.idle_gpu_ms += s->idle_gpu_ms / n;
  }
  return p;
}

Figures run_figures(const App *app) {
  const Pooled p = pool_streams(*app);
  // From the first frame out of any stream to the last: the chain's aggregate throughput.
  const double wall = p.last > p.first ? (p.last - p.first) / 1e6 : 0;
  const double total_fps = wall > 0 ? (p.frames - 1) / wall : 0;
  // NMS's own GPU work against the whole chain's time per frame (cudanms's time between its pads
  // also holds the wait for the detector's GPU work, which it is ordered after).
  double chain_sum = 0, gpu_sum = 0;
  for (double v : p.chain) chain_sum += v;
  for (double v : p.nms_gpu) gpu_sum += v;
  const double share = chain_sum > 0 && !p.nms_gpu.empty() ? 100.0 * gpu_sum / chain_sum : 0;
  double memory = 0;
  for (unsigned gpu : app->gpus) memory += memory_mib(*app, gpu);
  const HostCpu &cpu = app->host_cpu;
  const bool timed = cpu.end_us > cpu.start_us && cpu.total > cpu.half;
  const double cpu_s = timed ? cpu.end_cpu_s - cpu.start_cpu_s : 0;
  // Threads that ended in between take their waits along: never below 0.
  const double wait_s = timed && cpu.start_wait_s >= 0 && cpu.end_wait_s >= 0
                            ? std::max(0.0, cpu.end_wait_s - cpu.start_wait_s)
                            : -1;
  const double steal_s = timed && cpu.start_steal_s >= 0 && cpu.end_steal_s >= 0
                             ? cpu.end_steal_s - cpu.start_steal_s
                             : -1;
  const int n = static_cast<int>(app->streams.size());
  return {{"streams", n},
          {"frames", static_cast<double>(p.frames)},
          {"total_fps", total_fps},
          {"second_half_fps", second_half_fps(*app, p.first, p.last)},
          {"min_stream_fps", p.slowest},
          {"max_stream_fps", p.fastest},
          {"chain_p50_us", percentile(p.chain, 0.5)},
          {"chain_p99_us", percentile(p.chain, 0.99)},
          {"detector_p50_us", percentile(p.detector, 0.5)},
          {"detector_p99_us", percentile(p.detector, 0.99)},
          {"nms_p50_us", percentile(p.nms, 0.5)},
          {"nms_p99_us", percentile(p.nms, 0.99)},
          {"nms_gpu_p50_us", percentile(p.nms_gpu, 0.5)},
          {"nms_gpu_p99_us", percentile(p.nms_gpu, 0.99)},
          {"nms_share_percent", share},
          {"gpu_memory_mib", memory},
          {"published", static_cast<double>(p.published)},
          {"dropped", static_cast<double>(p.dropped)},
          {"messages_per_s", wall > 0 ? p.published / wall : 0},
          {"detector_queue", static_cast<double>(app->options.detector_queue)},
          {"detector_mean_batch", p.mean_batch},
          {"detector_fill_ms", p.mean_fill_ms},
          {"detector_launch_ms", p.mean_launch_ms},
          {"detector_forward_gpu_ms", p.forward_gpu_ms},
          {"detector_decode_gpu_ms", p.decode_gpu_ms},
          {"detector_idle_gpu_ms", p.idle_gpu_ms},
          {"detector_gpu_busy_percent", stream_busy_percent(p)},
          {"pictures", static_cast<double>(p.pictures)},
          {"host_cpu_us_per_frame", timed ? 1e6 * cpu_s / (cpu.total - cpu.half) : 0},
          {"host_cpu_cores", timed ? cpu_s / ((cpu.end_us - cpu.start_us) / 1e6) : 0},
          {"host_cpu_wait_us_per_frame", wait_s >= 0 ? 1e6 * wait_s / (cpu.total - cpu.half) : -1},
          {"host_steal_cores", steal_s >= 0 ? steal_s / ((cpu.end_us - cpu.start_us) / 1e6) : -1},
          {"wall_s", wall}};
}

void print_figures(const App *app, const Figures &figures, const std::vector<GpuFigures> &per_gpu) {
  auto fig = [&figures](const char *name) { return figure(figures, name); };
  const int n = static_cast<int>(fig("streams"));
  const double wall = fig("wall_s");
  g_print("streams %d  frames %" G_GUINT64_FORMAT "  total %.1f fps  per stream %.1f..%.1f fps\n",
          n, static_cast<guint64>(fig("frames")), fig("total_fps"), fig("min_stream_fps"),
          fig("max_stream_fps"));
  g_print("second half of the run: %.1f fps\n", fig("second_half_fps"));
  g_print(
      "per frame p50/p99 (us): chain %.0f/%.0f  detector %.0f/%.0f  cudanms %.0f/%.0f  "
      "NMS GPU work %.0f/%.0f\n",
      fig("chain_p50_us"), fig("chain_p99_us"), fig("detector_p50_us"), fig("detector_p99_us"),
      fig("nms_p50_us"), fig("nms_p99_us"), fig("nms_gpu_p50_us"), fig("nms_gpu_p99_us"));
  g_print("NMS share %.2f%% of the chain's time  GPU memory %.0f MiB (%.1f MiB per stream)\n",
          fig("nms_share_percent"), fig("gpu_memory_mib"), n ? fig("gpu_memory_mib") / n : 0);
  if (fig("detector_mean_batch") > 0)
    g_print(
        "detector: %.2f frames per forward on average, a batch filled in %.3f ms and launched in "
        "%.3f ms\n",
        fig("detector_mean_batch"), fig("detector_fill_ms"), fig("detector_launch_ms"));
  const double forward = fig("detector_forward_gpu_ms"), decode = fig("detector_decode_gpu_ms");
  const double idle = fig("detector_idle_gpu_ms");
  if (forward > 0)
    g_print(
        "detector's stream on the GPU, a batch: forward %.3f ms, decoding %.3f ms, idle between "
        "batches %.3f ms (busy %.1f%%)\n",
        forward, decode, idle, fig("detector_gpu_busy_percent"));
  if (fig("host_cpu_cores") > 0)
    g_print("host CPU over the second half of the frames: %.1f us a frame, %.2f cores busy\n",
            fig("host_cpu_us_per_frame"), fig("host_cpu_cores"));
  if (fig("host_cpu_cores") > 0 && fig("host_cpu_wait_us_per_frame") >= 0)
    g_print("threads runnable without a CPU over the second half: %.1f us a frame\n",
            fig("host_cpu_wait_us_per_frame"));
  if (fig("host_cpu_cores") > 0 && fig("host_steal_cores") >= 0)
    g_print("the hypervisor took %.2f of this machine's cores over the second half (steal)\n",
            fig("host_steal_cores"));
  if (app->options.snapshots_s > 0)
    g_print("snapshots: %.0f pictures (%.1f/s)\n", fig("pictures"),
            wall > 0 ? fig("pictures") / wall : 0);
  for (const GpuFigures &g : per_gpu)
    g_print(
        "GPU %u: %d streams  %.1f fps  detector p50 %.0f us  cudanms p50 %.0f us  memory %.0f "
        "MiB\n",
        g.gpu, g.streams, g.fps, g.detector_p50_us, g.nms_p50_us, g.memory_mib);
  if (app->options.publish) {
    g_print("published to %s: %.0f messages (%.1f/s), dropped %.0f\n", app->options.publish,
            fig("published"), fig("messages_per_s"), fig("dropped"));
    for (const auto &s : app->streams) {
      g_print("  %s: %" G_GUINT64_FORMAT " published, %" G_GUINT64_FORMAT " dropped\n",
              s->camera_id.c_str(), s->published, s->dropped);
    }
  }
}

void write_figures(const char *path, const Figures &figures,
                   const std::vector<GpuFigures> &per_gpu) {
  FILE *f = fopen(path, "w");
  if (!f) {
    g_printerr("cannot write %s\n", path);
    return;
  }
  for (size_t i = 0; i < figures.size(); ++i) {
    if (std::strcmp(figures[i].first, "wall_s") == 0) continue;
    fprintf(f, "%s\"%s\": %.10g", i ? ", " : "{", figures[i].first, figures[i].second);
  }
  if (!per_gpu.empty()) {
    fprintf(f, ", \"per_gpu\": [");
    for (size_t i = 0; i < per_gpu.size(); ++i) {
      const GpuFigures &g = per_gpu[i];
      fprintf(f,
              "%s{\"gpu\": %u, \"streams\": %d, \"frames\": %" G_GUINT64_FORMAT
              ", \"fps\": %.10g, \"detector_p50_us\": %.10g, \"nms_p50_us\": %.10g, "
              "\"gpu_memory_mib\": %.10g}",
              i ? ", " : "", g.gpu, g.streams, g.frames, g.fps, g.detector_p50_us, g.nms_p50_us,
              g.memory_mib);
    }
    fprintf(f, "]");
  }
  fprintf(f, "}\n");
  fclose(f);
}

}  // namespace

void summarize(App *app) {
  const Figures figures = run_figures(app);
  std::vector<GpuFigures> per_gpu;
  if (app->options.gpus)
    for (unsigned gpu : app->gpus) per_gpu.push_back(gpu_figures(*app, gpu));
  print_figures(app, figures, per_gpu);
  if (app->options.json) write_figures(app->options.json, figures, per_gpu);
}
