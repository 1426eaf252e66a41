// The lines' counts as boxcount's counts property carries them (countsstructure.h): written and
// read back whole, and what a hand-written structure may leave out or get wrong.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include "countsstructure.h"

namespace {

class CountsStructure : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
};

TEST_F(CountsStructure, RoundTrips) {
  const cudanms::LineTallies counts = {
      {"door", {{12, 3}, {{"person", {10, 3}}, {"dog", {2, 0}}}}},
      {"gate-2", {{0, 7}, {}}},
  };
  GstStructure *s = gst_cuda_nms_counts_structure(counts);
  EXPECT_STREQ(gst_structure_get_name(s), "counts");
  gchar *text = gst_structure_to_string(s);
  GstStructure *parsed = gst_structure_from_string(text, nullptr);
  ASSERT_NE(parsed, nullptr) << text;
  const cudanms::LineTallies back = gst_cuda_nms_counts_from_structure(parsed);
  ASSERT_EQ(back.size(), 2u) << text;
  EXPECT_EQ(back.at("door").total, (cudanms::LineCounts{12, 3}));
  EXPECT_EQ(back.at("door").by_label.at("person"), (cudanms::LineCounts{10, 3}));
  EXPECT_EQ(back.at("door").by_label.at("dog"), (cudanms::LineCounts{2, 0}));
  EXPECT_EQ(back.at("gate-2").total, (cudanms::LineCounts{0, 7}));
  EXPECT_TRUE(back.at("gate-2").by_label.empty());
  g_free(text);
  gst_structure_free(parsed);
  gst_structure_free(s);
}

// A line without "out" or "labels" counts zero there; a field that is not a line is no line.
TEST_F(CountsStructure, MissingFieldsAreZeroAndOthersIgnored) {
  GstStructure *s = gst_structure_from_string(
      "counts, door=(structure)\"line\\,\\ in\\=(guint64)5\\;\", note=(string)hello, "
      "gate=(structure)\"line\\,\\ labels\\=(structure)\\\"labels\\\\\\,\\\\\\ "
      "car\\\\\\=(string)x\\\\\\;\\\"\\;\";",
      nullptr);
  ASSERT_NE(s, nullptr);
  const cudanms::LineTallies counts = gst_cuda_nms_counts_from_structure(s);
  gchar *text = gst_structure_to_string(s);
  ASSERT_EQ(counts.size(), 2u) << text;
  EXPECT_EQ(counts.at("door").total, (cudanms::LineCounts{5, 0}));
  EXPECT_EQ(counts.at("gate").total, (cudanms::LineCounts{0, 0}));
  EXPECT_TRUE(counts.at("gate").by_label.empty()) << text;
  g_free(text);
  gst_structure_free(s);
}

}  // namespace
