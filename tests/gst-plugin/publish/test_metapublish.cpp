// metapublish against a real broker (Debian's mosquitto, started by the tests on 127.0.0.1 and a
// free port; the tests skip, visibly, where it is not installed): every frame's message arrives,
// in order, with the kept boxes; DL Streamer's format as gvametaconvert writes it; and the
// faults: no broker at start, the broker killed and restarted mid-stream, a slow subscriber.
// The stream never stalls, and every message is published or counted as dropped.
#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <gst/app/gstappsrc.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gstmetapublish.h"
#include "mqttpublisher.h"
#include "gst-plugin/cv_support.h"
#include "gst-plugin/element_support.h"
#include "support/mqtt_broker.h"
#include "support/seed.h"
#include "synthetic.h"

namespace cudanms::testing {
namespace {

constexpr int kWidth = 640, kHeight = 480;
constexpr GstClockTime kFrameDuration = GST_SECOND / 30;

struct Run {
  bool eos = false;
  double seconds = 0;
  std::vector<GstBuffer *> out;  // the frames after metapublish, with their result metas
  std::vector<std::string> warnings;
  std::vector<std::string> errors;
  guint64 dropped_reported = 0;  // the last "metapublish-dropped" message's total
  bool disconnected_reported = false;
  guint64 published = 0, dropped = 0;
  ~Run() {
    for (GstBuffer *b : out) gst_buffer_unref(b);
  }
};

void read_bus(GstBus *bus, Run *run, GstClockTime timeout, bool until_eos) {
  for (;;) {
    GstMessage *m = gst_bus_timed_pop(bus, timeout);
    if (!m) return;
    switch (GST_MESSAGE_TYPE(m)) {
      case GST_MESSAGE_EOS:
        run->eos = true;
        break;
      case GST_MESSAGE_WARNING:
      case GST_MESSAGE_ERROR: {
        GError *error = nullptr;
        gchar *debug = nullptr;
        if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
          gst_message_parse_warning(m, &error, &debug);
          run->warnings.push_back(std::string(error->message) + " | " + (debug ? debug : ""));
        } else {
          gst_message_parse_error(m, &error, &debug);
          run->errors.push_back(std::string(error->message) + " | " + (debug ? debug : ""));
        }
        g_clear_error(&error);
        g_free(debug);
        break;
      }
      case GST_MESSAGE_ELEMENT: {
        const GstStructure *s = gst_message_get_structure(m);
        if (gst_structure_has_name(s, "metapublish-dropped")) {
          gst_structure_get_uint64(s, "dropped", &run->dropped_reported);
        }
        if (gst_structure_has_name(s, "metapublish-disconnected"))
          run->disconnected_reported = true;
        break;
      }
      default:
        break;
    }
    const bool done = until_eos && (run->eos || !run->errors.empty());
    gst_message_unref(m);
    if (done) return;
  }
}

// appsrc (the sets as candidate metas, 30 fps timestamps) ! cudanms ! metapublish ! appsink,
// one frame at a time, `pace` between them; on_frame(i) runs after frame i went through.
// `between`: elements between cudanms and metapublish ("boxtrack ! boxcount ...").
std::unique_ptr<Run> run_frames(const std::string &publish, const std::vector<CandidateSet> &sets,
                                std::chrono::milliseconds pace = std::chrono::milliseconds(0),
                                const std::function<void(size_t)> &on_frame = nullptr,
                                const std::string &between = "") {
  auto run = std::make_unique<Run>();
  const std::string description =
      "appsrc name=src format=time caps=video/x-raw,format=GRAY8,width=" + std::to_string(kWidth) +
      ",height=" + std::to_string(kHeight) + ",framerate=30/1 ! cudanms backend=cpu ! " +
      (between.empty() ? "" : between + " ! ") + "metapublish name=pub " + publish +
      " ! appsink name=sink sync=false";
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  EXPECT_NE(pipeline, nullptr) << (error ? error->message : "");
  if (!pipeline) return run;
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstElement *pub = gst_bin_get_by_name(GST_BIN(pipeline), "pub");
  GstBus *bus = gst_element_get_bus(pipeline);
  const auto started = std::chrono::steady_clock::now();
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE) {
    for (size_t i = 0; i < sets.size(); ++i) {
      GstBuffer *buf = packed_buffer(sets[i]);
      GST_BUFFER_PTS(buf) = i * kFrameDuration;
      GST_BUFFER_DURATION(buf) = kFrameDuration;
      if (gst_app_src_push_buffer(GST_APP_SRC(src), buf) != GST_FLOW_OK) break;
      GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
      if (!sample) break;
      run->out.push_back(gst_buffer_ref(gst_sample_get_buffer(sample)));
      gst_sample_unref(sample);
      if (on_frame) on_frame(i);
      if (pace.count() > 0) std::this_thread::sleep_for(pace);
    }
    gst_app_src_end_of_stream(GST_APP_SRC(src));
    read_bus(bus, run.get(), 20 * GST_SECOND, true);
  }
  run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // READY stops the element (the queue drains, what is left is counted); its counts stay.
  gst_element_set_state(pipeline, GST_STATE_READY);
  read_bus(bus, run.get(), 0, false);
  g_object_get(pub, "published", &run->published, "dropped", &run->dropped, NULL);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pub);
  gst_object_unref(sink);
  gst_object_unref(src);
  gst_object_unref(pipeline);
  return run;
}

