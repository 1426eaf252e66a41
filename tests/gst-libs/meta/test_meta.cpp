// The meta library: one candidates meta per buffer, packed arrays, copies and video scaling.
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "support/seed.h"

namespace {

class Meta : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

// The "gst-video-scale" transform of `meta` (on `in`) into `out`, from 640x480 to 320x960, called
// the way video filters call it.
bool scale_to_320x960(GstMeta *meta, GstBuffer *in, GstBuffer *out) {
  GstVideoInfo in_info, out_info;
  gst_video_info_set_format(&in_info, GST_VIDEO_FORMAT_GRAY8, 640, 480);
  gst_video_info_set_format(&out_info, GST_VIDEO_FORMAT_GRAY8, 320, 960);
  GstVideoMetaTransform trans = {&in_info, &out_info};
  return meta->info->transform_func(out, meta, in, gst_video_meta_transform_scale_get_quark(),
                                    &trans);
}

TEST_F(Meta, AddAppendGet) {
  GstBuffer *buf = gst_buffer_new();
  EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(buf), nullptr);
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->n, 0u);
  EXPECT_GE(c->capacity, 2u);
  gst_cuda_nms_candidates_meta_append(c, 1, 2, 3, 4, 0.5f, 7);
  const float boxes[] = {10, 20, 30, 40, 50, 60, 70, 80};
  const float scores[] = {0.25f, 0.75f};
  const gint32 classes[] = {3, 4};
  gst_cuda_nms_candidates_meta_append_many(c, boxes, scores, classes, 2);
  gst_cuda_nms_candidates_meta_append_many(c, boxes, scores, nullptr, 1);

  GstCudaNmsCandidatesMeta *got = gst_buffer_get_cuda_nms_candidates_meta(buf);
  ASSERT_EQ(got, c);
  ASSERT_EQ(got->n, 4u);
  const std::vector<float> want_boxes = {1,  2,  3,  4,  10, 20, 30, 40,
                                         50, 60, 70, 80, 10, 20, 30, 40};
  EXPECT_EQ(std::vector<float>(got->boxes, got->boxes + 16), want_boxes);
  EXPECT_EQ(std::vector<float>(got->scores, got->scores + 4),
            (std::vector<float>{0.5f, 0.25f, 0.75f, 0.25f}));
  EXPECT_EQ(std::vector<gint32>(got->class_ids, got->class_ids + 4),
            (std::vector<gint32>{7, 3, 4, 0}));

  gst_cuda_nms_candidates_meta_clear(c);
  EXPECT_EQ(c->n, 0u);
  gst_buffer_unref(buf);
}

TEST_F(Meta, OneCandidatesMetaPerBuffer) {
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *a = gst_buffer_add_cuda_nms_candidates_meta(buf, 1);
  gst_cuda_nms_candidates_meta_append(a, 0, 0, 1, 1, 1, 0);
  GstCudaNmsCandidatesMeta *b = gst_buffer_add_cuda_nms_candidates_meta(buf, 100);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->n, 1u);
  EXPECT_GE(b->capacity, 101u);
  EXPECT_EQ(gst_buffer_get_n_meta(buf, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 1u);
  gst_buffer_unref(buf);
}

TEST_F(Meta, ThousandsOfCandidatesInOneMeta) {
  const uint64_t seed = cudanms::testing::run_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1000);
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  std::vector<float> want;
  for (int i = 0; i < 20000; i++) {
    const float x = u(rng), y = u(rng), s = u(rng) / 1000;
    gst_cuda_nms_candidates_meta_append(c, x, y, x + 5, y + 5, s, i % 80);
    want.insert(want.end(), {x, y, x + 5, y + 5});
  }
  ASSERT_EQ(c->n, 20000u);
  EXPECT_EQ(std::vector<float>(c->boxes, c->boxes + want.size()), want);
  EXPECT_EQ(c->class_ids[12345], 12345 % 80);
  EXPECT_EQ(gst_buffer_get_n_meta(buf, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 1u);
  gst_buffer_unref(buf);
}

