// A camera's outputs against an etcd of the test's own on 127.0.0.1 (Debian's etcd-server),
// stopped (SIGSTOP) and let go again: a frame never waits for its counts to be kept, and what it
// says is written only once etcd has them, in order.
#include <gst/cudanms/cudanmsmeta.h>
#include <gtest/gtest.h>
#include <utime.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "fleet_support.h"
#include "outputs.h"

using cudanms::service::CameraConfig;
using cudanms::service::CameraOutputs;
using cudanms::service::CameraRun;
using cudanms::service::EtcdClient;
namespace etcd = cudanms::service::etcd;
using namespace cudanms::testing;

namespace {

// A frame of the camera whose track `track` crossed the line "door" inwards: `in` so far.
GstBuffer *crossing_frame(guint64 frame, guint64 track, guint64 in) {
  GstBuffer *buffer = gst_buffer_new();
  GST_BUFFER_PTS(buffer) = frame * GST_SECOND / 10;
  GstCudaNmsCountsMeta *counts = gst_buffer_add_cuda_nms_counts_meta(buffer, 1, 1, 0);
  counts->events[0].kind = GST_CUDA_NMS_COUNT_LINE_CROSSED;
  counts->events[0].name = g_intern_string("door");
  counts->events[0].direction = 1;
  counts->events[0].track_id = track;
  counts->events[0].label = g_intern_string("person");
  counts->lines[0].name = g_intern_string("door");
  counts->lines[0].x2 = counts->lines[0].y2 = 100;
  counts->lines[0].in = in;
  return buffer;
}

// The "in" count of the line "door" that etcd holds for the camera; -1 for none.
gint64 stored_in(EtcdClient *client, const std::string &state_key) {
  const auto reply = client->post_sync("/v3/kv/txn", etcd::txn({}, {etcd::range(state_key)}));
  const auto kvs = reply.kvs(0);
  if (kvs.empty()) return -1;
  JsonParser *parser = json_parser_new();
  gint64 in = -1;
  if (json_parser_load_from_data(parser, kvs[0].value.c_str(), -1, nullptr)) {
    JsonObject *lines =
        json_object_get_object_member(json_node_get_object(json_parser_get_root(parser)), "lines");
    if (lines && json_object_has_member(lines, "door"))
      in = json_object_get_int_member(json_object_get_object_member(lines, "door"), "in");
  }
  g_object_unref(parser);
  return in;
}

}  // namespace

// Its events' pictures where they cannot be written (a folder under a file, as a full disk
// refuses): said in its counts while it lasts, the frames and the counting go on; written again,
// no longer said.
TEST(CameraOutputs, PicturesThatCannotBeWrittenAreSaidAndNothingElseStops) {
  gst_init(nullptr, nullptr);
  TempDir dir;
  const std::string blocker = dir.file("not-a-folder");
  ASSERT_TRUE(g_file_set_contents(blocker.c_str(), "x", -1, nullptr));
  CameraConfig config;
  config.name = "door";
  CameraRun run;
  run.snapshots = blocker;  // DIR/door/ID.jpg cannot be made under a file
  CameraOutputs outputs(config, run);
  std::string error;
  ASSERT_TRUE(outputs.open(&error)) << error;
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  auto picture_of = [&](guint64 n) {
    GstBuffer *frame = crossing_frame(n, n, n);
    outputs.on_frame(frame, &segment, 0);
    GstBuffer *jpeg = gst_buffer_new_memdup("\xff\xd8jpeg", 6);
    GST_BUFFER_PTS(jpeg) = GST_BUFFER_PTS(frame);
    outputs.on_event_picture(jpeg);
    gst_buffer_unref(jpeg);
    gst_buffer_unref(frame);
  };
  picture_of(1);
  picture_of(2);
  EXPECT_FALSE(outputs.counts().pictures_failing.empty());
  EXPECT_EQ(outputs.counts().frames, 2u);
  EXPECT_EQ(outputs.counting().crossings.size(), 1u);  // (door, in, person), counted twice
  EXPECT_EQ(outputs.counting().lines.at("door").first, 2u);

  g_remove(blocker.c_str());  // room again
  picture_of(3);
  EXPECT_EQ(outputs.counts().pictures_failing, "");
  EXPECT_TRUE(g_file_test((blocker + "/door/3.jpg").c_str(), G_FILE_TEST_IS_REGULAR));
  outputs.close(0);
  g_remove((blocker + "/door/3.jpg").c_str());
  g_rmdir((blocker + "/door").c_str());
  g_rmdir(blocker.c_str());
}

