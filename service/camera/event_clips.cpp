#include "event_clips.h"

#include <glib/gstdio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "log.h"
#include "pipelinestop.h"

namespace cudanms::service {

// A clip being recorded: its own pipeline, fed the access units with their times moved so that
// the clip starts at 0.
struct EventClips::Clip {
  std::string path;
  GstElement *pipeline = nullptr;
  GstElement *source = nullptr;  // its appsrc
  GstClockTime base = 0;         // the first unit's decoding time: the clip's 0
  GstClockTime end = 0;          // the last event's time + post: units past it are not the clip's
  GstClockTime limit = 0;        // its first unit's time + kMaxSeconds
  bool first = true;
};

// Where a tap hears from: the connection it was attached for, and whether it is the fallback.
struct EventClips::Tap {
  EventClips *clips;
  guint64 connection;
  bool fallback;
};

// A connection's pipeline as attach() found it: the elements to tap, those added later too.
struct EventClips::Attachment {
  EventClips *clips;
  guint64 connection;
  std::string parser;  // the recording's parser's name; "": none
  void tap(GstElement *element) const;
};

namespace {

// The parser that takes the kept stream's caps into mp4mux's: null for a stream not cut.
const char *parser_for(GstCaps *caps) {
  if (!caps || gst_caps_is_empty(caps) || gst_caps_is_any(caps)) return nullptr;
  const gchar *media = gst_structure_get_name(gst_caps_get_structure(caps, 0));
  if (g_strcmp0(media, "video/x-h264") == 0) return "h264parse";
  if (g_strcmp0(media, "video/x-h265") == 0) return "h265parse";
  return nullptr;
}

bool is_byte_stream(GstCaps *caps) {
  const gchar *format = gst_structure_get_string(gst_caps_get_structure(caps, 0), "stream-format");
  return !format || g_strcmp0(format, "byte-stream") == 0;
}

// The parameter-set NAL units (H.264 SPS, PPS; H.265 VPS, SPS, PPS) of a byte-stream access
// unit, each after a 4-byte start code; "" for none. They come before the unit's first slice,
// where the scan stops: the slices are the unit's bulk (a keyframe's, hundreds of KB).
std::string parameter_sets_in(GstBuffer *unit, bool h265) {
  std::string sets;
  GstMapInfo map;
  if (!gst_buffer_map(unit, &map, GST_MAP_READ)) return sets;
  const guint8 *d = map.data;
  const size_t n = map.size;
  const auto type_at = [&](size_t at) { return h265 ? (d[at] >> 1) & 0x3f : d[at] & 0x1f; };
  size_t nal = 0;  // where the current NAL's header is; 0: none yet
  // The current NAL, ending at `end`, kept where it is a parameter set.
  const auto take = [&](size_t end) {
    const int type = type_at(nal);
    const bool parameter_set = h265 ? type >= 32 && type <= 34 : type == 7 || type == 8;
    if (parameter_set && end > nal)
      sets.append("\0\0\0\1", 4).append(reinterpret_cast<const char *>(d + nal), end - nal);
  };
  for (size_t i = 0; i + 3 <= n; i++) {
    if (d[i] != 0 || d[i + 1] != 0 || d[i + 2] != 1) continue;
    if (nal)
      take(i > 0 && d[i - 1] == 0 ? i - 1 : i);  // a 4-byte start code's zero is not the NAL's
    nal = i + 3;
    i += 2;
    const int type = nal < n ? type_at(nal) : -1;
    if (h265 ? type >= 0 && type < 32 : type >= 1 && type <= 5) {
      nal = 0;  // the first slice: no parameter set comes after it in the unit
      break;
    }
  }
  if (nal && nal < n) take(n);
  gst_buffer_unmap(unit, &map);
  return sets;
}

bool is_video_decoder(GstElement *element) {
  GstElementFactory *factory = gst_element_get_factory(element);
  const gchar *klass =
      factory ? gst_element_factory_get_metadata(factory, GST_ELEMENT_METADATA_KLASS) : nullptr;
  return klass && strstr(klass, "Decoder") && strstr(klass, "Video");
}

}  // namespace

EventClips::EventClips(std::string camera, std::string dir, double pre_s, double post_s,
                       Finished finished)
    : camera_(std::move(camera)),
      dir_(std::move(dir)),
      pre_(static_cast<GstClockTime>(pre_s * GST_SECOND)),
      post_(static_cast<GstClockTime>(post_s * GST_SECOND)),
      finished_(std::move(finished)) {}

EventClips::~EventClips() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    forget_stream();
  }
  std::lock_guard<std::mutex> guard(finishing_lock_);
  for (Finishing &f : finishing_) f.thread.join();
}

