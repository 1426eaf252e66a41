#include "session.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "countsstructure.h"
#include "fence.h"
#include "gpufailure.h"
#include "log.h"
#include "main_loop.h"
#include "nvdec.h"
#include "pipelinestop.h"
#include "snapshot.h"

namespace cudanms::service {
namespace {

const char *const kFirstFrame = "cudanms-service-first-frame";
// The recording's parser: its H.264 is what a raw camera's event clips are cut from.
const char *const kRecordingParser = "record-parse";
std::atomic<int> stopping_sessions{0};

// The GPU the camera's elements run on (gpu-id, by default CUDA's first); -1: the CPU.
int gpu_of(const CameraConfig &c, const CameraRun &run) {
  if (run.on_cpu) return -1;
  return c.gpu_id ? static_cast<int>(*c.gpu_id) : 0;
}

// A camera's own source, its NVDEC decoders moved to the camera's GPU (a description written for
// one GPU, given to a service that places cameras over several): frames decoded on one GPU and
// searched on another would cross through host memory.
std::string own_source(const CameraConfig &c, int gpu) {
  std::vector<std::string> moved;
  const std::string source = gst_cv_nvdec_moved(c.source, gpu, &moved);
  for (const std::string &m : moved)
    log_line("camera %s: decoding on its GPU %d: %s", c.name.c_str(), gpu, m.c_str());
  return source;
}

// `event_pictures`: a branch that pictures each frame with counting events (the run's snapshots).
std::string describe(const CameraConfig &c, int gpu, bool event_pictures) {
  const std::string source = c.source.empty()
                                 ? "uridecodebin name=source uri=\"" + c.uri +
                                       "\" caps=\"video/x-raw(ANY)\" expose-all-streams=false"
                                 : own_source(c, gpu);
  // The queue drops the oldest frame when the detector cannot keep up with the camera.
  std::string out = source +
                    " ! queue name=intake leaky=downstream max-size-buffers=2 max-size-time=0 "
                    "max-size-bytes=0 ! videoconvert ! " +
                    c.detector + " ! cudanms name=nms ! ";
  if (c.tracker) out += "boxtrack name=track ! ";
  if (c.tracker && c.counting()) out += "boxcount name=count ! ";
  const std::string end = c.record_dir.empty()
                              ? "fakesink name=sink sync=false async=false"
                              : "queue max-size-buffers=60 max-size-time=0 max-size-bytes=0 ! " +
                                    std::string(c.record_boxes ? "boxoverlay ! " : "") +
                                    "videoconvert ! " + c.record_encoder +
                                    " ! h264parse name=" + kRecordingParser +
                                    " ! splitmuxsink name=sink";
  event_pictures = event_pictures && c.tracker && c.counting();
  if (c.snapshot_interval_s <= 0 && !event_pictures) return out + end;
  out += "tee name=split ! " + end;
  // The operator's picture (web.h); the events' (outputs.h).
  if (c.snapshot_interval_s > 0) out += " " + gst_cv_snapshot_branch("split", "snapshot");
  if (event_pictures) out += " " + gst_cv_snapshot_branch("split", "event-snapshot", true);
  return out;
}

// uridecodebin's source, when it is an RTSP client: the camera's latency and transports.
void on_source_setup(GstElement *, GstElement *source, gpointer data) {
  const auto *config = static_cast<const CameraConfig *>(data);
  GObjectClass *klass = G_OBJECT_GET_CLASS(source);
  if (g_object_class_find_property(klass, "latency") &&
      g_object_class_find_property(klass, "protocols")) {
    g_object_set(source, "latency", static_cast<guint>(config->latency_ms), NULL);
    gst_util_set_object_arg(G_OBJECT(source), "protocols", config->protocols.c_str());
  }
}

// decodebin's answer to a decoder it may try (its GstAutoplugSelectResult).
enum { kAutoplugTry = 0, kAutoplugSkip = 2 };

// uridecodebin offers a decoder: an NVDEC element of another GPU than the camera's is skipped,
// so that the next one down (each GPU's a rank below the first's) decodes on the camera's GPU
// and no frame crosses GPUs; a camera on the CPU (its GPU failed) decodes on the CPU.
int on_autoplug_select(GstElement *, GstPad *, GstCaps *, GstElementFactory *factory,
                       gpointer data) {
  const int gpu = GPOINTER_TO_INT(data);
  const int device = gst_cv_nvdec_device(factory);
  return device >= 0 && device != gpu ? kAutoplugSkip : kAutoplugTry;
}

gchar *on_format_location(GstElement *, guint, gpointer data) {
  return g_strdup(static_cast<Recording *>(data)->next_path().c_str());
}

// Each property the config gives an element, by name, from its text.
// The camera's element keys, each on the elements of the chain that have it (checked before:
// element_check.h).
void set_properties(const std::vector<GstElement *> &chain,
                    const std::map<std::string, std::string> &properties) {
  for (const auto &[key, value] : properties)
    for (GstElement *element : chain)
      if (element && g_object_class_find_property(G_OBJECT_GET_CLASS(element), key.c_str()))
        gst_util_set_object_arg(G_OBJECT(element), key.c_str(), value.c_str());
}

// Every element of `bin` that has a property `name` gets `value` (backend=cpu when its GPU
// failed): an enum property only where `value` is one of its values.
void set_on_all(GstElement *bin, const char *name, const std::string &value) {
  gst_cv_for_each_element(bin, [&](GstElement *element) {
    GParamSpec *pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(element), name);
    const bool takes_it =
        pspec && (!G_IS_PARAM_SPEC_ENUM(pspec) ||
                  g_enum_get_value_by_nick(G_PARAM_SPEC_ENUM(pspec)->enum_class, value.c_str()));
    if (takes_it) gst_util_set_object_arg(G_OBJECT(element), name, value.c_str());
  });
}

// An error message as one line: the message, and the last line of the details when they add
// what went wrong (rtspsrc: "Could not connect to server. (Connection refused)").
std::string error_text(GstMessage *message) {
  GError *error = nullptr;
  gchar *debug = nullptr;
  gst_message_parse_error(message, &error, &debug);
  std::string text = std::string(GST_OBJECT_NAME(message->src)) + ": " + error->message;
  if (debug) {
    gchar **lines = g_strsplit(debug, "\n", -1);
    const guint n = g_strv_length(lines);
    const std::string last = n ? g_strstrip(lines[n - 1]) : "";
    if (!last.empty() && last.size() < 200 && last.find("Gst") == std::string::npos &&
        last.find(".c(") == std::string::npos)
      text += " (" + last + ")";
    g_strfreev(lines);
  }
  g_clear_error(&error);
  g_free(debug);
  return text;
}

}  // namespace