// A camera with no events lately loses its old pictures too: the watchdog's hourly sweep (asked
// here at once) removes those older than picture-retain-days, leaves the others, and a second
// within the hour reads nothing.
TEST(CameraOutputs, OldPicturesGoWithoutANewOneComing) {
  gst_init(nullptr, nullptr);
  TempDir dir;
  const std::string folder = dir.file("snapshots");
  ASSERT_EQ(g_mkdir_with_parents((folder + "/door").c_str(), 0755), 0);
  auto picture = [&](const std::string &name, int days_old) {
    const std::string path = folder + "/door/" + name + ".jpg";
    g_file_set_contents(path.c_str(), "\xff\xd8jpeg", 6, nullptr);
    struct utimbuf when;
    when.actime = when.modtime = time(nullptr) - days_old * 86400;
    utime(path.c_str(), &when);
    return path;
  };
  const std::string old = picture("1", 3), fresh = picture("2", 0);
  CameraConfig config;
  config.name = "door";
  config.picture_retain_days = 1;
  CameraRun run;
  run.snapshots = folder;
  CameraOutputs outputs(config, run);
  std::string error;
  ASSERT_TRUE(outputs.open(&error)) << error;
  outputs.sweep_pictures(gint64{3600} * G_USEC_PER_SEC);
  EXPECT_FALSE(g_file_test(old.c_str(), G_FILE_TEST_EXISTS));
  EXPECT_TRUE(g_file_test(fresh.c_str(), G_FILE_TEST_EXISTS));
  const std::string later = picture("3", 3);
  outputs.sweep_pictures(gint64{3600} * G_USEC_PER_SEC);
  EXPECT_TRUE(g_file_test(later.c_str(), G_FILE_TEST_EXISTS)) << "swept twice within the hour";
  outputs.sweep_pictures(0);
  EXPECT_FALSE(g_file_test(later.c_str(), G_FILE_TEST_EXISTS));
  outputs.close(0);
  g_remove(fresh.c_str());
  g_rmdir((folder + "/door").c_str());
  g_rmdir(folder.c_str());
}

// A fleet camera's outputs, its owner key under a lease of the test's etcd.
class CameraOutputsInEtcd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (etcd_binary().empty()) GTEST_SKIP() << "no etcd (Debian's etcd-server)";
    gst_init(nullptr, nullptr);
    ASSERT_TRUE(cluster_.start());
    const auto granted = client_.post_sync("/v3/lease/grant", "{\"TTL\":\"600\"}");
    ASSERT_TRUE(granted.ok()) << granted.error();
    ASSERT_TRUE(client_
                    .post_sync("/v3/kv/txn",
                               etcd::txn({}, {etcd::put(kOwnerKey, "me", granted.lease_id())}))
                    .succeeded());
    config_.name = "door";
    config_.json = dir_.file("door.jsonl");
    CameraRun run;
    run.fleet_store.endpoints = cluster_.endpoint_list();
    run.fleet_store.owner_key = kOwnerKey;
    run.fleet_store.state_key = kStateKey;
    run.fleet_store.lease = granted.lease_id();
    outputs_ = std::make_unique<CameraOutputs>(config_, run);
    std::string error;
    ASSERT_TRUE(outputs_->open(&error)) << error;
    GstCaps *caps = gst_caps_from_string("video/x-raw,format=I420,width=160,height=120");
    outputs_->on_event(gst_event_new_caps(caps));
    gst_caps_unref(caps);
    gst_segment_init(&segment_, GST_FORMAT_TIME);
  }
  void TearDown() override {
    if (outputs_) outputs_->close(0);
    cluster_.signal(0, SIGCONT);
  }
  // Frame n, its track n crossing the line: the seconds on_frame took.
  double frame(guint64 n) {
    GstBuffer *buffer = crossing_frame(n, n, n);
    const double start = now_s();
    outputs_->on_frame(buffer, &segment_, 0);
    gst_buffer_unref(buffer);
    return now_s() - start;
  }
  size_t lines() const { return lines_of(config_.json).size(); }
  gint64 stored() { return stored_in(&client_, kStateKey); }

  static constexpr const char *kOwnerKey = "cudanms/owner/door";
  static constexpr const char *kStateKey = "cudanms/state/door";
  TempDir dir_;
  EtcdCluster cluster_{dir_, 1};
  EtcdClient client_{cluster_.endpoint_list(), 2000};
  CameraConfig config_;
  std::unique_ptr<CameraOutputs> outputs_;
  GstSegment segment_;
};

