// cudanms-streams' state (cudanms-streams.cpp): its options, each stream's figures and the
// app's; the --preload frames (streams_preload.cpp); the timing probes, the GPU memory and the
// summary (streams_figures.cpp).
#pragma once

#include <gst/app/gstappsrc.h>
#include <gst/gst.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  // A queue of that many frames after the detector; 0: none; unset (G_MININT): 2
  // after dnndetect, whose batches then overlap on the GPU, else none.
  gint detector_queue = G_MININT;
  gboolean track = FALSE;           // boxtrack ! boxcount after cudanms
  gdouble snapshots_s = 0;          // an annotated JPEG a stream this often (snapshot.h); 0: none
  gboolean snapshots_idle = FALSE;  // the branch in place, no picture asked for
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

// The process's CPU time over the second half of a --preload run's frames (from the frame that
// makes half of every stream's limit to the last): the host's work a frame, which a host whose
// other cores are busy must still find. Counted from every stream's thread.
struct HostCpu {
  guint64 half = 0, total = 0;  // 0: unknown (streams that end by themselves)
  std::atomic<guint64> out{0};
  double start_cpu_s = 0, end_cpu_s = 0;
  double start_wait_s = -1, end_wait_s = -1;    // its threads' time runnable without a CPU
  double start_steal_s = -1, end_steal_s = -1;  // the CPUs' time the hypervisor gave elsewhere
  gint64 start_us = 0, end_us = 0;
  void frame_out(gint64 now_us);
};

// Per stream, written on its streaming thread only (and read after the pipeline has stopped, or
// for progress through the atomic frame count).
struct Stream {
  int index = 0;
  int gpu = -1;  // --gpus: the GPU its chain runs on
  std::string camera_id;
  guint64 published = 0, dropped = 0;  // --publish: metapublish's counts at the end
  std::atomic<guint64> pictures{0};    // --snapshots: JPEGs made
  double mean_batch = 0;               // a batching detector's (dnndetect) frames per forward
  double mean_fill_ms = 0, mean_launch_ms = 0;  // and its batches' fill and launch times
  double forward_gpu_ms = 0, decode_gpu_ms = 0, idle_gpu_ms = 0;  // and their GPU times
  std::atomic<guint64> frames{0};
  gint64 element_start_us[2] = {0, 0};
  std::vector<double> element_us[2];  // 0: the detector, 1: cudanms (host time between pads)
  std::vector<double> chain_us;       // the detector's sink pad to cudanms's src pad
  std::vector<double> nms_gpu_us;     // cudanms's own GPU work (its time-gpu)
  std::vector<gint64> out_us;         // when each frame left cudanms (first to last)
  // --preload: the frames to push, and how many were pushed.
  const std::vector<GstBuffer *> *source = nullptr;
  guint64 pushed = 0;
  guint64 limit = 0;
  GstClockTime duration = 0;
  HostCpu *host_cpu = nullptr;  // --preload: the app's
};

struct App {
  Options options;
  GstElement *pipeline = nullptr;
  GMainLoop *loop = nullptr;
  std::vector<std::unique_ptr<Stream>> streams;
  HostCpu host_cpu;
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

// --preload (streams_preload.cpp): the file's first frames decoded once into app->preloaded for
// GPU `gpu_index` (copies enough for the streams that read them); false with the reason.
bool preload(App *app, unsigned gpu_index, std::string *error);
// Stream i's copy of the preloaded frames.
size_t preloaded_copy(const App &app, int i);
// The appsrc of a --preload stream (data: its Stream) asks for more.
void on_need_data(GstAppSrc *src, guint length, gpointer data);

// The figures (streams_figures.cpp). Times `element`'s work on each frame of `stream` (which: 0
// the detector, 1 cudanms).
void watch(GstElement *element, Stream *stream, int which);
// The memory used on `gpu` (0 without CUDA), and the most seen on each of the app's GPUs.
size_t gpu_memory_used(unsigned gpu);
void sample_gpu_memory(App *app);
// The summary at the end: printed, and written as JSON with --json.
void summarize(App *app);