Recording::Recording(std::string dir, std::string camera)
    : dir_(std::move(dir)), camera_(std::move(camera)) {
  int highest = -1;
  if (GDir *d = g_dir_open(dir_.c_str(), 0, nullptr)) {
    const std::string prefix = camera_ + "-";
    while (const gchar *name = g_dir_read_name(d)) {
      const std::string file = name;
      if (file.rfind(prefix, 0) != 0 || !g_str_has_suffix(name, ".mp4")) continue;
      char *end = nullptr;
      const long n = std::strtol(name + prefix.size(), &end, 10);
      if (end != name + prefix.size() && (*end == '-' || *end == '.'))
        highest = std::max(highest, static_cast<int>(std::min<long>(n, G_MAXINT - 1)));
    }
    g_dir_close(d);
  }
  next_ = highest + 1;
}

std::string Recording::next_path() {
  GDateTime *now = g_date_time_new_now_local();
  gchar *time = g_date_time_format(now, "%Y%m%d-%H%M%S");
  gchar *name = g_strdup_printf("%s-%05d-%s.mp4", camera_.c_str(), next_++, time);
  gchar *path = g_build_filename(dir_.c_str(), name, nullptr);
  const std::string out = path;
  g_free(path);
  g_free(name);
  g_free(time);
  g_date_time_unref(now);
  return out;
}