TEST_F(Meta, CopiedWithTheBufferIntoIndependentMemory) {
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  gst_cuda_nms_candidates_meta_append(c, 1, 2, 3, 4, 0.5f, 9);
  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, 1);
  r->boxes[0] = 1;
  r->boxes[3] = 4;
  r->scores[0] = 0.5f;
  r->class_ids[0] = 9;
  r->candidates_in = 1;
  r->kept = 1;
  r->latency_ns = 1234;
  r->backend = "cuda";
  EXPECT_EQ(r->labels[0], nullptr);  // zeroed, like the other arrays
  r->labels[0] = g_intern_string("person");

  GstBuffer *copy = gst_buffer_copy(buf);
  GstCudaNmsCandidatesMeta *cc = gst_buffer_get_cuda_nms_candidates_meta(copy);
  ASSERT_NE(cc, nullptr);
  ASSERT_EQ(cc->n, 1u);
  EXPECT_NE(cc->boxes, c->boxes);
  EXPECT_EQ(cc->boxes[2], 3.0f);
  EXPECT_EQ(cc->scores[0], 0.5f);
  EXPECT_EQ(cc->class_ids[0], 9);
  GstCudaNmsResultMeta *rc = gst_buffer_get_cuda_nms_result_meta(copy);
  ASSERT_NE(rc, nullptr);
  ASSERT_EQ(rc->n_kept, 1u);
  EXPECT_NE(rc->boxes, r->boxes);
  EXPECT_EQ(rc->boxes[3], 4.0f);
  EXPECT_EQ(rc->class_ids[0], 9);
  EXPECT_EQ(rc->candidates_in, 1u);
  EXPECT_EQ(rc->kept, 1u);
  EXPECT_EQ(rc->latency_ns, 1234u);
  EXPECT_STREQ(rc->backend, "cuda");
  EXPECT_NE(rc->labels, r->labels);
  EXPECT_STREQ(rc->labels[0], "person");

  c->boxes[2] = 99;  // the copy does not share memory
  EXPECT_EQ(cc->boxes[2], 3.0f);
  gst_buffer_unref(copy);
  gst_buffer_unref(buf);
}

TEST_F(Meta, LabelEventsRoundTrip) {
  GstEvent *event = gst_cuda_nms_label_event_new(7, "truck");
  ASSERT_NE(event, nullptr);
  EXPECT_TRUE(GST_EVENT_IS_STICKY(event));
  gint class_id = -1;
  const gchar *label = nullptr;
  ASSERT_TRUE(gst_cuda_nms_label_event_parse(event, &class_id, &label));
  EXPECT_EQ(class_id, 7);
  EXPECT_STREQ(label, "truck");
  gst_event_unref(event);
  GstEvent *other = gst_event_new_custom(GST_EVENT_CUSTOM_DOWNSTREAM_STICKY,
                                         gst_structure_new_empty("something-else"));
  EXPECT_FALSE(gst_cuda_nms_label_event_parse(other, &class_id, &label));
  gst_event_unref(other);
}

TEST_F(Meta, TagsMatchRegionOfInterest) {
  for (GType api : {GST_CUDA_NMS_CANDIDATES_META_API_TYPE, GST_CUDA_NMS_RESULT_META_API_TYPE}) {
    EXPECT_TRUE(gst_meta_api_type_has_tag(api, g_quark_from_string(GST_META_TAG_VIDEO_STR)));
    EXPECT_TRUE(gst_meta_api_type_has_tag(api, g_quark_from_string(GST_META_TAG_VIDEO_SIZE_STR)));
    EXPECT_TRUE(
        gst_meta_api_type_has_tag(api, g_quark_from_string(GST_META_TAG_VIDEO_ORIENTATION_STR)));
  }
}