std::vector<CandidateSet> frames_of(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<CandidateSet> sets;
  for (size_t i = 0; i < count; ++i) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 300)(rng);
    sets.push_back(tools::sliding_window_candidates(n, rng(), 3, kWidth, kHeight));
  }
  return sets;
}

// A parsed message (json-glib); null when it is not a JSON object.
struct Json {
  explicit Json(const std::string &text) : parser(json_parser_new()) {
    if (json_parser_load_from_data(parser, text.c_str(), -1, nullptr)) {
      JsonNode *root = json_parser_get_root(parser);
      if (JSON_NODE_HOLDS_OBJECT(root)) object = json_node_get_object(root);
    }
  }
  ~Json() { g_object_unref(parser); }
  JsonParser *parser;
  JsonObject *object = nullptr;
};

class MetaPublish : public ::testing::Test {
 protected:
  void SetUp() override {
    init_cv_elements_once();
    ASSERT_TRUE(GST_ELEMENT_REGISTER(metapublish, nullptr));
  }
  // A running broker, or a visible skip.
  void start_broker() {
    if (mosquitto_binary().empty()) GTEST_SKIP() << "no mosquitto (Debian package mosquitto)";
    broker_ = std::make_unique<Broker>(free_port());
    ASSERT_TRUE(broker_->start()) << "mosquitto did not start on port " << broker_->port();
  }
  std::unique_ptr<Broker> broker_;
};

// The cudanms-format message of a frame carries exactly the frame's result meta.
::testing::AssertionResult message_matches(const std::string &text, size_t frame, GstBuffer *buf,
                                           const std::string &source) {
  Json json(text);
  if (!json.object) return ::testing::AssertionFailure() << "not a JSON object: " << text;
  JsonObject *o = json.object;
  if (json_object_get_int_member(o, "frame") != static_cast<gint64>(frame))
    return ::testing::AssertionFailure() << "frame " << frame << " got " << text;
  if (json_object_get_int_member(o, "pts") != static_cast<gint64>(frame * kFrameDuration) ||
      json_object_get_int_member(o, "width") != kWidth ||
      std::string(json_object_get_string_member(o, "source")) != source)
    return ::testing::AssertionFailure() << "frame " << frame << " header: " << text;
  GstCudaNmsResultMeta *meta = gst_buffer_get_cuda_nms_result_meta(buf);
  if (!meta) return ::testing::AssertionFailure() << "no result meta on frame " << frame;
  JsonArray *boxes = json_object_get_array_member(o, "boxes");
  if (json_object_get_int_member(o, "kept") != meta->n_kept ||
      json_array_get_length(boxes) != meta->n_kept ||
      json_object_get_int_member(o, "candidates") != static_cast<gint64>(meta->candidates_in))
    return ::testing::AssertionFailure() << "frame " << frame << " counts: " << text;
  for (guint k = 0; k < meta->n_kept; ++k) {
    JsonObject *b = json_array_get_object_element(boxes, k);
    const gfloat *box = meta->boxes + 4 * k;
    if (json_object_get_double_member(b, "score") != meta->scores[k] ||
        json_object_get_int_member(b, "class_id") != meta->class_ids[k] ||
        json_object_get_double_member(b, "x") != box[0] ||
        json_object_get_double_member(b, "y") != box[1] ||
        json_object_get_double_member(b, "w") != double(box[2] - box[0]) ||
        json_object_get_double_member(b, "h") != double(box[3] - box[1]))
      return ::testing::AssertionFailure() << "frame " << frame << " box " << k << ": " << text;
  }
  return ::testing::AssertionSuccess();
}