void EventClips::attach(GstElement *pipeline, const char *recording_parser) {
  guint64 connection;
  {
    std::lock_guard<std::mutex> guard(lock_);
    connection = ++connection_;
    forget_stream();
  }
  auto *attached = new Attachment{this, connection, recording_parser ? recording_parser : ""};
  gst_cv_for_each_element(pipeline, [attached](GstElement *e) { attached->tap(e); });
  // uridecodebin adds its decoder once it knows the stream.
  g_signal_connect_data(
      pipeline, "deep-element-added",
      G_CALLBACK(+[](GstBin *, GstBin *, GstElement *e, gpointer data) {
        static_cast<Attachment *>(data)->tap(e);
      }),
      attached, [](gpointer data, GClosure *) { delete static_cast<Attachment *>(data); },
      static_cast<GConnectFlags>(0));
}

void EventClips::Attachment::tap(GstElement *element) const {
  const bool fallback = !parser.empty() && parser == GST_OBJECT_NAME(element);
  if (!fallback && !is_video_decoder(element)) return;
  GstPad *pad = gst_element_get_static_pad(element, fallback ? "src" : "sink");
  if (!pad) return;
  gst_pad_add_probe(
      pad,
      static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
      on_probe, new Tap{clips, connection, fallback},
      [](gpointer tap) { delete static_cast<Tap *>(tap); });
  gst_object_unref(pad);
}

GstPadProbeReturn EventClips::on_probe(GstPad *, GstPadProbeInfo *info, gpointer data) {
  const Tap *tap = static_cast<const Tap *>(data);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    tap->clips->hear_unit(GST_PAD_PROBE_INFO_BUFFER(info), tap->fallback, tap->connection);
  } else if (GstEvent *event = GST_PAD_PROBE_INFO_EVENT(info);
             GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps = nullptr;
    gst_event_parse_caps(event, &caps);
    tap->clips->hear_caps(caps, tap->fallback, tap->connection);
  }
  return GST_PAD_PROBE_OK;
}

void EventClips::detach() {
  std::lock_guard<std::mutex> guard(lock_);
  connection_++;  // the old pipeline's taps, until it stops, are not heard
  forget_stream();
}

void EventClips::forget_stream() {
  finish_open_clip();
  clear_ring();
  gst_caps_replace(&caps_, nullptr);
  own_stream_ = false;
}

void EventClips::hear_caps(GstCaps *caps, bool fallback, guint64 connection) {
  std::lock_guard<std::mutex> guard(lock_);
  if ((connection != kCurrent && connection != connection_) || (fallback && own_stream_)) return;
  if (!parser_for(caps)) return;  // not a stream to cut (a JPEG webcam's decoder)
  if (!fallback && !own_stream_) {
    forget_stream();  // the camera's own stream from now on: what the recording kept goes
    own_stream_ = true;
  }
  if (caps_ && gst_caps_is_equal(caps_, caps)) return;
  // A new stream (another resolution, another SPS): a clip holds one.
  finish_open_clip();
  clear_ring();
  gst_caps_replace(&caps_, caps);
}

GstClockTime EventClips::time_of(GstBuffer *unit) {
  return GST_BUFFER_PTS_IS_VALID(unit) ? GST_BUFFER_PTS(unit) : GST_BUFFER_DTS(unit);
}