TEST_F(CameraOutputsInEtcd, FramesGoOnWhileEtcdDoesNotAnswerAndAreWrittenInOrderOnceKept) {
  frame(1);
  ASSERT_TRUE(eventually(5, [&] { return lines() == 1; }));
  EXPECT_EQ(stored(), 1);

  // etcd stopped: each frame with a crossing would wait ~1 s for its store (the store's
  // timeout) were it kept on the streaming thread.
  cluster_.signal(0, SIGSTOP);
  double slowest = 0;
  for (guint64 n = 2; n <= 6; n++) slowest = std::max(slowest, frame(n));
  EXPECT_LT(slowest, 0.2) << "a frame waited on etcd";
  EXPECT_GE(outputs_->counts().outputs_queued, 1u);
  EXPECT_EQ(outputs_->counts().frames, 6u);
  // Nothing said before it is kept, however long etcd takes: the keeper tries again each
  // second, the lines and messages waiting (the frames do not).
  g_usleep(2500 * 1000);
  EXPECT_EQ(lines(), 1u);

  cluster_.signal(0, SIGCONT);
  ASSERT_TRUE(eventually(10, [&] { return lines() == 6; })) << read_file(config_.json);
  EXPECT_EQ(stored(), 6);
  EXPECT_TRUE(eventually(5, [&] { return outputs_->counts().outputs_queued == 0; }));
  frame(7);
  ASSERT_TRUE(eventually(5, [&] { return lines() == 7; }));
  EXPECT_EQ(stored(), 7);
  // In the frames' order, each frame's event numbered as counted.
  const auto written = lines_of(config_.json);
  for (size_t i = 0; i < written.size(); i++)
    EXPECT_NE(written[i].find("\"track_id\":" + std::to_string(i + 1)), std::string::npos)
        << i << ": " << written[i];
  EXPECT_EQ(outputs_->counts().outputs_full_waits, 0u);
  EXPECT_EQ(outputs_->counts().outputs_unkept, 0u);
}

// Fenced: the camera's connection stops while etcd has not taken its last frames' counts. Those
// frames are never published (the next owner goes on from what etcd has); the stop's own line
// is written at once; the next connection's frames are published once kept.
TEST_F(CameraOutputsInEtcd, AConnectionThatStopsBeforeEtcdTookItsCountsPublishesNoMore) {
  outputs_->on_state("streaming", "starting", "frames arrive", 0);
  frame(1);
  ASSERT_TRUE(eventually(5, [&] { return lines() == 2; }));
  cluster_.signal(0, SIGSTOP);
  for (guint64 n = 2; n <= 4; n++) frame(n);
  g_usleep(300 * 1000);
  const double stop = now_s();
  outputs_->on_state("stopped", "streaming", "fenced", 0);
  ASSERT_TRUE(eventually(5, [&] {
    const auto written = lines_of(config_.json);
    return !written.empty() && written.back().find("\"state\":\"stopped\"") != std::string::npos;
  })) << read_file(config_.json);
  printf("the stop's line written %.2f s after it\n", now_s() - stop);
  EXPECT_EQ(lines(), 3u) << "frames published after their connection stopped unkept";
  EXPECT_EQ(outputs_->counts().outputs_unkept, 3u);

  cluster_.signal(0, SIGCONT);
  outputs_->on_state("starting", "stopped", "connecting", 1);
  outputs_->on_state("streaming", "starting", "frames arrive", 1);
  frame(5);
  // streaming, frame 1, stopped, starting, streaming, frame 5.
  ASSERT_TRUE(eventually(10, [&] { return lines() == 6; })) << read_file(config_.json);
  EXPECT_NE(lines_of(config_.json).back().find("\"track_id\":5"), std::string::npos);
  EXPECT_EQ(stored(), 5);
}