// metapublish only reads the metadata: a frame held elsewhere too (not writable) leaves as the
// very buffer, and it is still published (here to a file: one line).
TEST_F(MetaPublish, TheFrameLeavesUntouchedAndIsPublished) {
  guint64 published = 0;
  EXPECT_TRUE(
      passes_the_frame_itself("metapublish method=file location=/dev/null", [&](GstHarness *h) {
        GstElement *publisher = gst_harness_find_element(h, "metapublish");
        g_object_get(publisher, "published", &published, nullptr);
        gst_object_unref(publisher);
      }));
  EXPECT_EQ(published, 1u);
}

TEST_F(MetaPublish, EveryFrameArrivesInOrderWithItsKeptBoxes) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  Subscriber subscriber(broker_->port(), "site/cam-1");
  ASSERT_TRUE(subscriber.connected());
  const auto sets = frames_of(60, run_seed() + 300);
  auto run = run_frames(
      "method=mqtt qos=1 topic=site/cam-1 camera-id=cam-1 address=" + broker_->address(), sets);
  ASSERT_TRUE(run->eos);
  EXPECT_TRUE(run->warnings.empty()) << run->warnings.front();
  EXPECT_EQ(run->published, 60u);
  EXPECT_EQ(run->dropped, 0u);
  ASSERT_TRUE(subscriber.wait_for(60, std::chrono::seconds(10)));
  const auto messages = subscriber.messages();
  ASSERT_EQ(messages.size(), 60u);
  ASSERT_EQ(run->out.size(), 60u);
  size_t boxes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_TRUE(message_matches(messages[i], i, run->out[i], "cam-1"));
    boxes += gst_buffer_get_cuda_nms_result_meta(run->out[i])->n_kept;
  }
  EXPECT_GT(boxes, 60u);  // the frames did keep boxes
}

