#include "outputs.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <json-glib/json-glib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "counting_file.h"
#include "log.h"

namespace cudanms::service {
namespace {

constexpr size_t kRecentLatencies = 1024;  // the window of the NMS p50/p99

#ifdef CUDANMS_HAVE_MQTT
// What subscribers of PREFIX/CAMERA/status read for each state.
const char *mqtt_status(const std::string &state) {
  if (state == "streaming") return "online";
  if (state == "starting" || state == "reconnecting") return "reconnecting";
  return "offline";
}
#endif

}  // namespace

CountingState CountingState::kept_for(const std::map<std::string, std::string> &lines_kept) const {
  CountingState out;
  out.next_track_id = next_track_id;
  out.next_event_id = next_event_id;
  out.undelivered = undelivered;
  for (const auto &[name, counts] : lines)
    if (lines_kept.count(name)) out.lines[name] = counts;
  for (const auto &[key, n] : crossings)
    if (lines_kept.count(std::get<0>(key))) out.crossings[key] = n;
  return out;
}

LineTallies CountingState::tallies() const {
  LineTallies out;
  for (const auto &[name, in_out] : lines) out[name].total = {in_out.first, in_out.second};
  for (const auto &[key, n] : crossings) {
    const auto &[line, direction, label] = key;
    const auto found = out.find(line);
    if (found == out.end() || label.empty()) continue;
    LineCounts &c = found->second.by_label[label];
    (direction == "in" ? c.in : c.out) = n;
  }
  return out;
}

CountingState CountingState::without_outbox() const {
  CountingState out;
  out.next_track_id = next_track_id;
  out.next_event_id = next_event_id;
  out.lines = lines;
  out.crossings = crossings;
  out.occupancy = occupancy;
  out.loitered = loitered;
  out.loitering = loitering;
  return out;
}

CameraOutputs::CameraOutputs(const CameraConfig &config, const CameraRun &run,
                             CountingState counted)
    : config_(config),
      counts_file_(run.counts_file),
      counting_(std::move(counted)),
      pictures_dir_(run.snapshots.empty() ? "" : run.snapshots + "/" + config.name),
      snapshots_(run.snapshots),
      snapshots_size_(run.snapshots_size),
      line_shapes_(config.line_shapes),
      history_(run.history),
      host_(run.host) {
  if (!run.fleet_store.endpoints.empty()) store_ = std::make_unique<FleetStore>(run.fleet_store);
  keep_counting(counted_now());  // ids reserved from the start
  if (config.clips && !pictures_dir_.empty() && config.tracker && config.counting())
    clips_ = std::make_unique<EventClips>(
        config.name, pictures_dir_, config.clip_pre_s, config.clip_post_s,
        [this](const std::string &path, const std::string &error) {
          on_clip_finished(path, error);
        });
}

CountingState CameraOutputs::counted_now() const {
  std::lock_guard<std::mutex> guard(counts_lock_);
  return counting_.without_outbox();
}

void CameraOutputs::set_line_shapes(std::map<std::string, std::string> shapes) {
  {
    std::lock_guard<std::mutex> guard(keep_lock_);
    line_shapes_ = std::move(shapes);
    saved_ = CountingState();  // kept again, with the new shapes
    reserved_ids_ = reserved_events_ = 0;
  }
  keep_counting(counted_now());
}

// etcd: a host cut off from it waits on it once a second at most, not on every frame; it fences
// itself within its lease's time anyway (fleet_agent.h). False unless stored; the delivered events
// it forgot leave *delivered.
bool CameraOutputs::store_counts(const CountingState &keeping,
                                 const std::map<guint64, std::string> &sent,
                                 std::set<guint64> *delivered, gint64 now_us) {
  std::string error;
  if (now_us < store_retry_us_) return false;
  switch (store_->save(counting_json(keeping, line_shapes_, false), sent, *delivered, &error)) {
    case FleetStore::Outcome::kStored:
      if (store_retry_us_)
        log_line("camera %s: its counts are kept in etcd again", config_.name.c_str());
      store_retry_us_ = 0;
      forgotten_us_ = now_us;
      delivered->clear();
      break;
    case FleetStore::Outcome::kNotOwner:
      if (!not_owner_.exchange(true))
        log_line("camera %s: etcd says another host owns it now: nothing more is published here",
                 config_.name.c_str());
      delivered->clear();
      break;
    case FleetStore::Outcome::kFailed:
      if (!store_retry_us_)
        log_line("camera %s: cannot keep its counts in etcd: %s; trying again each second",
                 config_.name.c_str(), error.c_str());
      store_retry_us_ = now_us + G_USEC_PER_SEC;
      return false;
  }
  return true;
}

CameraOutputs::Kept CameraOutputs::keep_counting(CountingState now,
                                                 std::map<guint64, std::string> sent) {
  const bool fleet = store_ != nullptr;
  if (counts_file_.empty() && !fleet) return Kept::kYes;
  std::lock_guard<std::mutex> guard(keep_lock_);
  const gint64 now_us = g_get_monotonic_time();
  std::set<guint64> delivered;
  {
    std::lock_guard<std::mutex> taken(delivered_->lock);
    delivered.swap(delivered_->ids);
  }
  {
    std::lock_guard<std::mutex> counts(counts_lock_);
    for (guint64 id : delivered) counting_.undelivered.erase(id);
    for (const auto &[id, message] : sent) counting_.undelivered[id] = message;
    now.undelivered = counting_.undelivered;
  }
  // Delivered events alone leave the outbox at most once a second; anything counted at once.
  const bool counted = now.next_track_id >= reserved_ids_ ||
                       now.next_event_id >= reserved_events_ || now.lines != saved_.lines ||
                       now.crossings != saved_.crossings || !sent.empty();
  const bool forgetting = !delivered.empty() && now_us - forgotten_us_ >= G_USEC_PER_SEC;
  if (!counted && !forgetting) {
    std::lock_guard<std::mutex> back(delivered_->lock);
    delivered_->ids.insert(delivered.begin(), delivered.end());
    return not_owner_ ? Kept::kNotOwner : Kept::kYes;
  }
  CountingState keeping = now;
  keeping.occupancy.clear();
  keeping.next_track_id =
      now.next_track_id < reserved_ids_ ? reserved_ids_ : now.next_track_id + kReservedIds;
  keeping.next_event_id =
      now.next_event_id < reserved_events_ ? reserved_events_ : now.next_event_id + kReservedIds;
  std::string error;
  bool kept = true;
  if (!counts_file_.empty() && !save_counting(counts_file_, keeping, line_shapes_, &error)) {
    if (!save_failing_)
      log_line("camera %s: cannot keep its counts in %s: %s", config_.name.c_str(),
               counts_file_.c_str(), error.c_str());
    save_failing_ = true;
    kept = false;
  }
  const bool stored = !fleet || store_counts(keeping, sent, &delivered, now_us);
  if (!stored) kept = false;
  if (!delivered.empty()) {  // not out of the outbox yet: next time
    std::lock_guard<std::mutex> back(delivered_->lock);
    delivered_->ids.insert(delivered.begin(), delivered.end());
  }
  if (kept) {
    save_failing_ = false;
    saved_ = keeping;
    reserved_ids_ = keeping.next_track_id;
    reserved_events_ = keeping.next_event_id;
  }
  if (not_owner_) return Kept::kNotOwner;
  return stored ? Kept::kYes : Kept::kNotInEtcd;
}

void CameraOutputs::send_event(guint64 id, std::string message) {
#ifdef CUDANMS_HAVE_MQTT
  if (!mqtt_) return;
  std::weak_ptr<Delivered> delivered = delivered_;
  mqtt_->push_reliable(config_.mqtt_topic + "/events", std::move(message), [delivered, id] {
    if (auto d = delivered.lock()) {
      std::lock_guard<std::mutex> guard(d->lock);
      d->ids.insert(id);
    }
  });
#else
  (void)id;
  (void)message;
#endif
}

CameraOutputs::~CameraOutputs() { close(0); }

bool CameraOutputs::open(std::string *error) {
  if (clips_) {
    // Clips this host stopped writing (killed mid-clip) are never served: marked gone.
    const std::vector<std::string> unfinished = EventClips::remove_unfinished(pictures_dir_);
    std::string why;
    if (!unfinished.empty() && history_ && !history_->forget_files(unfinished, &why))
      log_line("camera %s: %zu unfinished clips removed, their events not marked so: %s",
               config_.name.c_str(), unfinished.size(), why.c_str());
  }
  if (!config_.json.empty()) {
    gchar *dir = g_path_get_dirname(config_.json.c_str());
    g_mkdir_with_parents(dir, 0755);  // the config's check made sure it can be
    g_free(dir);
    if (!file_.open(config_.json, true)) {
      *error = "cannot open " + config_.json + ": " + g_strerror(errno);
      return false;
    }
    file_open_ = true;
  }
#ifdef CUDANMS_HAVE_MQTT
  if (!config_.mqtt_address.empty()) {
    MqttOptions options;
    options.address = config_.mqtt_address;
    options.topic = config_.mqtt_topic;
    options.client_id = std::string("cudanms-") + g_get_host_name() + "-" +
                        std::to_string(getpid()) + "-" + config_.name;
    options.will_topic = config_.status_topic;
    options.will_message = "offline";
    const std::string name = config_.name;
    auto outage = std::make_shared<bool>(false);
    mqtt_ = std::make_unique<MqttPublisher>(
        options, [name, outage](MqttEvent event, const std::string &detail) {
          // The publisher's own thread: a line only at the edges of a broker outage.
          if (event == MqttEvent::kConnectFailed)
            log_line("camera %s: cannot reach the MQTT broker: %s; retrying, messages queued",
                     name.c_str(), detail.c_str());
          if (event == MqttEvent::kConnectionLost)
            log_line("camera %s: lost the MQTT broker: %s", name.c_str(), detail.c_str());
          if (event == MqttEvent::kConnected && *outage)
            log_line("camera %s: the MQTT broker is reached again", name.c_str());
          *outage = event != MqttEvent::kConnected;
        });
    if (!mqtt_->start(error)) {
      mqtt_.reset();
      return false;
    }
    // What the camera's last host sent and the broker may never have had, again, under the
    // same ids: consumers that de-duplicate on (camera, id) count each event once.
    std::map<guint64, std::string> undelivered;
    {
      std::lock_guard<std::mutex> guard(counts_lock_);
      undelivered = counting_.undelivered;
    }
    for (auto &[id, message] : undelivered) send_event(id, std::move(message));
  }
#endif
  {
    std::lock_guard<std::mutex> guard(queue_lock_);
    keeper_running_ = true;
  }
  keeper_ = std::thread([this] { run_keeper(); });
  return true;
}

void CameraOutputs::send(Outgoing out) {
  std::unique_lock<std::mutex> lock(queue_lock_);
  if (!keeper_running_) {
    lock.unlock();
    deliver(out);
    return;
  }
  if (queue_.size() >= kMaxQueued) {
    full_waits_++;
    queue_changed_.wait(lock, [&] { return queue_.size() < kMaxQueued || !keeper_running_; });
    if (!keeper_running_) {  // closed meanwhile: the keeper delivers what it holds and goes
      lock.unlock();
      deliver(out);
      return;
    }
  }
  queue_.push_back(std::move(out));
  queue_changed_.notify_all();
}

void CameraOutputs::run_keeper() {
  std::unique_lock<std::mutex> lock(queue_lock_);
  for (;;) {
    queue_changed_.wait(lock, [&] { return !queue_.empty() || !keeper_running_; });
    if (queue_.empty()) return;  // stopping, and everything delivered
    Outgoing out = std::move(queue_.front());
    lock.unlock();
    deliver(out, true);
    lock.lock();
    queue_.pop_front();  // counted as queued until delivered
    queue_changed_.notify_all();
  }
}

void CameraOutputs::deliver(Outgoing &out, bool keeper) {
  if (out.frame && keeps()) {
    const std::map<guint64, std::string> sent = store_ ? out.events : decltype(sent)();
    // A fleet's frame is published once etcd has its counts: a failed store is tried again each
    // second, the frames after it waiting behind. Once its connection stops (fenced: etcd is
    // gone) or the outputs close, they are not published at all: what they say was never kept
    // for the next owner, and a fenced host publishes nothing.
    std::unique_lock<std::mutex> lock(queue_lock_);
    if (out.connection == unkept_connection_) {
      unkept_frames_++;
      return;
    }
    lock.unlock();
    Kept kept;
    while ((kept = keep_counting(out.counted, sent)) == Kept::kNotInEtcd && keeper) {
      lock.lock();
      if (queue_changed_.wait_for(lock, std::chrono::seconds(1), [&] {
            return !keeper_running_ || connection_ != out.connection;
          })) {
        unkept_connection_ = out.connection;  // the frames behind it too: lines go in order
        unkept_frames_++;
        lock.unlock();
        log_line(
            "camera %s: frames not published from here to its stop: etcd did not take their "
            "counts before it",
            config_.name.c_str());
        return;
      }
      lock.unlock();
    }
    if (kept == Kept::kNotOwner) return;  // another host's camera now: not published
  }
  if (!out.line.empty()) {
    std::lock_guard<std::mutex> guard(file_lock_);
    write_line(out.line.data(), out.line.size());
  }
#ifdef CUDANMS_HAVE_MQTT
  if (out.frame && mqtt_) {
    if (!out.line.empty()) mqtt_->push(std::move(out.line));
    for (auto &[id, event] : out.events) send_event(id, std::move(event));
  }
#endif
}

void CameraOutputs::on_event(GstEvent *event) {
  std::lock_guard<std::mutex> guard(file_lock_);
  encoder_.on_event(event);
}

void CameraOutputs::write_line(const char *text, size_t length) {
  if (!file_open_) return;
  if (file_.write_line(text, length)) {
    if (write_failing_)
      log_line("camera %s: writing %s again", config_.name.c_str(), config_.json.c_str());
    write_failing_ = false;
    return;
  }
  if (!write_failing_)
    log_line("camera %s: cannot write %s: %s; lines are counted as lost until it can",
             config_.name.c_str(), config_.json.c_str(), g_strerror(errno));
  write_failing_ = true;
  std::lock_guard<std::mutex> guard(counts_lock_);
  counts_.lines_lost++;
}

bool CameraOutputs::writes() const {
#ifdef CUDANMS_HAVE_MQTT
  if (mqtt_) return true;
#endif
  return file_open_;
}

void CameraOutputs::on_frame(GstBuffer *buffer, const GstSegment *segment, double chain_s) {
  if (not_owner_) return;
  const GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buffer);
  Outgoing out;
  out.frame = true;
  {
    std::lock_guard<std::mutex> guard(queue_lock_);
    out.connection = connection_;
  }
  guint64 first_event = 0;
  {
    std::lock_guard<std::mutex> guard(counts_lock_);
    first_event = count(buffer);
    if (keeps()) out.counted = counting_.without_outbox();
  }
  if (writes()) {
    std::lock_guard<std::mutex> guard(file_lock_);
    const DetectionsFormat format =
        config_.format == "dlstreamer" ? DetectionsFormat::kDlStreamer : DetectionsFormat::kCudanms;
    gsize length = 0;
    gchar *text =
        encoder_.encode(nullptr, buffer, format, config_.name, segment, &length, first_event);
    if (text) out.line.assign(text, length);
    g_free(text);
#ifdef CUDANMS_HAVE_MQTT
    guint64 id = first_event;
    if (mqtt_)
      for (std::string &event : encoder_.encode_events(buffer, config_.name, first_event))
        out.events[id++] = std::move(event);
#endif
  }
  // Counted and kept (the counts file; etcd, with the events in its outbox) before the frame
  // is written or sent, by the keeper: what a JSON line or a message says survives the
  // worker's or the host's death, and the frame goes on meanwhile.
  send(std::move(out));
  std::lock_guard<std::mutex> guard(counts_lock_);
  counts_.frames++;
  counts_.last_frame_us = g_get_monotonic_time();
  counts_.chain_sum_s += chain_s;
  if (!result) return;
  counts_.candidates += result->candidates_in;
  counts_.kept += result->kept;
  const double us = result->latency_ns / 1000.0;
  counts_.nms_sum_s += us / 1e6;
  if (counts_.recent_nms_us.size() < kRecentLatencies) {
    counts_.recent_nms_us.push_back(us);
  } else {
    counts_.recent_nms_us[next_latency_] = us;
  }
  next_latency_ = (next_latency_ + 1) % kRecentLatencies;
}