void EventClips::hear_unit(GstBuffer *unit, bool fallback, guint64 connection) {
  std::lock_guard<std::mutex> guard(lock_);
  if ((connection != kCurrent && connection != connection_) || (fallback && own_stream_) || !caps_)
    return;
  const GstClockTime t = time_of(unit);
  const bool key = !GST_BUFFER_FLAG_IS_SET(unit, GST_BUFFER_FLAG_DELTA_UNIT);
  if (key && GST_CLOCK_TIME_IS_VALID(t)) ring_.push_back(Gop{t, {}, 0});
  if (key && is_byte_stream(caps_)) {
    std::string sets = parameter_sets_in(unit, parser_for(caps_) == std::string("h265parse"));
    if (!sets.empty()) parameter_sets_ = std::move(sets);
  }
  if (ring_.empty()) return;  // nothing decodable before the first keyframe
  ring_.back().units.push_back(gst_buffer_ref(unit));
  ring_.back().bytes += gst_buffer_get_size(unit);
  ring_bytes_ += gst_buffer_get_size(unit);
  // The GOP that starts at or before t - pre is the oldest one kept.
  while (ring_.size() >= 2 &&
         ((GST_CLOCK_TIME_IS_VALID(t) && t >= pre_ && ring_[1].start <= t - pre_) ||
          ring_bytes_ > kMaxRingBytes)) {
    for (GstBuffer *b : ring_.front().units) gst_buffer_unref(b);
    ring_bytes_ -= ring_.front().bytes;
    ring_.pop_front();
  }
  if (open_ && !push(unit)) finish_open_clip();
}

std::string EventClips::on_event(GstClockTime pts, guint64 first_id) {
  std::lock_guard<std::mutex> guard(lock_);
  if (!caps_ || ring_.empty() || !GST_CLOCK_TIME_IS_VALID(pts)) return "";
  if (open_ && pts <= open_->end && pts < open_->limit) {
    open_->end = std::max(open_->end, std::min(pts + post_, open_->limit));
    return open_->path;
  }
  finish_open_clip();
  size_t from = 0;  // the GOP whose keyframe is the last at or before pts - pre
  for (size_t i = 0; i < ring_.size(); i++)
    if (pts >= pre_ && ring_[i].start <= pts - pre_) from = i;
  GstBuffer *key = ring_[from].units.front();
  auto clip = std::make_unique<Clip>();
  clip->path = dir_ + "/" + std::to_string(first_id) + ".mp4";
  clip->base = GST_BUFFER_DTS_IS_VALID(key) ? GST_BUFFER_DTS(key) : time_of(key);
  clip->end = pts + post_;
  clip->limit = ring_[from].start + static_cast<GstClockTime>(kMaxSeconds * GST_SECOND);
  const std::string description = std::string("appsrc name=source format=time max-bytes=0 ! ") +
                                  parser_for(caps_) +
                                  " ! mp4mux faststart=true ! filesink name=file";
  GError *error = nullptr;
  clip->pipeline = gst_parse_launch(description.c_str(), &error);
  if (!clip->pipeline || g_mkdir_with_parents(dir_.c_str(), 0755) != 0) {
    const std::string why = error ? error->message : g_strerror(errno);
    g_clear_error(&error);
    if (clip->pipeline) gst_object_unref(clip->pipeline);
    set_failing(why);
    return "";
  }
  gst_object_ref_sink(clip->pipeline);
  clip->source = gst_bin_get_by_name(GST_BIN(clip->pipeline), "source");
  GstElement *file = gst_bin_get_by_name(GST_BIN(clip->pipeline), "file");
  g_object_set(clip->source, "caps", caps_, NULL);
  g_object_set(file, "location", (clip->path + ".part").c_str(), NULL);
  gst_object_unref(file);
  gst_element_set_state(clip->pipeline, GST_STATE_PLAYING);
  open_ = std::move(clip);
  const std::string path = open_->path;
  for (size_t g = from; open_ && g < ring_.size(); g++)
    for (GstBuffer *unit : ring_[g].units)
      if (!push(unit)) {
        finish_open_clip();
        break;
      }
  return path;
}