// format=dlstreamer, field for field as DL Streamer's gvametaconvert writes them (its
// jsonconverter.cpp): pixel x, y, w, h; the box as fractions of the frame; timestamp in ns.
TEST_F(MetaPublish, DlStreamerFormatAsGvametaconvertWritesIt) {
  gchar *dir = g_dir_make_tmp("metapublish-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/messages.jsonl";
  const auto sets = frames_of(8, run_seed() + 301);
  auto run =
      run_frames("method=file format=dlstreamer camera-id=cam-2 location=\"" + path + "\"", sets);
  ASSERT_TRUE(run->eos);
  EXPECT_EQ(run->published, 8u);
  gchar *contents = nullptr;
  ASSERT_TRUE(g_file_get_contents(path.c_str(), &contents, nullptr, nullptr));
  gchar **lines = g_strsplit(contents, "\n", -1);
  ASSERT_EQ(g_strv_length(lines), 9u);  // 8 lines and the empty string after the last newline
  for (size_t i = 0; i < 8; ++i) {
    Json json(lines[i]);
    ASSERT_NE(json.object, nullptr) << lines[i];
    JsonObject *o = json.object;
    JsonObject *resolution = json_object_get_object_member(o, "resolution");
    EXPECT_EQ(json_object_get_int_member(resolution, "width"), kWidth);
    EXPECT_EQ(json_object_get_int_member(resolution, "height"), kHeight);
    EXPECT_STREQ(json_object_get_string_member(o, "source"), "cam-2");
    EXPECT_EQ(json_object_get_int_member(o, "timestamp"), static_cast<gint64>(i * kFrameDuration));
    GstCudaNmsResultMeta *meta = gst_buffer_get_cuda_nms_result_meta(run->out[i]);
    JsonArray *objects = json_object_get_array_member(o, "objects");
    ASSERT_EQ(json_array_get_length(objects), meta->n_kept) << lines[i];
    for (guint k = 0; k < meta->n_kept; ++k) {
      JsonObject *object = json_array_get_object_element(objects, k);
      JsonObject *detection = json_object_get_object_member(object, "detection");
      JsonObject *bb = json_object_get_object_member(detection, "bounding_box");
      const gfloat *box = meta->boxes + 4 * k;
      EXPECT_DOUBLE_EQ(json_object_get_double_member(bb, "x_min"), box[0] / double(kWidth));
      EXPECT_DOUBLE_EQ(json_object_get_double_member(bb, "y_min"), box[1] / double(kHeight));
      EXPECT_DOUBLE_EQ(json_object_get_double_member(bb, "x_max"),
                       (box[0] + double(box[2] - box[0])) / kWidth);
      EXPECT_DOUBLE_EQ(json_object_get_double_member(bb, "y_max"),
                       (box[1] + double(box[3] - box[1])) / kHeight);
      EXPECT_EQ(json_object_get_double_member(detection, "confidence"), meta->scores[k]);
      EXPECT_EQ(json_object_get_int_member(detection, "label_id"), meta->class_ids[k]);
      EXPECT_STREQ(json_object_get_string_member(detection, "label"), meta->labels[k]);
      EXPECT_STREQ(json_object_get_string_member(object, "roi_type"), meta->labels[k]);
      EXPECT_EQ(json_object_get_int_member(object, "x"), std::lround(box[0]));
      EXPECT_EQ(json_object_get_int_member(object, "w"), std::lround(double(box[2] - box[0])));
    }
  }
  g_strfreev(lines);
  g_free(contents);
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
}

// One person walking down across the line y = 240 in 40 frames.
std::vector<CandidateSet> walker_frames() {
  std::vector<CandidateSet> sets(40);
  for (int f = 0; f < 40; f++) {
    const float y = 160.0f + 4 * f;  // the box's bottom
    sets[f].add(300, y - 100, 340, y, 0.9f, 0);
  }
  return sets;
}

const char kTrackAndCount[] = "boxtrack ! boxcount lines=\"door:0,240,640,240\"";

// Tracked and counted frames: each event also as a message of its own on TOPIC/events, and the
// frames' messages with their track ids and counts.
TEST_F(MetaPublish, CountingEventsGoToTheEventsTopic) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  Subscriber frames(broker_->port(), "site/cam-5");
  Subscriber events(broker_->port(), "site/cam-5/events");
  ASSERT_TRUE(frames.connected() && events.connected());
  auto run =
      run_frames("method=mqtt qos=1 topic=site/cam-5 camera-id=cam-5 address=" + broker_->address(),
                 walker_frames(), std::chrono::milliseconds(0), nullptr, kTrackAndCount);
  ASSERT_TRUE(run->eos);
  EXPECT_EQ(run->published, 41u);  // 40 frames and 1 event
  ASSERT_TRUE(frames.wait_for(40, std::chrono::seconds(10)));
  ASSERT_TRUE(events.wait_for(1, std::chrono::seconds(10)));
  const auto event_messages = events.messages();
  ASSERT_EQ(event_messages.size(), 1u);
  Json event(event_messages[0]);
  ASSERT_NE(event.object, nullptr) << event_messages[0];
  EXPECT_STREQ(json_object_get_string_member(event.object, "kind"), "line-crossed");
  EXPECT_STREQ(json_object_get_string_member(event.object, "name"), "door");
  EXPECT_STREQ(json_object_get_string_member(event.object, "direction"), "in");
  EXPECT_EQ(json_object_get_int_member(event.object, "track_id"), 1);
  EXPECT_STREQ(json_object_get_string_member(event.object, "source"), "cam-5");
  const auto frame_messages = frames.messages();
  Json last(frame_messages.back());
  ASSERT_NE(last.object, nullptr);
  JsonObject *box =
      json_array_get_object_element(json_object_get_array_member(last.object, "boxes"), 0);
  EXPECT_EQ(json_object_get_int_member(box, "track_id"), 1);
  JsonObject *door = json_object_get_object_member(
      json_object_get_object_member(json_object_get_object_member(last.object, "counts"), "lines"),
      "door");
  EXPECT_EQ(json_object_get_int_member(door, "in"), 1);
  EXPECT_EQ(json_object_get_int_member(door, "out"), 0);
}

