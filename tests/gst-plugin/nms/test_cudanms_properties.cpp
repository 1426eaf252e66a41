// The cudanms element's properties (cudanmsproperties.h): defaults, changes while playing and
// from other threads, invalid values, the read-only totals.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

TEST_F(CudaNmsElement, InvalidClassGroupsAreAnErrorAtStart) {
  const std::vector<std::string> errors = errors_at_start("class-groups", "1,2;2,3");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("Invalid class-groups \"1,2;2,3\""), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("class 2 is in two class groups"), std::string::npos) << errors[0];
}

// gst-launch syntax: method=weighted merges, method=soft decays, class-groups joins classes.
// ---------------------------------------------------------------------------------------------
// Properties.

TEST_F(CudaNmsElement, PropertyDefaults) {
  GstElement *e = gst_element_factory_make("cudanms", nullptr);
  ASSERT_NE(e, nullptr);
  gdouble iou, score, latency;
  guint max_candidates, max_detections, stats;
  gboolean agnostic, keep;
  gint gpu;
  guint64 frames, candidates, detections;
  g_object_get(e, "iou-threshold", &iou, "score-threshold", &score, "max-candidates",
               &max_candidates, "max-detections", &max_detections, "class-agnostic", &agnostic,
               "gpu-id", &gpu, "keep-candidates", &keep, "stats-interval", &stats, "frames",
               &frames, "candidates-total", &candidates, "detections-total", &detections,
               "last-latency-us", &latency, NULL);
  EXPECT_EQ(iou, 0.5);
  EXPECT_EQ(score, 0.0);
  EXPECT_EQ(max_candidates, 4096u);
  EXPECT_EQ(max_detections, 0u);
  EXPECT_FALSE(agnostic);
  EXPECT_EQ(gpu, -1);  // the pipeline's CUDA context's device
  EXPECT_FALSE(keep);
  EXPECT_EQ(stats, 0u);
  EXPECT_EQ(frames, 0u);
  EXPECT_EQ(candidates, 0u);
  EXPECT_EQ(detections, 0u);
  EXPECT_EQ(latency, 0.0);
  auto enum_nick = [&](const char *name) -> std::string {
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(e), name);
    gint value = -1;
    g_object_get(e, name, &value, NULL);
    GEnumClass *klass = G_ENUM_CLASS(g_type_class_ref(spec->value_type));
    const GEnumValue *v = g_enum_get_value(klass, value);
    std::string nick = v ? v->value_nick : "?";
    g_type_class_unref(klass);
    return nick;
  };
  EXPECT_EQ(enum_nick("overlap"), "iou");
  EXPECT_EQ(enum_nick("method"), "greedy");
  EXPECT_EQ(enum_nick("backend"), "auto");
  EXPECT_EQ(enum_nick("soft-decay"), "gaussian");
  gdouble sigma = 0;
  gchar *groups = nullptr;
  g_object_get(e, "sigma", &sigma, "class-groups", &groups, NULL);
  EXPECT_EQ(sigma, 0.5);
  EXPECT_STREQ(groups, "");
  g_free(groups);

  // Every property is documented and the writable ones are changeable while PLAYING.
  guint n_props = 0;
  GParamSpec **props = g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n_props);
  const std::vector<std::string> ours = {"iou-threshold",    "overlap",          "method",
                                         "score-threshold",  "max-candidates",   "max-detections",
                                         "class-agnostic",   "backend",          "gpu-id",
                                         "keep-candidates",  "stats-interval",   "frames",
                                         "candidates-total", "detections-total", "last-latency-us",
                                         "class-groups",     "soft-decay",       "sigma",
                                         "min-neighbors",    "group-eps"};
  size_t found = 0;
  for (guint i = 0; i < n_props; ++i) {
    const std::string name = props[i]->name;
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) continue;
    ++found;
    EXPECT_GT(strlen(g_param_spec_get_blurb(props[i])), 10u) << name;
    if (props[i]->flags & G_PARAM_WRITABLE) {
      EXPECT_TRUE(props[i]->flags & GST_PARAM_MUTABLE_PLAYING) << name;
    }
  }
  g_free(props);
  EXPECT_EQ(found, ours.size());
  gst_object_unref(e);
}