void CameraOutputs::on_state(const std::string &state, const std::string &previous,
                             const std::string &reason, long attempt) {
  if (state != "streaming" && state != "starting") {  // the connection's frames are all in
    std::lock_guard<std::mutex> guard(queue_lock_);
    connection_++;
    queue_changed_.notify_all();
  }
#ifdef CUDANMS_HAVE_MQTT
  if (mqtt_) mqtt_->set_status(config_.status_topic, mqtt_status(state));
#endif
  if (!file_open_) return;
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "source");
  json_builder_add_string_value(b, config_.name.c_str());
  GDateTime *now = g_date_time_new_now_utc();
  gchar *time = g_date_time_format_iso8601(now);
  json_builder_set_member_name(b, "time");
  json_builder_add_string_value(b, time);
  g_free(time);
  g_date_time_unref(now);
  json_builder_set_member_name(b, "state");
  json_builder_add_string_value(b, state.c_str());
  json_builder_set_member_name(b, "previous");
  json_builder_add_string_value(b, previous.c_str());
  json_builder_set_member_name(b, "reason");
  json_builder_add_string_value(b, reason.c_str());
  json_builder_set_member_name(b, "attempt");
  json_builder_add_int_value(b, attempt);
  json_builder_end_object(b);
  JsonNode *root = json_builder_get_root(b);
  gsize length = 0;
  gchar *text = json_to_string(root, FALSE);
  length = strlen(text);
  Outgoing line;
  line.line.assign(text, length);
  send(std::move(line));  // after the frames before it
  g_free(text);
  json_node_unref(root);
  g_object_unref(b);
}