// The "gst-video-scale" transform, called the way video filters call it.
TEST_F(Meta, ScaleTransformRescalesBoxes) {
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(in, 0);
  gst_cuda_nms_candidates_meta_append(c, 10, 20, 110, 220, 0.9f, 2);
  GstBuffer *out = gst_buffer_new();
  ASSERT_TRUE(scale_to_320x960(&c->meta, in, out));
  GstCudaNmsCandidatesMeta *s = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->n, 1u);
  EXPECT_EQ(std::vector<float>(s->boxes, s->boxes + 4), (std::vector<float>{5, 40, 55, 440}));
  EXPECT_EQ(s->scores[0], 0.9f);
  EXPECT_EQ(s->class_ids[0], 2);
  gst_buffer_unref(in);
  gst_buffer_unref(out);
}

// Points: a meta whose candidates have other points refuses new ones; candidates appended
// without them get NaN; copies keep them and scaling scales them like the boxes, in both metas.
TEST_F(Meta, PointsAppendCopyAndScale) {
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(in, 0);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 2));
  EXPECT_FALSE(gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 1025));
  const float boxes[] = {10, 20, 110, 220, 0, 0, 8, 8};
  const float scores[] = {0.9f, 0.5f};
  const float points[] = {30, 40, 50, 60, 1, 2, 3, 4};
  gst_cuda_nms_candidates_meta_append_with_points(c, boxes, scores, nullptr, points, 2);
  gst_cuda_nms_candidates_meta_append(c, 1, 1, 2, 2, 0.1f, 0);
  ASSERT_EQ(c->n, 3u);
  EXPECT_FALSE(gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 3));
  EXPECT_EQ(std::vector<float>(c->points, c->points + 8), std::vector<float>(points, points + 8));
  for (int k = 8; k < 12; k++) EXPECT_TRUE(std::isnan(c->points[k]));

  // Candidates already in a meta without points get NaN ones when points come.
  GstBuffer *other = gst_buffer_new();
  GstCudaNmsCandidatesMeta *o = gst_buffer_add_cuda_nms_candidates_meta(other, 1);
  gst_cuda_nms_candidates_meta_append(o, 1, 1, 2, 2, 0.1f, 0);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_points_per_candidate(o, 1));
  EXPECT_TRUE(std::isnan(o->points[0]) && std::isnan(o->points[1]));
  gst_buffer_unref(other);

  GstBuffer *copy = gst_buffer_copy(in);
  GstCudaNmsCandidatesMeta *cc = gst_buffer_get_cuda_nms_candidates_meta(copy);
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(cc->points_per_candidate, 2u);
  EXPECT_NE(cc->points, c->points);
  EXPECT_EQ(std::vector<float>(cc->points, cc->points + 8), std::vector<float>(points, points + 8));

  GstBuffer *out = gst_buffer_new();
  ASSERT_TRUE(scale_to_320x960(&c->meta, in, out));
  GstCudaNmsCandidatesMeta *s = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::vector<float>(s->points, s->points + 8),
            (std::vector<float>{15, 80, 25, 120, 0.5f, 4, 1.5f, 8}));

  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(in, 1);
  gst_cuda_nms_result_meta_set_points_per_box(r, 1);
  ASSERT_NE(r->points, nullptr);
  r->points[0] = 100, r->points[1] = 10;
  GstBuffer *out2 = gst_buffer_new();
  ASSERT_TRUE(scale_to_320x960(&r->meta, in, out2));
  GstCudaNmsResultMeta *rs = gst_buffer_get_cuda_nms_result_meta(out2);
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->points_per_box, 1u);
  EXPECT_EQ(std::vector<float>(rs->points, rs->points + 2), (std::vector<float>{50, 20}));
  for (GstBuffer *b : {in, copy, out, out2}) gst_buffer_unref(b);
}