// DL Streamer's format with tracking: each object's "id", as gvametaconvert writes gvatrack's.
TEST_F(MetaPublish, DlStreamerFormatCarriesTheTrackId) {
  gchar *dir = g_dir_make_tmp("metapublish-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/messages.jsonl";
  auto run = run_frames("method=file format=dlstreamer location=\"" + path + "\"", walker_frames(),
                        std::chrono::milliseconds(0), nullptr, kTrackAndCount);
  ASSERT_TRUE(run->eos);
  gchar *contents = nullptr;
  ASSERT_TRUE(g_file_get_contents(path.c_str(), &contents, nullptr, nullptr));
  gchar **lines = g_strsplit(contents, "\n", -1);
  ASSERT_GE(g_strv_length(lines), 40u);
  for (int i = 0; i < 40; ++i) {
    Json json(lines[i]);
    ASSERT_NE(json.object, nullptr) << lines[i];
    JsonObject *object =
        json_array_get_object_element(json_object_get_array_member(json.object, "objects"), 0);
    EXPECT_EQ(json_object_get_int_member(object, "id"), 1) << lines[i];
    EXPECT_TRUE(json_object_has_member(json.object, "counts")) << lines[i];
  }
  g_strfreev(lines);
  g_free(contents);
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
}

// No broker at all: a warning, the stream flows at its own pace, and every message is counted
// as dropped (and reported) when the element stops.
TEST_F(MetaPublish, NoBrokerAtStartWarnsAndTheStreamFlows) {
  if (mosquitto_binary().empty()) GTEST_SKIP() << "no mosquitto (Debian package mosquitto)";
  const int port = free_port();  // nothing listens there
  const auto sets = frames_of(30, run_seed() + 302);
  auto run = run_frames("method=mqtt flush-timeout=300 address=127.0.0.1:" + std::to_string(port),
                        sets, std::chrono::milliseconds(5));
  ASSERT_TRUE(run->eos);
  EXPECT_LT(run->seconds, 5.0);
  ASSERT_FALSE(run->warnings.empty());
  EXPECT_NE(run->warnings.front().find("Cannot reach the MQTT broker"), std::string::npos)
      << run->warnings.front();
  EXPECT_EQ(run->published, 0u);
  EXPECT_EQ(run->dropped, 30u);
  EXPECT_EQ(run->dropped_reported, 30u);
}

// The broker is killed (SIGKILL) a third into a 30 fps stream and restarted on the same port:
// the stream never waits, the queue (10 messages) overflows and its drops are counted and
// reported, and the messages after the restart arrive, the last frame's included. With QoS 1
// every frame is either acknowledged by a broker or counted as dropped.
TEST_F(MetaPublish, BrokerKilledAndRestartedMidStream) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  auto before = std::make_unique<Subscriber>(broker_->port(), "site/cam-3");
  ASSERT_TRUE(before->connected());
  std::unique_ptr<Subscriber> after;
  const size_t frames = 90;
  const auto sets = frames_of(frames, run_seed() + 303);
  auto run =
      run_frames("method=mqtt qos=1 max-queued=10 flush-timeout=8000 topic=site/cam-3 address=" +
                     broker_->address(),
                 sets, std::chrono::milliseconds(33), [&](size_t i) {
                   if (i == 29) broker_->kill();
                   if (i == 59) {
                     ASSERT_TRUE(broker_->start());
                     after = std::make_unique<Subscriber>(broker_->port(), "site/cam-3");
                   }
                 });
  ASSERT_TRUE(run->eos);
  EXPECT_LT(run->seconds, 90 * 0.033 + 3.0) << "the stream waited on the broker";
  ASSERT_TRUE(after && after->connected());
  EXPECT_GE(run->dropped, 10u);  // ~1 s away at 30 fps, 10 kept
  EXPECT_EQ(run->dropped_reported, run->dropped);
  EXPECT_EQ(run->published + run->dropped, frames);
  EXPECT_TRUE(run->disconnected_reported || !run->warnings.empty());
  // Before the kill: the first frames, in order (mosquitto_sub reconnects by itself, so later
  // ones may follow, increasing).
  const auto first = before->messages();
  ASSERT_GE(first.size(), 20u);
  gint64 previous = -1;
  for (size_t i = 0; i < first.size(); ++i) {
    Json json(first[i]);
    ASSERT_NE(json.object, nullptr);
    const gint64 frame = json_object_get_int_member(json.object, "frame");
    if (i < 20) {
      EXPECT_EQ(frame, static_cast<gint64>(i));
    }
    EXPECT_GT(frame, previous);
    previous = frame;
  }
  // After the restart: increasing frames, up to the last one.
  ASSERT_TRUE(after->wait_for(1, std::chrono::seconds(5)));
  const auto later = after->messages();
  previous = -1;
  for (const std::string &m : later) {
    Json json(m);
    ASSERT_NE(json.object, nullptr);
    const gint64 frame = json_object_get_int_member(json.object, "frame");
    EXPECT_GT(frame, previous);
    previous = frame;
  }
  EXPECT_EQ(previous, static_cast<gint64>(frames - 1));
}