bool EventClips::push(GstBuffer *unit) {
  const GstClockTime t = time_of(unit);
  if (GST_CLOCK_TIME_IS_VALID(t) && t > open_->end) return false;
  // Shallow: the copy shares the unit's memory, its times are the clip's.
  GstBuffer *copy = gst_buffer_copy(unit);
  const auto moved = [this](GstClockTime time) {
    return !GST_CLOCK_TIME_IS_VALID(time) ? time : time > open_->base ? time - open_->base : 0;
  };
  GST_BUFFER_PTS(copy) = moved(GST_BUFFER_PTS(unit));
  GST_BUFFER_DTS(copy) = moved(GST_BUFFER_DTS(unit));
  if (open_->first) GST_BUFFER_FLAG_SET(copy, GST_BUFFER_FLAG_DISCONT);
  // A clip whose first keyframe does not carry the parameter sets gets the stream's before it.
  if (open_->first && !parameter_sets_.empty() && is_byte_stream(caps_) &&
      parameter_sets_in(unit, parser_for(caps_) == std::string("h265parse")).empty()) {
    GstBuffer *sets = gst_buffer_new_memdup(parameter_sets_.data(), parameter_sets_.size());
    gst_buffer_prepend_memory(copy, gst_buffer_get_all_memory(sets));
    gst_buffer_unref(sets);
  }
  open_->first = false;
  GstFlowReturn flow = GST_FLOW_OK;
  g_signal_emit_by_name(open_->source, "push-buffer", copy, &flow);
  gst_buffer_unref(copy);
  return true;
}

void EventClips::finish_open_clip() {
  if (!open_) return;
  GstFlowReturn flow = GST_FLOW_OK;
  g_signal_emit_by_name(open_->source, "end-of-stream", &flow);
  gst_object_unref(open_->source);
  std::shared_ptr<Clip> clip(open_.release());
  auto done = std::make_shared<std::atomic<bool>>(false);
  // mp4mux writes its index once the stream ends; the file is renamed whole only then.
  std::thread thread([this, clip, done] {
    GstBus *bus = gst_element_get_bus(clip->pipeline);
    GstMessage *end = gst_bus_timed_pop_filtered(
        bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    std::string error = end ? "" : "muxing took more than 30 s";
    if (end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_ERROR) {
      GError *e = nullptr;
      gst_message_parse_error(end, &e, nullptr);
      error = e->message;
      g_error_free(e);
    }
    if (end) gst_message_unref(end);
    gst_object_unref(bus);
    gst_element_set_state(clip->pipeline, GST_STATE_NULL);
    gst_object_unref(clip->pipeline);
    const std::string part = clip->path + ".part";
    if (error.empty() && g_rename(part.c_str(), clip->path.c_str()) != 0)
      error = std::string("cannot rename ") + part + ": " + g_strerror(errno);
    if (!error.empty()) g_remove(part.c_str());
    {
      std::lock_guard<std::mutex> guard(lock_);
      set_failing(error);
    }
    if (finished_) finished_(clip->path, error);
    done->store(true);
  });
  std::lock_guard<std::mutex> guard(finishing_lock_);
  finishing_.push_back({std::move(thread), done});
  reap_done();
}

void EventClips::reap_done() {
  for (auto it = finishing_.begin(); it != finishing_.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = finishing_.erase(it);
  }
}

void EventClips::clear_ring() {
  for (Gop &gop : ring_)
    for (GstBuffer *b : gop.units) gst_buffer_unref(b);
  ring_.clear();
  ring_bytes_ = 0;
  parameter_sets_.clear();
}

void EventClips::set_failing(const std::string &why) {
  if (!why.empty() && failing_.empty())
    log_line("camera %s: cannot write its events' clips in %s: %s; events go on without",
             camera_.c_str(), dir_.c_str(), why.c_str());
  failing_ = why;
}

std::string EventClips::failing() const {
  std::lock_guard<std::mutex> guard(lock_);
  return failing_;
}

std::vector<std::string> EventClips::remove_unfinished(const std::string &dir) {
  std::vector<std::string> out;
  GDir *files = g_dir_open(dir.c_str(), 0, nullptr);
  if (!files) return out;
  while (const gchar *name = g_dir_read_name(files)) {
    if (!g_str_has_suffix(name, ".mp4.part")) continue;
    const std::string part = dir + "/" + name;
    if (g_remove(part.c_str()) == 0) out.push_back(part.substr(0, part.size() - 5));
  }
  g_dir_close(files);
  return out;
}

}  // namespace cudanms::service
