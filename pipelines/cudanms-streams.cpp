// cudanms-streams: many video streams through "cudacascade ! cudanms" on the GPUs of a host, in
// one process. Each stream is a branch of one pipeline with its own streaming thread, so the
// streams' GPU work interleaves on the elements' own CUDA streams. --gpus spreads the streams over
// several GPUs, stream i on the (i mod G)-th: every element of its chain (NVDEC, detector, NMS)
// and its preloaded frames on that GPU, so that no frame crosses GPUs.
//
//   cudanms-streams [options] SOURCE...      one stream per file or URI (rtsp://, file://, ...),
//                                            decoded as it comes (uridecodebin)
//   cudanms-streams --preload FILE --streams N [--frames F]
//                                            FILE's first --preload-frames frames decoded once and
//                                            scaled to --size; N streams push them in a loop, as
//                                            fast as the chain takes them: decode excluded
//                                            (--preload-gpu: uploaded once, in GPU memory)
//   cudanms-streams --nvdec SOURCE...        H.264 sources decoded by NVDEC into GPU memory
//
// With --preload-gpu or --nvdec the pipelines share the device's primary CUDA context (the CUDA
// runtime's and LibTorch's), so the frames are read where NVDEC or the upload left them.
//
// Every --progress seconds: frames/s per stream and in total. At the end, one summary: frames/s
// per stream and in total, each element's time per frame (p50/p99, measured on the stream's
// thread from the element's sink pad to its src pad), the NMS element's share of the per-frame
// time, and the GPU memory the process holds; with --gpus the same per GPU. --json FILE writes
// the summary as JSON.
// Exit status: 0 done, 1 pipeline error, 2 usage.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudanms/nms.h"
#include "elementcudacontext.h"
#include "gpulist.h"
#include "nvdec.h"
#include "streams_workers.h"

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

struct Options {
  gchar *preload = nullptr;
  gint streams = 1;
  gint64 frames = -1;  // per stream: with --preload 300 when not given; 0: until they end
  gint preload_frames = 30;
  gboolean preload_gpu = FALSE;  // the preloaded frames in GPU memory (NV12, cudaupload)
  gboolean nvdec = FALSE;        // sources decoded by nvh264dec into GPU memory
  gchar *gpus = nullptr;         // "all" or indices: the streams spread over these GPUs
  gchar *workers = nullptr;      // "per-gpu": a process per GPU of --gpus; "one" (default)
  gint worker_of = -1;           // a per-gpu worker: the J-th GPU of --gpus, its streams alone
  gchar *size = nullptr;
  gchar *detector = nullptr;
  gchar *nms = nullptr;
  gboolean host_candidates = FALSE;  // the default detector's candidates copied to the host
  gboolean batch_streams = FALSE;    // cudanms batch-streams=true
  gboolean track = FALSE;            // boxtrack ! boxcount after cudanms
  gdouble progress_s = 2.0;
  gchar *json = nullptr;
  gboolean quiet = FALSE;
  gboolean realtime = FALSE;
  // --publish: every stream's detections to this MQTT broker (metapublish).
  gchar *publish = nullptr;
  gchar *topic = nullptr;
  gchar *format = nullptr;
  gchar *camera_ids = nullptr;  // comma-separated, one per stream
  gint qos = 0;
};

// The frontal face cascade of opencv-data (under $CUDANMS_OPENCV_DATA when set), faces of 50 to
// 200 pixels, scale factor 1.25.
std::string default_detector() {
  const char *data = g_getenv("CUDANMS_OPENCV_DATA");
  return std::string("cudacascade model=\"") + (data ? data : "/usr/share/opencv4") +
         "/haarcascades/haarcascade_frontalface_default.xml\" min-size=50x50 max-size=200x200 "
         "scale-factor=1.25";
}
const char *kDefaultNms = "cudanms iou-threshold=0.3";

