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
#include <gst/gst.h>

#include <string>
#include <vector>

#include "commandline.h"
#include "cudanms/nms.h"
#include "elementcudacontext.h"
#include "gpulist.h"
#include "nvdec.h"
#include "pipelinestop.h"
#include "snapshot.h"
#include "streams_app.h"
#include "streams_workers.h"

namespace {

// The frontal face cascade of opencv-data (under $CUDANMS_OPENCV_DATA when set), faces of 50 to
// 200 pixels, scale factor 1.25.
std::string default_detector() {
  const char *data = g_getenv("CUDANMS_OPENCV_DATA");
  return std::string("cudacascade model=\"") + (data ? data : "/usr/share/opencv4") +
         "/haarcascades/haarcascade_frontalface_default.xml\" min-size=50x50 max-size=200x200 "
         "scale-factor=1.25";
}
const char *kDefaultNms = "cudanms iou-threshold=0.3";

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
  // --snapshots: the camera service's picture for its page, off a tee.
  const std::string snapshot = o.snapshots_s > 0
                                   ? " ! tee name=split" + n + " " +
                                         gst_cv_snapshot_branch("split" + n, "snapshot" + n) +
                                         " split" + n + "."
                                   : "";
  // --detector-queue: the detector's next frame goes in while cudanms waits for this one's GPU
  // work (its own thread after the queue), so that a batching detector's next batch can fill
  // and start while the last one runs.
  const std::string queue = o.detector_queue > 0
                                ? " ! queue max-size-buffers=" + std::to_string(o.detector_queue) +
                                      " max-size-time=0 max-size-bytes=0"
                                : "";
  // --realtime: each stream at its frames' rate, as live cameras deliver them.
  return head + " ! " + o.detector + " name=detector" + n + queue + " ! " + o.nms + " name=nms" +
         n + track + publish + snapshot + " ! fakesink sync=" + (o.realtime ? "true" : "false") +
         " async=false ";
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
       "factor 1.25); dnndetect gets frames-in-flight=3 unless DESC sets it",
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
      {"detector-queue", 0, 0, G_OPTION_ARG_INT, &o.detector_queue,
       "A queue of N frames between the detector and cudanms: the detector's thread goes on to "
       "the next frame while cudanms waits for this one's GPU work, so that dnndetect's next "
       "batch fills and launches while the last one runs (default 2 after dnndetect, else 0: "
       "none)",
       "N"},
      {"track", 0, 0, G_OPTION_ARG_NONE, &o.track,
       "Track the kept boxes and count them over a line (boxtrack ! boxcount after cudanms)",
       nullptr},
      {"snapshots", 0, 0, G_OPTION_ARG_DOUBLE, &o.snapshots_s,
       "An annotated JPEG of each stream every S seconds, as the camera service makes for its "
       "page (what it costs the streams)",
       "S"},
      {"snapshots-idle", 0, 0, G_OPTION_ARG_NONE, &o.snapshots_idle,
       "With --snapshots: the branch in place but no picture asked for (the camera service while "
       "no page is open)",
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
  std::string parse_error;
  if (!gst_cv_parse_command_line({"[SOURCE...] - many streams on the GPUs"}, entries, &argc, &argv,
                                 &parse_error)) {
    g_printerr("cudanms-streams: %s\n", parse_error.c_str());
    return 2;
  }
  if (!o.size) o.size = g_strdup("1920x1080");
  if (o.host_candidates && o.detector) {
    g_printerr("--host-candidates is for the default detector: give --detector its own options\n");
    return 2;
  }
  if (!o.detector) {
    const std::string host = o.host_candidates ? " device-candidates=false" : "";
    o.detector = g_strdup((default_detector() + host).c_str());
  }
  // dnndetect's defaults here: three frames of each stream in flight unless told otherwise, so
  // that each stream's next frame joins the next batch while this one's runs, with a batch more
  // of slack for a stream's thread late to its turn on a busy host (frames' latency, nothing
  // else, for files and preloaded frames; docs/performance.md), and a queue of two after it.
  const bool dnn = g_str_has_prefix(o.detector, "dnndetect");
  if (dnn && !strstr(o.detector, "frames-in-flight")) {
    gchar *in_flight = g_strconcat(o.detector, " frames-in-flight=3", nullptr);
    g_free(o.detector);
    o.detector = in_flight;
  }
  if (o.detector_queue == G_MININT) o.detector_queue = dnn ? 2 : 0;
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
  if (o.detector_queue < 0) {
    g_printerr("--detector-queue is 0 (none) or the frames it holds\n");
    return 2;
  }
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
  GError *error = nullptr;
  app.pipeline = gst_parse_launch_full(desc.c_str(), nullptr, GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!app.pipeline || error) {
    g_printerr("cannot build the pipeline: %s\n", error ? error->message : "");
    return 2;
  }
  // One GPU: every element of the pipeline in its context (the snapshots' cudadownload too).
  if (app.cuda_contexts.size() == 1)
    gst_element_set_context(app.pipeline, app.cuda_contexts.begin()->second);
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
    if (o.snapshots_s > 0)
      gst_cv_snapshot_attach(
          app.pipeline, "snapshot" + id, o.snapshots_s,
          [s = stream.get()](GstBuffer *) { s->pictures++; },
          [idle = o.snapshots_idle] { return !idle; });
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
      stream->host_cpu = &app.host_cpu;
      app.host_cpu.total += stream->limit;
      app.host_cpu.half = app.host_cpu.total / 2;
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
      g_object_get(detector, "mean-batch", &s->mean_batch, "mean-fill-ms", &s->mean_fill_ms,
                   "mean-launch-ms", &s->mean_launch_ms, NULL);
    if (g_object_class_find_property(G_OBJECT_GET_CLASS(detector), "mean-forward-gpu-ms"))
      g_object_get(detector, "mean-forward-gpu-ms", &s->forward_gpu_ms, "mean-decode-gpu-ms",
                   &s->decode_gpu_ms, "mean-idle-gpu-ms", &s->idle_gpu_ms, NULL);
    gst_object_unref(detector);
  }
  gst_cv_flush_jitterbuffers(app.pipeline);  // RTSP cameras' ended streams would hang NULL
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