std::shared_ptr<Session> Session::start(const CameraConfig &config, const CameraRun &run,
                                        std::shared_ptr<CameraOutputs> outputs,
                                        std::shared_ptr<Recording> recording,
                                        CudaContexts *contexts, Events events, std::string *error) {
  std::shared_ptr<Session> s(new Session());
  s->camera_ = config.name;
  s->outputs_ = std::move(outputs);
  s->segments_ = std::move(recording);
  s->events_ = std::move(events);
  s->recording_ = !config.record_dir.empty();
  gst_segment_init(&s->segment_, GST_FORMAT_TIME);

  GError *parse_error = nullptr;
  const int gpu = gpu_of(config, run);
  GstElement *pipeline =
      gst_parse_launch_full(describe(config, gpu, !run.snapshots.empty()).c_str(), nullptr,
                            GST_PARSE_FLAG_FATAL_ERRORS, &parse_error);
  if (!pipeline) {
    *error = std::string("cannot build the pipeline: ") +
             (parse_error ? parse_error->message : "unknown error");
    g_clear_error(&parse_error);
    return nullptr;
  }
  s->pipeline_ = GST_ELEMENT(gst_object_ref_sink(pipeline));
  gst_object_set_name(GST_OBJECT(s->pipeline_), config.name.c_str());
  s->set_up_chain(config, run, contexts, gpu);
  s->set_up_source(config, gpu);
  if (!run.snapshots.empty()) {
    std::shared_ptr<CameraOutputs> outputs = s->outputs_;
    gst_cv_event_snapshot_attach(s->pipeline_, "event-snapshot",
                                 [outputs](GstBuffer *jpeg) { outputs->on_event_picture(jpeg); });
  }
  if (s->recording_) s->set_up_recording(config);
  if (EventClips *clips = s->outputs_->clips())
    clips->attach(s->pipeline_, s->recording_ ? kRecordingParser : nullptr);

  GstBus *bus = gst_element_get_bus(s->pipeline_);
  s->bus_watch_ = gst_bus_add_watch(bus, on_bus, s.get());
  gst_object_unref(bus);
  s->started_us_ = g_get_monotonic_time();
  // A failure to start is an error message on the bus: the camera hears it from there.
  gst_element_set_state(s->pipeline_, GST_STATE_PLAYING);
  return s;
}

void Session::set_up_chain(const CameraConfig &config, const CameraRun &run, CudaContexts *contexts,
                           int gpu) {
  GstBin *bin = GST_BIN(pipeline_);
  intake_ = gst_bin_get_by_name(bin, "intake");

  GstElement *nms = gst_bin_get_by_name(bin, "nms");
  GstElement *track = gst_bin_get_by_name(bin, "track");
  GstElement *count = gst_bin_get_by_name(bin, "count");
  // A track is forgotten by the counter when the tracker would lose it.
  const auto track_buffer = config.elements.find("track-buffer");
  if (count && track_buffer != config.elements.end())
    gst_util_set_object_arg(G_OBJECT(count), "track-timeout", track_buffer->second.c_str());
  set_properties({nms, track, count}, config.elements);
  // The tracker and the counter go on where the camera's last connection left them: ids never
  // given twice, the lines' counts.
  const CountingState counted = outputs_->counting();
  if (track) g_object_set(track, "next-id", counted.next_track_id, NULL);
  if (count) {
    GstStructure *counts = gst_cuda_nms_counts_structure(counted.tallies());
    g_object_set(count, "counts", counts, NULL);
    gst_structure_free(counts);
  }
  // Its GPU told by the CUDA context alone (cuda_contexts.h).
  if (run.on_cpu) {
    set_on_all(pipeline_, "backend", "cpu");
  } else if (contexts) {
    contexts->give(pipeline_, static_cast<guint>(gpu), !config.share_cuda_context);
  }
  GstPad *intake = gst_element_get_static_pad(intake_, "src");
  gst_pad_add_probe(intake, GST_PAD_PROBE_TYPE_BUFFER, on_intake, this, nullptr);
  gst_object_unref(intake);
  // The frames' outputs after the last element that adds to their metadata.
  GstPad *output = gst_element_get_static_pad(count ? count : track ? track : nms, "src");
  // The probe holds the session weakly: the pipeline (and so the probe) may outlive it a moment
  // at teardown, never the other way round.
  gst_pad_add_probe(
      output,
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      on_output, this, nullptr);
  gst_object_unref(output);
  gst_object_unref(nms);
  if (track) gst_object_unref(track);
  if (count) gst_object_unref(count);
}