// Per stream, written on its streaming thread only (and read after the pipeline has stopped, or
// for progress through the atomic frame count).
struct Stream {
  int index = 0;
  int gpu = -1;  // --gpus: the GPU its chain runs on
  std::string camera_id;
  guint64 published = 0, dropped = 0;  // --publish: metapublish's counts at the end
  double mean_batch = 0;               // a batching detector's (dnndetect) frames per forward
  std::atomic<guint64> frames{0};
  gint64 first_us = 0, last_us = 0;
  gint64 element_start_us[2] = {0, 0};
  std::vector<double> element_us[2];  // 0: the detector, 1: cudanms (host time between pads)
  std::vector<double> chain_us;       // the detector's sink pad to cudanms's src pad
  std::vector<double> nms_gpu_us;     // cudanms's own GPU work (its time-gpu)
  // --preload: the frames to push, and how many were pushed.
  const std::vector<GstBuffer *> *source = nullptr;
  guint64 pushed = 0;
  guint64 limit = 0;
  GstClockTime duration = 0;
};

struct App {
  Options options;
  GstElement *pipeline = nullptr;
  GMainLoop *loop = nullptr;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<unsigned> gpus;  // the GPUs the streams run on (--gpus; else GPU 0)
  // --preload: the frames, per GPU with --preload-gpu (each GPU reads its own copy), and a copy
  // per kStreamsPerCopy streams of a GPU (or of the host): copies[k] is the k-th.
  std::map<unsigned, std::vector<std::vector<GstBuffer *>>> preloaded;
  GstCaps *preloaded_caps = nullptr;
  int preload_stride = 1;  // copies_needed()
  // --preload-gpu, --nvdec, --gpus: each GPU's primary context, shared by its streams.
  std::map<unsigned, GstContext *> cuda_contexts;
  int exit_code = 0;
  gint64 started_us = 0;
  std::map<unsigned, size_t> gpu_used_before;   // each device's used memory before the pipeline
  std::map<unsigned, size_t> gpu_used_running;  // the most seen while it ran
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  size_t rank = static_cast<size_t>(std::ceil(p * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
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

// --gpus: "all" (every GPU CUDA shows) or indices of visible GPUs; false with the reason.
bool parse_gpus(const char *text, std::vector<unsigned> *gpus, std::string *why) {
  const unsigned visible = static_cast<unsigned>(cudanms::cuda_device_count());
  bool all = false;
  std::string unused;
  bool good = gst_cv_parse_gpu_list(text, gpus, &all, &unused) && (all || !gpus->empty());
  for (unsigned gpu : *gpus) good &= gpu < visible;
  if (!good) {
    *why = std::string("--gpus \"") + text + "\": all, or indices of the " +
           std::to_string(visible) + " visible GPUs, each once";
    return false;
  }
  for (unsigned gpu = 0; all && gpu < visible; ++gpu) gpus->push_back(gpu);
  if (gpus->empty()) *why = "--gpus: no CUDA device visible";
  return !gpus->empty();
}

// The NVDEC H.264 decoder of `gpu` (nvh264dec on the first: also where the plugin does not say
// which GPU its decoders use).
std::string nvdec_for(unsigned gpu) {
  const std::string name = gst_cv_nvdec_for("h264", static_cast<int>(gpu));
  return name.empty() && gpu == 0 ? "nvh264dec" : name;
}

// ---------------------------------------------------------------------------------------------
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
    if (s->first_us == 0) s->first_us = now;
    s->last_us = now;
    s->frames.fetch_add(1, std::memory_order_relaxed);
  }
  return GST_PAD_PROBE_OK;
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

// ---------------------------------------------------------------------------------------------
// --preload: the frames, decoded once.

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

// ---------------------------------------------------------------------------------------------
// The pipeline: one branch per stream.

// Stream i's camera id: the i-th of --camera-ids, else stream-<i>.
std::string camera_id(const Options &o, int i) {
  if (o.camera_ids) {
    gchar **ids = g_strsplit(o.camera_ids, ",", -1);
    std::string id = i < static_cast<int>(g_strv_length(ids)) ? g_strstrip(ids[i]) : "";
    g_strfreev(ids);
    if (!id.empty()) return id;
  }
  return "stream-" + std::to_string(i);
}

// Stream i's GPU: the (i mod G)-th of --gpus (GPU 0 without).
unsigned gpu_of(const App &app, int i) {
  return app.gpus[static_cast<size_t>(i) % app.gpus.size()];
}

std::string branch(const App &app, int i, const char *source) {
  const std::string n = std::to_string(i);
  std::string head;
  if (app.options.preload) {
    head = "appsrc name=src" + n + " format=time is-live=false";
  } else {
    gchar *uri = gst_uri_is_valid(source) ? g_strdup(source) : gst_filename_to_uri(source, nullptr);
    const std::string quoted = std::string("uri=\"") + (uri ? uri : source) + "\"";
    // --nvdec: H.264 parsed out of whatever carries it, decoded into GPU memory.
    head = app.options.nvdec ? "urisourcebin " + quoted + " ! parsebin ! " +
                                   nvdec_for(gpu_of(app, i)) + " name=dec" + n
                             : "uridecodebin " + quoted + " ! videoconvert";
    g_free(uri);
    // --frames with sources: each stream ends after that many (a camera never ends by itself);
    // identity's eos-after counts the buffer it ends on.
    if (app.options.frames > 0)
      head += " ! identity eos-after=" + std::to_string(app.options.frames + 1);
  }
  const Options &o = app.options;
  std::string publish;
  if (o.publish) {
    const std::string id = camera_id(o, i);
    publish = " ! metapublish name=pub" + n + " method=mqtt address=\"" + o.publish +
              "\" topic=\"" + o.topic + "/" + id + "\" camera-id=\"" + id +
              "\" format=" + o.format + " qos=" + std::to_string(o.qos);
  }
  // --track: ids for the kept boxes, counted over a line through the middle of the frame.
  const std::string track = o.track ? " ! boxtrack name=track" + n + " ! boxcount name=count" + n +
                                          " normalized=true lines=middle:0.5,0,0.5,1"
                                    : "";
  // --realtime: each stream at its frames' rate, as live cameras deliver them.
  return head + " ! " + o.detector + " name=detector" + n + " ! " + o.nms + " name=nms" + n +
         track + publish + " ! fakesink sync=" + (o.realtime ? "true" : "false") + " async=false ";
}

gboolean on_bus(GstBus *, GstMessage *message, gpointer data) {
  auto *app = static_cast<App *>(data);
  switch (GST_MESSAGE_TYPE(message)) {
    case GST_MESSAGE_ERROR: {
      GError *error = nullptr;
      gchar *debug = nullptr;
      gst_message_parse_error(message, &error, &debug);
      g_printerr("error from %s: %s\n%s\n", GST_OBJECT_NAME(message->src), error->message,
                 debug ? debug : "");
      g_clear_error(&error);
      g_free(debug);
      app->exit_code = 1;
      g_main_loop_quit(app->loop);
      break;
    }
    case GST_MESSAGE_EOS:
      sample_gpu_memory(app);
      g_main_loop_quit(app->loop);
      break;
    default:
      break;
  }
  return TRUE;
}

gboolean on_progress(gpointer data) {
  auto *app = static_cast<App *>(data);
  sample_gpu_memory(app);
  const double elapsed = (g_get_monotonic_time() - app->started_us) / 1e6;
  guint64 total = 0;
  g_print("%6.1f s ", elapsed);
  for (const auto &s : app->streams) {
    const guint64 f = s->frames.load(std::memory_order_relaxed);
    total += f;
    if (app->streams.size() <= 8) g_print(" [%d] %.1f fps", s->index, f / elapsed);
  }
  g_print("  total %.1f fps (%" G_GUINT64_FORMAT " frames)\n", total / elapsed, total);
  return G_SOURCE_CONTINUE;
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
    if (s->frames > 0) first = std::min(first, s->first_us), last = std::max(last, s->last_us);
  }
  if (last > first) g.fps = (g.frames - 1) / ((last - first) / 1e6);
  g.detector_p50_us = percentile(detector, 0.5);
  g.nms_p50_us = percentile(nms, 0.5);
  g.memory_mib = memory_mib(app, gpu);
  return g;
}

void summarize(App *app) {
  std::vector<double> detector, nms, chain, nms_gpu;
  guint64 frames = 0, published = 0, dropped = 0;
  double slowest = 1e300, fastest = 0;
  gint64 first = G_MAXINT64, last = 0;
  for (const auto &s : app->streams) {
    detector.insert(detector.end(), s->element_us[0].begin(), s->element_us[0].end());
    nms.insert(nms.end(), s->element_us[1].begin(), s->element_us[1].end());
    chain.insert(chain.end(), s->chain_us.begin(), s->chain_us.end());
    nms_gpu.insert(nms_gpu.end(), s->nms_gpu_us.begin(), s->nms_gpu_us.end());
    frames += s->frames;
    published += s->published;
    dropped += s->dropped;
    const double seconds = (s->last_us - s->first_us) / 1e6;
    const double fps = seconds > 0 ? (s->frames - 1) / seconds : 0;
    slowest = std::min(slowest, fps);
    fastest = std::max(fastest, fps);
    if (s->frames > 0) first = std::min(first, s->first_us), last = std::max(last, s->last_us);
  }
  // From the first frame out of any stream to the last: the chain's aggregate throughput.
  const double wall = last > first ? (last - first) / 1e6 : 0;
  const double total_fps = wall > 0 ? (frames - 1) / wall : 0;
  // NMS's own GPU work against the whole chain's time per frame (cudanms's time between its pads
  // also holds the wait for the detector's GPU work, which it is ordered after).
  double chain_sum = 0, gpu_sum = 0;
  for (double v : chain) chain_sum += v;
  for (double v : nms_gpu) gpu_sum += v;
  const double share = chain_sum > 0 && !nms_gpu.empty() ? 100.0 * gpu_sum / chain_sum : 0;
  double memory = 0;
  for (unsigned gpu : app->gpus) memory += memory_mib(*app, gpu);
  const int n = static_cast<int>(app->streams.size());
  double mean_batch = 0;
  for (const auto &s : app->streams) mean_batch += n ? s->mean_batch / n : 0;
  // Every figure once, by its JSON name; the text lines below pick them from here.
  const std::vector<std::pair<const char *, double>> figures = {
      {"streams", n},
      {"frames", static_cast<double>(frames)},
      {"total_fps", total_fps},
      {"min_stream_fps", slowest},
      {"max_stream_fps", fastest},
      {"chain_p50_us", percentile(chain, 0.5)},
      {"chain_p99_us", percentile(chain, 0.99)},
      {"detector_p50_us", percentile(detector, 0.5)},
      {"detector_p99_us", percentile(detector, 0.99)},
      {"nms_p50_us", percentile(nms, 0.5)},
      {"nms_p99_us", percentile(nms, 0.99)},
      {"nms_gpu_p50_us", percentile(nms_gpu, 0.5)},
      {"nms_gpu_p99_us", percentile(nms_gpu, 0.99)},
      {"nms_share_percent", share},
      {"gpu_memory_mib", memory},
      {"published", static_cast<double>(published)},
      {"dropped", static_cast<double>(dropped)},
      {"messages_per_s", wall > 0 ? published / wall : 0},
      {"detector_mean_batch", mean_batch}};
  auto fig = [&figures](size_t i) { return figures[i].second; };
  g_print("streams %d  frames %" G_GUINT64_FORMAT "  total %.1f fps  per stream %.1f..%.1f fps\n",
          n, frames, fig(2), fig(3), fig(4));
  g_print(
      "per frame p50/p99 (us): chain %.0f/%.0f  detector %.0f/%.0f  cudanms %.0f/%.0f  "
      "NMS GPU work %.0f/%.0f\n",
      fig(5), fig(6), fig(7), fig(8), fig(9), fig(10), fig(11), fig(12));
  g_print("NMS share %.2f%% of the chain's time  GPU memory %.0f MiB (%.1f MiB per stream)\n",
          fig(13), fig(14), n ? fig(14) / n : 0);
  if (fig(18) > 0) g_print("detector: %.2f frames per forward on average\n", fig(18));
  std::vector<GpuFigures> per_gpu;
  if (app->options.gpus)
    for (unsigned gpu : app->gpus) per_gpu.push_back(gpu_figures(*app, gpu));
  for (const GpuFigures &g : per_gpu)
    g_print(
        "GPU %u: %d streams  %.1f fps  detector p50 %.0f us  cudanms p50 %.0f us  memory %.0f "
        "MiB\n",
        g.gpu, g.streams, g.fps, g.detector_p50_us, g.nms_p50_us, g.memory_mib);
  if (app->options.publish) {
    g_print("published to %s: %.0f messages (%.1f/s), dropped %.0f\n", app->options.publish,
            fig(15), fig(17), fig(16));
    for (const auto &s : app->streams) {
      g_print("  %s: %" G_GUINT64_FORMAT " published, %" G_GUINT64_FORMAT " dropped\n",
              s->camera_id.c_str(), s->published, s->dropped);
    }
  }
  if (!app->options.json) return;
  FILE *f = fopen(app->options.json, "w");
  if (!f) {
    g_printerr("cannot write %s\n", app->options.json);
    return;
  }
  for (size_t i = 0; i < figures.size(); ++i)
    fprintf(f, "%s\"%s\": %.10g", i ? ", " : "{", figures[i].first, figures[i].second);
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

int main(int argc, char **argv) {
  const std::vector<std::string> unparsed(argv, argv + argc);  // for --workers per-gpu
  App app;
  Options &o = app.options;
  gchar **sources = nullptr;
  const GOptionEntry entries[] = {
      {"preload", 0, 0, G_OPTION_ARG_FILENAME, &o.preload,
       "Decode FILE's first frames once and push them from every stream (decode excluded)", "FILE"},
      {"streams", 'n', 0, G_OPTION_ARG_INT, &o.streams, "Streams with --preload (default 1)", "N"},
      {"frames", 0, 0, G_OPTION_ARG_INT64, &o.frames,
       "Frames per stream (with --preload default 300; with sources default 0: until they end)",
       "F"},
      {"preload-frames", 0, 0, G_OPTION_ARG_INT, &o.preload_frames,
       "How many frames to decode for --preload (default 30)", "K"},
      {"preload-gpu", 0, 0, G_OPTION_ARG_NONE, &o.preload_gpu,
       "Upload the --preload frames once into GPU memory (NV12, cudaupload): upload excluded too",
       nullptr},
      {"nvdec", 0, 0, G_OPTION_ARG_NONE, &o.nvdec,
       "Decode the H.264 SOURCEs on NVDEC into GPU memory (nvh264dec)", nullptr},
      {"gpus", 0, 0, G_OPTION_ARG_STRING, &o.gpus,
       "Spread the streams over these GPUs, stream i on the (i mod G)-th: all, or indices 0,1 "
       "(default: GPU 0)",
       "LIST"},
      {"workers", 0, 0, G_OPTION_ARG_STRING, &o.workers,
       "With --gpus: per-gpu runs a process per GPU, each its streams (one: all in this one, "
       "the default)",
       "per-gpu|one"},
      {"worker-of", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &o.worker_of,
       "Run the streams of the J-th GPU of --gpus alone (a --workers per-gpu worker)", "J"},
      {"size", 0, 0, G_OPTION_ARG_STRING, &o.size, "Frame size with --preload (default 1920x1080)",
       "WxH"},
      {"detector", 0, 0, G_OPTION_ARG_STRING, &o.detector,
       "The detector element and its properties (default: the frontal face cascade, 50-200 px, "
       "factor 1.25)",
       "DESC"},
      {"nms", 0, 0, G_OPTION_ARG_STRING, &o.nms, "The NMS element (default cudanms iou 0.3)",
       "DESC"},
      {"host-candidates", 0, 0, G_OPTION_ARG_NONE, &o.host_candidates,
       "The default detector copies its candidates to host memory each frame "
       "(device-candidates=false), as a CPU detector's are",
       nullptr},
      {"batch-streams", 0, 0, G_OPTION_ARG_NONE, &o.batch_streams,
       "Every stream's cudanms shares one NMS context, its host frames batched "
       "(batch-streams=true)",
       nullptr},
      {"track", 0, 0, G_OPTION_ARG_NONE, &o.track,
       "Track the kept boxes and count them over a line (boxtrack ! boxcount after cudanms)",
       nullptr},
      {"progress", 0, 0, G_OPTION_ARG_DOUBLE, &o.progress_s,
       "Seconds between progress lines (default 2; 0: none)", "S"},
      {"json", 0, 0, G_OPTION_ARG_FILENAME, &o.json, "Also write the summary as JSON", "FILE"},
      {"realtime", 0, 0, G_OPTION_ARG_NONE, &o.realtime,
       "Each stream at its frames' rate (30 fps with --preload), as live cameras", nullptr},
      {"publish", 0, 0, G_OPTION_ARG_STRING, &o.publish,
       "Publish every stream's detections to this MQTT broker (metapublish)", "HOST:PORT"},
      {"topic", 0, 0, G_OPTION_ARG_STRING, &o.topic,
       "Topic prefix with --publish: stream i publishes to PREFIX/<camera id> (default cudanms)",
       "PREFIX"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format,
       "Message format with --publish: cudanms or dlstreamer (default cudanms)", "FORMAT"},
      {"camera-ids", 0, 0, G_OPTION_ARG_STRING, &o.camera_ids,
       "Camera ids with --publish, comma-separated (default stream-0, stream-1, ...)", "IDS"},
      {"qos", 0, 0, G_OPTION_ARG_INT, &o.qos, "MQTT QoS with --publish: 0 or 1 (default 0)", "Q"},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &sources, nullptr, "SOURCE..."},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext *context = g_option_context_new("[SOURCE...] - many streams on the GPUs");
  g_option_context_add_main_entries(context, entries, nullptr);
  g_option_context_add_group(context, gst_init_get_option_group());
  GError *error = nullptr;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("%s\n", error->message);
    return 2;
  }
  g_option_context_free(context);
  if (!o.size) o.size = g_strdup("1920x1080");
  if (o.host_candidates && o.detector) {
    g_printerr("--host-candidates is for the default detector: give --detector its own options\n");
    return 2;
  }
  if (!o.detector) {
    const std::string host = o.host_candidates ? " device-candidates=false" : "";
    o.detector = g_strdup((default_detector() + host).c_str());
  }
  if (!o.nms) o.nms = g_strdup(kDefaultNms);
  if (o.batch_streams) {
    gchar *batched = g_strconcat(o.nms, " batch-streams=true", nullptr);
    g_free(o.nms);
    o.nms = batched;
  }
  if (!o.topic) o.topic = g_strdup("cudanms");
  if (o.frames < 0) o.frames = o.preload ? 300 : 0;
  if (!o.format) o.format = g_strdup("cudanms");
  const int n_sources = sources ? static_cast<int>(g_strv_length(sources)) : 0;
  if ((o.preload == nullptr) == (n_sources == 0) || o.streams < 1) {
    g_printerr("give SOURCE files or URIs, or --preload FILE --streams N (not both)\n");
    return 2;
  }
  const int n = o.preload ? o.streams : n_sources;
  if ((o.preload_gpu && !o.preload) || (o.nvdec && o.preload)) {
    g_printerr("--preload-gpu goes with --preload, --nvdec with SOURCEs\n");
    return 2;
  }
  std::string why;
  if (o.gpus && !parse_gpus(o.gpus, &app.gpus, &why)) {
    g_printerr("%s\n", why.c_str());
    return 2;
  }
  if (!o.gpus) app.gpus = {0};
  const bool per_gpu = o.workers && g_str_equal(o.workers, "per-gpu");
  if ((o.workers && !per_gpu && !g_str_equal(o.workers, "one")) || (per_gpu && !o.gpus) ||
      o.worker_of >= static_cast<int>(app.gpus.size())) {
    g_printerr("--workers is per-gpu (with --gpus) or one\n");
    return 2;
  }
  if (per_gpu && o.worker_of < 0) {
    // Fewer streams than GPUs: the GPUs past the last stream have none, and no worker.
    std::vector<unsigned> with_streams(app.gpus.begin(),
                                       app.gpus.begin() + std::min<size_t>(app.gpus.size(), n));
    return run_streams_per_gpu(unparsed, with_streams, o.json);
  }
  // A worker: stream i where i mod G = J, numbered as in one process, on the J-th GPU.
  std::vector<int> mine;
  for (int i = 0; i < n; ++i)
    if (o.worker_of < 0 || i % static_cast<int>(app.gpus.size()) == o.worker_of) mine.push_back(i);
  if (o.preload_gpu || o.worker_of >= 0) app.preload_stride = static_cast<int>(app.gpus.size());
  if (o.worker_of >= 0) app.gpus = {app.gpus[static_cast<size_t>(o.worker_of)]};
  for (unsigned gpu : app.gpus) {
    if (o.nvdec && nvdec_for(gpu).empty()) {
      g_printerr("--nvdec: no NVDEC H.264 decoder for GPU %u (gst-plugins-bad's nvcodec)\n", gpu);
      return 2;
    }
  }
  if (o.preload_gpu || o.nvdec || o.gpus) {
    for (unsigned gpu : app.gpus) {
      app.cuda_contexts[gpu] = gst_cv_cuda_primary_context_new(static_cast<int>(gpu));
      if (!app.cuda_contexts[gpu]) {
        g_printerr("--preload-gpu, --nvdec and --gpus need a CUDA device and gstreamer-cuda\n");
        return 2;
      }
    }
  }

  if (o.preload) {
    for (unsigned gpu : app.gpus) {
      if (!preload(&app, gpu, &why)) {
        g_printerr("%s\n", why.c_str());
        return 2;
      }
      if (!o.preload_gpu) break;  // host memory: one copy serves every GPU
    }
  }
  for (unsigned gpu : app.gpus) app.gpu_used_before[gpu] = gpu_memory_used(gpu);
  std::string desc;
  for (int i : mine) desc += branch(app, i, o.preload ? nullptr : sources[i]);
  // Strict: an element that is not there (a plugin not found) is an error, not a gap.
  app.pipeline = gst_parse_launch_full(desc.c_str(), nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!app.pipeline || error) {
    g_printerr("cannot build the pipeline: %s\n", error ? error->message : "");
    return 2;
  }
  for (int i : mine) {
    auto stream = std::make_unique<Stream>();
    stream->index = i;
    stream->gpu = static_cast<int>(gpu_of(app, i));
    stream->camera_id = camera_id(o, i);
    const std::string id = std::to_string(i);
    GstElement *detector = gst_bin_get_by_name(GST_BIN(app.pipeline), ("detector" + id).c_str());
    GstElement *nms = gst_bin_get_by_name(GST_BIN(app.pipeline), ("nms" + id).c_str());
    GstElement *decoder = gst_bin_get_by_name(GST_BIN(app.pipeline), ("dec" + id).c_str());
    watch(detector, stream.get(), 0);
    watch(nms, stream.get(), 1);
    if (g_object_class_find_property(G_OBJECT_GET_CLASS(nms), "time-gpu"))
      g_object_set(nms, "time-gpu", TRUE, NULL);
    // The stream's chain on its GPU, in that GPU's primary context.
    for (GstElement *element : {decoder, detector, nms}) {
      if (!element) continue;
      if (o.gpus && g_object_class_find_property(G_OBJECT_GET_CLASS(element), "gpu-id"))
        g_object_set(element, "gpu-id", stream->gpu, NULL);
      const auto context = app.cuda_contexts.find(static_cast<unsigned>(stream->gpu));
      if (context != app.cuda_contexts.end()) gst_element_set_context(element, context->second);
      gst_object_unref(element);
    }
    if (o.preload) {
      GstElement *src = gst_bin_get_by_name(GST_BIN(app.pipeline), ("src" + id).c_str());
      GstCaps *frame_caps = gst_caps_copy(app.preloaded_caps);
      gst_caps_set_simple(frame_caps, "framerate", GST_TYPE_FRACTION, 30, 1, NULL);
      gst_app_src_set_caps(GST_APP_SRC(src), frame_caps);
      gst_caps_unref(frame_caps);
      // Host frames: decoded once, under the first GPU's key.
      const unsigned set = o.preload_gpu ? static_cast<unsigned>(stream->gpu) : app.gpus.front();
      stream->source = &app.preloaded.at(set).at(preloaded_copy(app, i));
      stream->limit = static_cast<guint64>(o.frames);
      stream->duration = GST_SECOND / 30;
      GstAppSrcCallbacks callbacks = {};
      callbacks.need_data = on_need_data;
      gst_app_src_set_callbacks(GST_APP_SRC(src), &callbacks, stream.get(), nullptr);
      gst_object_unref(src);
    }
    app.streams.push_back(std::move(stream));
  }

  app.loop = g_main_loop_new(nullptr, FALSE);
  GstBus *bus = gst_element_get_bus(app.pipeline);
  gst_bus_add_watch(bus, on_bus, &app);
  gst_object_unref(bus);
  if (o.progress_s > 0 && !o.quiet)
    g_timeout_add(static_cast<guint>(o.progress_s * 1000), on_progress, &app);
  app.started_us = g_get_monotonic_time();
  if (gst_element_set_state(app.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    g_printerr("the pipeline did not start\n");
    app.exit_code = 1;
  } else {
    g_main_loop_run(app.loop);
  }
  for (auto &s : app.streams) {
    GstElement *detector =
        gst_bin_get_by_name(GST_BIN(app.pipeline), ("detector" + std::to_string(s->index)).c_str());
    if (g_object_class_find_property(G_OBJECT_GET_CLASS(detector), "mean-batch"))
      g_object_get(detector, "mean-batch", &s->mean_batch, NULL);
    gst_object_unref(detector);
  }
  gst_element_set_state(app.pipeline, GST_STATE_NULL);  // metapublish flushes its queue here
  for (auto &s : app.streams) {
    GstElement *pub =
        gst_bin_get_by_name(GST_BIN(app.pipeline), ("pub" + std::to_string(s->index)).c_str());
    if (!pub) continue;
    g_object_get(pub, "published", &s->published, "dropped", &s->dropped, NULL);
    gst_object_unref(pub);
  }
  if (app.exit_code == 0) summarize(&app);
  gst_object_unref(app.pipeline);
  g_main_loop_unref(app.loop);
  for (auto &[gpu, copies] : app.preloaded)
    for (const auto &frames : copies)
      for (GstBuffer *b : frames) gst_buffer_unref(b);
  if (app.preloaded_caps) gst_caps_unref(app.preloaded_caps);
  for (auto &[gpu, context] : app.cuda_contexts) gst_context_unref(context);
  g_strfreev(sources);
  return app.exit_code;
}