// Through the real videoscale element: 640x480 -> 1280x240.
TEST_F(Meta, BoxesRescaleThroughVideoscale) {
  GstHarness *h =
      gst_harness_new_parse("videoscale ! capsfilter caps=video/x-raw,width=1280,height=240");
  gst_harness_set_src_caps_str(h, "video/x-raw,format=GRAY8,width=640,height=480,framerate=30/1");
  GstBuffer *buf = gst_harness_create_buffer(h, 640 * 480);
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  gst_cuda_nms_candidates_meta_append(c, 10, 20, 110, 220, 0.9f, 2);
  gst_cuda_nms_candidates_meta_append(c, 0, 0, 640, 480, 0.1f, 0);
  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, 1);
  r->boxes[0] = 100;
  r->boxes[1] = 100;
  r->boxes[2] = 200;
  r->boxes[3] = 300;
  r->kept = 1;
  ASSERT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 1u);
  GstCudaNmsCandidatesMeta *s = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->n, 2u);
  EXPECT_EQ(std::vector<float>(s->boxes, s->boxes + 8),
            (std::vector<float>{20, 10, 220, 110, 0, 0, 1280, 240}));
  EXPECT_EQ(s->scores[0], 0.9f);
  EXPECT_EQ(s->class_ids[0], 2);
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_RESULT_META_API_TYPE), 1u);
  GstCudaNmsResultMeta *rs = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(rs, nullptr);
  ASSERT_EQ(rs->n_kept, 1u);
  EXPECT_EQ(std::vector<float>(rs->boxes, rs->boxes + 4), (std::vector<float>{200, 50, 400, 150}));
  EXPECT_EQ(rs->kept, 1u);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// Device candidates, with host memory standing in for the device: the producer's download copies
// from it and its release counts how often the memory went back.
struct FakeDevice {
  std::vector<float> boxes, scores;
  std::vector<gint32> class_ids;
  int downloads = 0;
  int releases = 0;
  bool fail = false;
};

gboolean fake_download(gpointer data, guint *n, gfloat **boxes, gfloat **scores, gint32 **class_ids,
                       gchar **error) {
  auto *d = static_cast<FakeDevice *>(data);
  d->downloads++;
  if (d->fail) {
    *error = g_strdup("the device is gone");
    return FALSE;
  }
  *n = static_cast<guint>(d->scores.size());
  *boxes = static_cast<gfloat *>(g_memdup2(d->boxes.data(), d->boxes.size() * sizeof(gfloat)));
  *scores = static_cast<gfloat *>(g_memdup2(d->scores.data(), d->scores.size() * sizeof(gfloat)));
  *class_ids =
      static_cast<gint32 *>(g_memdup2(d->class_ids.data(), d->class_ids.size() * sizeof(gint32)));
  return TRUE;
}

GstCudaNmsDeviceCandidates *fake_candidates(FakeDevice *d) {
  GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
  dc->boxes = d->boxes.data();
  dc->scores = d->scores.data();
  dc->class_ids = d->class_ids.data();
  dc->capacity = static_cast<guint>(d->scores.size());
  dc->download = fake_download;
  dc->user_data = d;
  dc->release = [](gpointer data) { static_cast<FakeDevice *>(data)->releases++; };
  return dc;
}

FakeDevice two_boxes() {
  FakeDevice d;
  d.boxes = {10, 20, 110, 220, 0, 0, 640, 480};
  d.scores = {0.9f, 0.1f};
  d.class_ids = {2, 0};
  return d;
}