// Each NMS property changed while PLAYING takes effect on the next buffer.
TEST_F(CudaNmsElement, PropertiesChangedWhilePlaying) {
  start();
  std::mt19937_64 rng(run_seed() + 104);
  const CandidateSet set = tools::sliding_window_candidates(800, rng(), 4, kWidth, kHeight);
  Params p;
  ASSERT_TRUE(check(set, p));
  p.threshold = 0.3f;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.overlap = Overlap::kIoMin;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.method = Method::kMatrix;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.score_threshold = 0.5f;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.class_agnostic = true;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.max_candidates = 100;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.max_detections = 3;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p = Params();
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  // backend: auto on a host whose CUDA cannot be used runs on the CPU just the same.
  g_object_set(element_, "gpu-id", 0, NULL);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", cuda_available() ? "cuda" : "auto");
  ASSERT_TRUE(check(set, p));
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cpu");
  ASSERT_TRUE(check(set, p));
}

// Properties set from another thread while frames flow: each frame sees one consistent value.
TEST_F(CudaNmsElement, PropertiesChangedFromAnotherThread) {
  start();
  std::mt19937_64 rng(run_seed() + 105);
  const CandidateSet set = clipped_to_frame(
      tools::sliding_window_candidates(500, rng(), 2, kWidth, kHeight), kWidth, kHeight);
  Params low, high;
  low.threshold = 0.3f;
  high.threshold = 0.7f;
  const Result want_low = library_result(set, low), want_high = library_result(set, high);
  ASSERT_NE(want_low.kept.size(), want_high.kept.size());
  g_object_set(element_, "iou-threshold", 0.7, NULL);
  std::atomic<bool> stop{false};
  std::thread setter([&] {
    for (int i = 0; !stop; ++i) g_object_set(element_, "iou-threshold", i % 2 ? 0.3 : 0.7, NULL);
  });
  size_t saw_low = 0, saw_high = 0;
  for (int i = 0; i < 300; ++i) {
    GstBuffer *out = process(packed_buffer(set));
    const ::testing::AssertionResult is_low = output_matches(out, set, want_low, kWidth, kHeight);
    if (is_low) {
      ++saw_low;
    } else {
      EXPECT_TRUE(output_matches(out, set, want_high, kWidth, kHeight))
          << "frame " << i << "; as low: " << is_low.message();
      ++saw_high;
    }
    gst_buffer_unref(out);
  }
  stop = true;
  setter.join();
  EXPECT_EQ(saw_low + saw_high, 300u);
}

TEST_F(CudaNmsElement, ReadOnlyTotals) {
  start();
  std::mt19937_64 rng(run_seed() + 106);
  guint64 in = 0, kept = 0;
  for (int i = 0; i < 20; ++i) {
    const CandidateSet set = tools::sliding_window_candidates(50 * i, rng(), 2, kWidth, kHeight);
    const Result want = library_result(clipped_to_frame(set, kWidth, kHeight), Params());
    in += want.counts.in;
    kept += want.counts.kept;
    gst_buffer_unref(process(packed_buffer(set)));
  }
  guint64 frames, candidates, detections;
  gdouble latency;
  g_object_get(element_, "frames", &frames, "candidates-total", &candidates, "detections-total",
               &detections, "last-latency-us", &latency, NULL);
  EXPECT_EQ(frames, 20u);
  EXPECT_EQ(candidates, in);
  EXPECT_EQ(detections, kept);
  EXPECT_GT(latency, 0.0);
  EXPECT_LT(latency, 1e6);
}

}  // namespace
}  // namespace cudanms::testing