// The publisher's status (the camera service's PREFIX/CAMERA/status): retained, so that a
// subscriber that comes later reads it; the latest one wins; and said again after a broker that
// restarted without its retained store; the last will is the broker's to publish.
TEST_F(MetaPublish, AStatusIsRetainedAndSaidAgainToARestartedBroker) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  MqttOptions options;
  options.address = broker_->address();
  options.topic = "site/cam/detections";
  options.client_id = "status-test";
  options.will_topic = "site/cam/status";
  options.will_message = "offline";
  MqttPublisher publisher(options, nullptr);
  std::string error;
  ASSERT_TRUE(publisher.start(&error)) << error;
  publisher.set_status("site/cam/status", "reconnecting");
  publisher.set_status("site/cam/status", "online");
  auto retained = [&](const char *expected) {
    Subscriber late(broker_->port(), "site/cam/status", true);
    return late.connected() && late.wait_for(1, std::chrono::seconds(5)) &&
           late.messages().back() == std::string("site/cam/status ") + expected;
  };
  EXPECT_TRUE(retained("online"));
  broker_->kill();  // no persistence: the retained store is gone with it
  ASSERT_TRUE(broker_->start());
  EXPECT_TRUE(retained("online")) << "not said again to the restarted broker";
  publisher.set_status("site/cam/status", "offline");
  publisher.stop(std::chrono::milliseconds(2000));
  EXPECT_TRUE(retained("offline")) << "the last status before a stop was lost";
}

// A broker that hangs (SIGSTOP) while publishers of the process are connected and others make
// their first connection: their attempts get no answer; once it goes on, every reliable message
// of every publisher arrives, each acknowledged.
TEST_F(MetaPublish, ReliableMessagesReachABrokerThatHung) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  Subscriber events(broker_->port(), "site/+/events");
  ASSERT_TRUE(events.connected());
  std::vector<std::unique_ptr<MqttPublisher>> publishers;
  std::atomic<int> delivered{0};
  auto publisher = [&](int i) {
    MqttOptions options;
    options.address = broker_->address();
    options.topic = "site/cam" + std::to_string(i) + "/detections";
    options.client_id = "hung-broker-test-" + std::to_string(i);
    options.will_topic = "site/cam" + std::to_string(i) + "/status";
    options.will_message = "offline";
    publishers.push_back(std::make_unique<MqttPublisher>(options, nullptr));
    std::string error;
    EXPECT_TRUE(publishers.back()->start(&error)) << error;
    publishers.back()->set_status(options.will_topic, "online");
  };
  for (int i = 0; i < 4; ++i) publisher(i);  // connected before the broker hangs
  std::this_thread::sleep_for(std::chrono::seconds(1));
  broker_->stop();
  for (int i = 4; i < 8; ++i) publisher(i);  // their first connection meets the hung broker
  for (int i = 0; i < 8; ++i)
    publishers[i]->push_reliable("site/cam" + std::to_string(i) + "/events",
                                 "{\"id\":" + std::to_string(i) + "}", [&] { delivered++; });
  std::this_thread::sleep_for(std::chrono::seconds(15));  // attempts without an answer
  broker_->resume();
  EXPECT_TRUE(events.wait_for(8, std::chrono::seconds(20))) << events.messages().size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (delivered < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(delivered.load(), 8);
  for (auto &p : publishers) p->stop(std::chrono::milliseconds(500));
}

// A subscriber that reads nothing (stopped) while 200 frames go by does not slow the stream:
// the broker holds its messages, and once it reads again every one arrives.
TEST_F(MetaPublish, ASlowSubscriberDoesNotSlowTheStream) {
  start_broker();
  if (mosquitto_sub_binary().empty()) GTEST_SKIP() << "no mosquitto_sub (mosquitto-clients)";
  Subscriber slow(broker_->port(), "site/cam-4");
  ASSERT_TRUE(slow.connected());
  slow.pause();
  const auto sets = frames_of(200, run_seed() + 304);
  auto run = run_frames("method=mqtt qos=1 topic=site/cam-4 address=" + broker_->address(), sets);
  ASSERT_TRUE(run->eos);
  EXPECT_LT(run->seconds, 5.0) << "200 frames waited on the subscriber";
  EXPECT_EQ(run->published, 200u);
  EXPECT_EQ(run->dropped, 0u);
  EXPECT_TRUE(slow.messages().empty());
  slow.resume();
  EXPECT_TRUE(slow.wait_for(200, std::chrono::seconds(10)));
  EXPECT_EQ(slow.messages().size(), 200u);
}