TEST_F(Meta, DeviceCandidatesReachTheHostOnlyWhenMappedAndOnce) {
  FakeDevice d = two_boxes();
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d)));
  EXPECT_EQ(c->n, 0u) << "not on the host before map";
  EXPECT_FALSE(c->mapped);
  EXPECT_EQ(d.downloads, 0);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_map(c, nullptr));
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_map(c, nullptr));
  EXPECT_EQ(d.downloads, 1);
  EXPECT_EQ(c->downloads, 1u);
  ASSERT_EQ(c->n, 2u);
  EXPECT_EQ(std::vector<float>(c->boxes, c->boxes + 8), d.boxes);
  EXPECT_EQ(c->scores[1], 0.1f);
  EXPECT_EQ(c->class_ids[0], 2);
  EXPECT_NE(c->device, nullptr) << "mapping keeps the device candidates";
  gst_buffer_unref(buf);
  EXPECT_EQ(d.releases, 1);
}

TEST_F(Meta, OnlyAnEmptyMetaTakesDeviceCandidates) {
  FakeDevice d = two_boxes(), e = two_boxes();
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  gst_cuda_nms_candidates_meta_append(c, 1, 2, 3, 4, 0.5f, 1);
  EXPECT_FALSE(gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d)));
  EXPECT_EQ(d.releases, 1) << "a refused reference is dropped";
  gst_cuda_nms_candidates_meta_clear(c);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d)));
  EXPECT_FALSE(gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&e)));
  gst_buffer_unref(buf);
  EXPECT_EQ(d.releases, 2);
  EXPECT_EQ(e.releases, 1);
}

TEST_F(Meta, ABufferCopySharesDeviceCandidatesWithoutADownload) {
  FakeDevice d = two_boxes();
  GstBuffer *buf = gst_buffer_new();
  gst_cuda_nms_candidates_meta_set_device(gst_buffer_add_cuda_nms_candidates_meta(buf, 0),
                                          fake_candidates(&d));
  GstBuffer *copy = gst_buffer_copy(buf);
  GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(copy);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->device, gst_buffer_get_cuda_nms_candidates_meta(buf)->device);
  EXPECT_EQ(d.downloads, 0);
  gst_buffer_unref(buf);
  EXPECT_EQ(d.releases, 0) << "the copy still holds them";
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_map(c, nullptr));
  EXPECT_EQ(c->n, 2u);
  gst_buffer_unref(copy);
  EXPECT_EQ(d.releases, 1);
}

TEST_F(Meta, RescalingDownloadsDeviceCandidatesFirst) {
  FakeDevice d = two_boxes();
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(in, 0);
  gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d));
  GstBuffer *out = gst_buffer_new();
  ASSERT_TRUE(scale_to_320x960(&c->meta, in, out));
  GstCudaNmsCandidatesMeta *s = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_EQ(s->n, 2u);
  EXPECT_EQ(s->device, nullptr) << "the rescaled copy is a host copy";
  EXPECT_EQ(std::vector<float>(s->boxes, s->boxes + 4), (std::vector<float>{5, 40, 55, 440}));
  EXPECT_EQ(d.downloads, 1);
  gst_buffer_unref(in);
  gst_buffer_unref(out);
  EXPECT_EQ(d.releases, 1);
}

TEST_F(Meta, AppendingToDeviceCandidatesKeepsThemAllOnTheHost) {
  FakeDevice d = two_boxes();
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d));
  gst_cuda_nms_candidates_meta_append(c, 1, 2, 3, 4, 0.5f, 7);
  ASSERT_EQ(c->n, 3u);
  EXPECT_EQ(c->class_ids[2], 7);
  EXPECT_EQ(c->device, nullptr);
  EXPECT_EQ(d.releases, 1);
  gst_buffer_unref(buf);
}

TEST_F(Meta, AFailedDownloadIsFalseAndLeavesNoCandidates) {
  FakeDevice d = two_boxes();
  d.fail = true;
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
  gst_cuda_nms_candidates_meta_set_device(c, fake_candidates(&d));
  EXPECT_FALSE(gst_cuda_nms_candidates_meta_map(c, nullptr));
  EXPECT_EQ(c->n, 0u);
  EXPECT_FALSE(c->mapped);
  gst_buffer_unref(buf);
}

}  // namespace