void Session::set_up_source(const CameraConfig &config, int gpu) {
  GstBin *bin = GST_BIN(pipeline_);
  // A camera's URL: the uridecodebin that describe() names "source" (a camera's own source
  // description may name any of its elements so).
  if (GstElement *source = config.source.empty() ? gst_bin_get_by_name(bin, "source") : nullptr) {
    g_signal_connect(source, "autoplug-select", G_CALLBACK(on_autoplug_select),
                     GINT_TO_POINTER(gpu));
    // The config outlives the session's pipeline: the camera owns both.
    g_signal_connect_data(
        source, "source-setup", G_CALLBACK(on_source_setup), new CameraConfig(config),
        [](gpointer data, GClosure *) { delete static_cast<CameraConfig *>(data); },
        static_cast<GConnectFlags>(0));
    gst_object_unref(source);
  }
  if (config.snapshot_interval_s > 0) {
    std::shared_ptr<CameraOutputs> outputs = outputs_;
    gst_cv_snapshot_attach(
        pipeline_, "snapshot", config.snapshot_interval_s,
        [outputs](GstBuffer *jpeg) { outputs->on_snapshot(jpeg); },
        [outputs] { return outputs->pictures_wanted(); });
  }
}

void Session::set_up_recording(const CameraConfig &config) {
  GstBin *bin = GST_BIN(pipeline_);
  GstElement *sink = gst_bin_get_by_name(bin, "sink");
  const guint64 segment_ns = static_cast<guint64>(config.record_segment_s * GST_SECOND);
  // Robust muxing: mp4mux rewrites the index at the file's start every second, so a segment
  // plays up to its last second even when the service is killed.
  GstElement *muxer = gst_element_factory_make("mp4mux", nullptr);
  g_object_set(muxer, "reserved-max-duration", 2 * segment_ns, "reserved-moov-update-period",
               static_cast<guint64>(GST_SECOND), NULL);
  // A segment ends at the first keyframe past record-segment (the encoder's key-int-max).
  g_object_set(sink, "max-size-time", segment_ns, "use-robust-muxing", TRUE, "muxer", muxer, NULL);
  g_signal_connect(sink, "format-location", G_CALLBACK(on_format_location), segments_.get());
  gst_object_unref(sink);
}

Session::~Session() {
  if (bus_watch_) g_source_remove(bus_watch_);
  if (intake_) gst_object_unref(intake_);
  if (pipeline_) {
    gst_element_set_state(pipeline_, GST_STATE_NULL);
    gst_object_unref(pipeline_);
  }
}

int Session::stopping() { return stopping_sessions.load(); }

gboolean Session::on_bus(GstBus *, GstMessage *message, gpointer data) {
  auto *s = static_cast<Session *>(data);
  switch (GST_MESSAGE_TYPE(message)) {
    case GST_MESSAGE_ERROR:
      if (s->events_.failed) s->events_.failed(error_text(message));
      break;
    case GST_MESSAGE_ELEMENT: {
      // An element whose GPU failed under it (gpufailure.h): the GPU is no longer to be trusted.
      std::string error;
      if (gst_cv_parse_gpu_failed(message, nullptr, &error) && s->events_.gpu_failed)
        s->events_.gpu_failed(std::string(GST_OBJECT_NAME(message->src)) + ": " + error);
      break;
    }
    case GST_MESSAGE_EOS:
      s->ended_ = true;  // every sink has finalised its output
      if (s->events_.failed) s->events_.failed("the stream ended");
      break;
    case GST_MESSAGE_APPLICATION:
      if (gst_message_has_name(message, kFirstFrame) && s->events_.first_frame)
        s->events_.first_frame();
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

// The detector and cudanms run on the intake queue's streaming thread, up to the output probe.
// A fleet host past its lease's fence (fence.h) detects nothing more.
GstPadProbeReturn Session::on_intake(GstPad *, GstPadProbeInfo *, gpointer data) {
  if (!LeaseFence::open_now()) return GST_PAD_PROBE_DROP;
  static_cast<Session *>(data)->chain_start_us_ = g_get_monotonic_time();
  return GST_PAD_PROBE_OK;
}

void Session::set_counting(const std::map<std::string, std::string> &elements) {
  GstElement *element = gst_bin_get_by_name(GST_BIN(pipeline_), "count");
  if (!element) return;
  set_properties({element}, elements);
  gst_object_unref(element);
}

GstPadProbeReturn Session::on_output(GstPad *, GstPadProbeInfo *info, gpointer data) {
  auto *s = static_cast<Session *>(data);
  if (s->detached_.load()) return GST_PAD_PROBE_OK;
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    if (!LeaseFence::open_now()) return GST_PAD_PROBE_DROP;  // nor publishes (fence.h)
    const double chain_s =
        s->chain_start_us_ ? (g_get_monotonic_time() - s->chain_start_us_) / 1e6 : 0.0;
    s->outputs_->on_frame(GST_PAD_PROBE_INFO_BUFFER(info), &s->segment_, chain_s);
    if (!s->first_frame_seen_.exchange(true))
      gst_element_post_message(s->pipeline_,
                               gst_message_new_application(GST_OBJECT(s->pipeline_),
                                                           gst_structure_new_empty(kFirstFrame)));
    return GST_PAD_PROBE_OK;
  }
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_SEGMENT:
      gst_event_copy_segment(event, &s->segment_);
      break;
    default:
      s->outputs_->on_event(event);
      break;
  }
  return GST_PAD_PROBE_OK;
}