void CameraOutputs::close(guint flush_ms) {
  if (keeper_.joinable()) {  // what is queued delivered first
    {
      std::lock_guard<std::mutex> guard(queue_lock_);
      keeper_running_ = false;
    }
    queue_changed_.notify_all();
    keeper_.join();
  }
#ifdef CUDANMS_HAVE_MQTT
  if (mqtt_) {
    mqtt_->set_status(config_.status_topic, "offline");
    mqtt_->stop(std::chrono::milliseconds(flush_ms));
    const MqttStats stats = mqtt_->stats();
    std::lock_guard<std::mutex> guard(counts_lock_);
    counts_.published = stats.published;
    counts_.dropped = stats.dropped;
  }
  mqtt_.reset();
#else
  (void)flush_ms;
#endif
  std::lock_guard<std::mutex> guard(file_lock_);
  if (file_open_ && !file_.close())
    log_line("camera %s: cannot close %s: %s", config_.name.c_str(), config_.json.c_str(),
             g_strerror(errno));
  file_open_ = false;
}

guint64 CameraOutputs::count(GstBuffer *buffer) {
  if (const GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buffer);
      result && result->track_ids)
    for (guint i = 0; i < result->n_kept; i++)
      counting_.next_track_id = std::max(counting_.next_track_id, result->track_ids[i] + 1);
  const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buffer);
  if (!counts) return 0;
  const guint64 first_event = counts->n_events ? counting_.next_event_id : 0;
  counting_.next_event_id += counts->n_events;
  // The frame's events share a clip (and one with the events just before and after it).
  const std::string clip =
      clips_ && first_event ? clips_->on_event(GST_BUFFER_PTS(buffer), first_event) : "";
  std::vector<HistoryEvent> pictured;  // the frame's events, for its picture
  for (guint i = 0; i < counts->n_events; i++) {
    const GstCudaNmsCountEvent &e = counts->events[i];
    const char *direction = e.kind != GST_CUDA_NMS_COUNT_LINE_CROSSED ? ""
                            : e.direction > 0                         ? "in"
                                                                      : "out";
    recent_events_.push_front({first_event + i, g_get_real_time(),
                               gst_cuda_nms_count_event_kind_name(e.kind), e.name, direction,
                               e.label ? e.label : "", e.track_id, e.dwell});
    if (recent_events_.size() > kRecentEvents) recent_events_.pop_back();
    HistoryEvent kept;
    static_cast<CountEvent &>(kept) = recent_events_.front();
    kept.camera = config_.name;
    kept.host = host_;
    kept.clip = clip;
    if (!pictures_dir_.empty()) pictured.push_back(kept);
    if (history_) history_->add(std::move(kept));  // queued: the database never holds the frame
    if (e.kind == GST_CUDA_NMS_COUNT_ZONE_LOITERING)
      counting_.loitered[{e.name, e.label ? e.label : ""}]++;
    if (e.kind != GST_CUDA_NMS_COUNT_LINE_CROSSED) continue;
    counting_.crossings[{e.name, direction, e.label ? e.label : ""}]++;
  }
  if (!pictured.empty()) {
    std::lock_guard<std::mutex> guard(pictures_lock_);
    pending_pictures_.emplace_back(GST_BUFFER_PTS(buffer), std::move(pictured));
    if (pending_pictures_.size() > kPendingPictures) pending_pictures_.pop_front();
  }
  counting_.lines.clear();  // the lines of now: a reload may have removed some
  for (guint i = 0; i < counts->n_lines; i++)
    counting_.lines[counts->lines[i].name] = {counts->lines[i].in, counts->lines[i].out};
  // Labels seen in a zone before stay, at 0 once it has none of them: a gauge that goes to 0.
  for (auto &[key, n] : counting_.occupancy) n = 0;
  for (guint i = 0; i < counts->n_zones; i++) {
    const GstCudaNmsZoneCount &z = counts->zones[i];
    for (guint k = 0; k < z.n_labels; k++)
      counting_.occupancy[{z.name, z.labels[k].label}] = z.labels[k].occupancy;
    counting_.loitering[z.name] = z.loitering;
  }
  return first_event;
}

std::vector<RecentEvent> CameraOutputs::recent_events() const {
  std::lock_guard<std::mutex> guard(counts_lock_);
  return {recent_events_.begin(), recent_events_.end()};
}

CountingState CameraOutputs::counting() const {
  std::lock_guard<std::mutex> guard(counts_lock_);
  return counting_;
}

FrameCounts CameraOutputs::counts() const {
  FrameCounts out;
  {
    std::lock_guard<std::mutex> guard(counts_lock_);
    out = counts_;
  }
  if (clips_) out.clips_failing = clips_->failing();
  {
    std::lock_guard<std::mutex> guard(queue_lock_);
    out.outputs_queued = queue_.size();
    out.outputs_full_waits = full_waits_;
    out.outputs_unkept = unkept_frames_;
  }
#ifdef CUDANMS_HAVE_MQTT
  if (mqtt_) {
    const MqttStats stats = mqtt_->stats();
    out.published = stats.published;
    out.dropped = stats.dropped;
  }
#endif
  return out;
}

}  // namespace cudanms::service