// Runs a command, true when it exits 0.
bool run_command(const std::string &command) {
  gint status = -1;
  return g_spawn_command_line_sync(command.c_str(), nullptr, nullptr, &status, nullptr) &&
         g_spawn_check_wait_status(status, nullptr);
}

// username and password go to the broker: the right ones publish every message, wrong ones are
// refused with a warning, and every message is counted as dropped.
TEST_F(MetaPublish, UsernameAndPasswordReachTheBroker) {
  if (mosquitto_binary().empty()) GTEST_SKIP() << "no mosquitto (Debian package mosquitto)";
  broker_ = std::make_unique<Broker>(free_port());
  const std::string passwords = broker_->dir() + "/passwords";
  ASSERT_TRUE(run_command("mosquitto_passwd -b -c " + passwords + " camera s3cret"));
  ASSERT_TRUE(broker_->start("allow_anonymous false\npassword_file " + passwords + "\n"));
  const auto sets = frames_of(10, run_seed() + 306);
  const std::string base = "method=mqtt qos=1 flush-timeout=500 address=" + broker_->address();
  auto good = run_frames(base + " username=camera password=s3cret", sets);
  ASSERT_TRUE(good->eos);
  EXPECT_TRUE(good->warnings.empty()) << good->warnings.front();
  EXPECT_EQ(good->published, 10u);
  auto bad = run_frames(base + " username=camera password=wrong", sets);
  ASSERT_TRUE(bad->eos);
  ASSERT_FALSE(bad->warnings.empty());
  EXPECT_NE(bad->warnings.front().find("Cannot reach the MQTT broker"), std::string::npos)
      << bad->warnings.front();
  EXPECT_EQ(bad->published, 0u);
  EXPECT_EQ(bad->dropped, 10u);
}

// tls=true with ca-file: a TLS listener (a self-signed certificate made with openssl) takes every
// message; without the certificate to trust, the connection fails with a warning.
TEST_F(MetaPublish, TlsWithTheCaFileReachesTheBroker) {
  if (mosquitto_binary().empty()) GTEST_SKIP() << "no mosquitto (Debian package mosquitto)";
  gchar *openssl = g_find_program_in_path("openssl");
  if (!openssl) GTEST_SKIP() << "no openssl (Debian package openssl)";
  g_free(openssl);
  broker_ = std::make_unique<Broker>(free_port());
  const std::string dir = broker_->dir();
  ASSERT_TRUE(
      run_command("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                  "-keyout " +
                  dir + "/server.key -out " + dir + "/server.crt"));
  ASSERT_TRUE(broker_->start("allow_anonymous true\ncertfile " + dir + "/server.crt\nkeyfile " +
                             dir + "/server.key\n"));
  const auto sets = frames_of(10, run_seed() + 307);
  const std::string base =
      "method=mqtt qos=1 flush-timeout=500 tls=true address=" + broker_->address();
  auto trusted = run_frames(base + " ca-file=" + dir + "/server.crt", sets);
  ASSERT_TRUE(trusted->eos);
  EXPECT_TRUE(trusted->warnings.empty()) << trusted->warnings.front();
  EXPECT_EQ(trusted->published, 10u);
  auto untrusted = run_frames(base, sets);
  ASSERT_TRUE(untrusted->eos);
  EXPECT_FALSE(untrusted->warnings.empty());
  EXPECT_EQ(untrusted->published, 0u);
  EXPECT_EQ(untrusted->dropped, 10u);
}

TEST_F(MetaPublish, AnEmptyTopicIsAnErrorAtStart) {
  const auto sets = frames_of(1, run_seed() + 305);
  auto run = run_frames("method=mqtt topic=\"\"", sets);
  ASSERT_FALSE(run->errors.empty());
  EXPECT_NE(run->errors.front().find("no topic"), std::string::npos) << run->errors.front();
}

}  // namespace
}  // namespace cudanms::testing