std::string Session::detector_device() const {
  // The detectors' base class, registered by the plugins (a source's "device" is a file).
  const GType detector = g_type_from_name("GstCudaNmsDetector");
  std::string device;
  gst_cv_for_each_element(pipeline_, [&](GstElement *element) {
    if (!device.empty() || !detector || !g_type_is_a(G_OBJECT_TYPE(element), detector)) return;
    gchar *text = nullptr;
    g_object_get(element, "device", &text, NULL);
    if (text) device = text;
    g_free(text);
  });
  return device;
}

guint64 Session::queued_bytes() const {
  guint64 total = 0;
  gst_cv_for_each_element(pipeline_, [&total](GstElement *element) {
    // queue's level is a guint, queue2's a guint64.
    GParamSpec *level =
        g_object_class_find_property(G_OBJECT_GET_CLASS(element), "current-level-bytes");
    if (level && level->value_type == G_TYPE_UINT) {
      guint bytes = 0;
      g_object_get(element, "current-level-bytes", &bytes, NULL);
      total += bytes;
    } else if (level && level->value_type == G_TYPE_UINT64) {
      guint64 bytes = 0;
      g_object_get(element, "current-level-bytes", &bytes, NULL);
      total += bytes;
    }
  });
  return total;
}

void Session::stop(std::function<void()> finalised, std::function<void()> closed) {
  // From here on the camera hears nothing more of this connection.
  events_ = Events();
  if (bus_watch_) {
    g_source_remove(bus_watch_);
    bus_watch_ = 0;
  }
  stopping_sessions++;
  std::shared_ptr<Session> self = shared_from_this();
  std::thread([self, finalised = std::move(finalised), closed = std::move(closed)]() mutable {
    GstBus *bus = gst_element_get_bus(self->pipeline_);
    // A connection that never had a frame (refused, no stream) has no segment to finalise.
    if (self->recording_ && !self->ended_ && self->first_frame_seen_.load()) {
      // An end of stream where the frames come in: what is already in the pipeline is recorded,
      // then splitmuxsink finalises its segment and the pipeline posts EOS (an EOS still on the
      // bus, not yet seen by the camera, means it did so already).
      GstPad *pad = gst_element_get_static_pad(self->intake_, "sink");
      gst_pad_send_event(pad, gst_event_new_eos());
      gst_object_unref(pad);
      GstMessage *done = gst_bus_timed_pop_filtered(
          bus, static_cast<GstClockTime>(kFinaliseSeconds * GST_SECOND), GST_MESSAGE_EOS);
      if (done) gst_message_unref(done);
    }
    self->detached_ = true;
    if (EventClips *clips = self->outputs_->clips()) clips->detach();  // its open clip finished
    on_main_loop(std::move(finalised));
    gst_bus_set_flushing(bus, TRUE);
    gst_object_unref(bus);
    gst_cv_flush_jitterbuffers(self->pipeline_);
    gst_element_set_state(self->pipeline_, GST_STATE_NULL);
    // The last reference goes on the main loop, with the camera's own.
    on_main_loop([self, closed = std::move(closed)]() mutable {
      self.reset();
      stopping_sessions--;
      if (closed) closed();
      // The connection's memory back to the system: glibc keeps what is freed in its heap and
      // arenas, and on the H100 soak (16 NVDEC cameras, 20 reconnects a minute) RSS grew 6 MB a
      // minute that way while malloc's bytes in use fell.
      malloc_trim(0);
    });
  }).detach();
}

}  // namespace cudanms::service
