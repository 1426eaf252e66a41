// The cudanms element driven by GstHarness, shared by its tests (test_cudanms*.cpp, one per part
// of the element). Every expectation is computed independently: the documented frame clipping
// written out in the test, then the NMS library run directly.
#pragma once

#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstharness.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

#include "cudanms/bounded_file.h"
#include "cudanmscontexts.h"
#include "kernels/random_sets.h"
#include "gst-plugin/element_support.h"
#include "support/seed.h"
#include "support/unreadable_files.h"
#include "synthetic.h"

namespace cudanms::testing {

inline constexpr int kWidth = 640;
inline constexpr int kHeight = 480;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline const char *const kCaps = "video/x-raw,format=GRAY8,width=640,height=480,framerate=30/1";

// A labels file of `contents` in the temporary folder, removed with the object.
class LabelsFile {
 public:
  explicit LabelsFile(const char *contents) {
    const int fd = g_file_open_tmp("labels-XXXXXX.names", &path_, nullptr);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    EXPECT_TRUE(path_ && g_file_set_contents(path_, contents, -1, nullptr));
  }
  ~LabelsFile() {
    if (path_) g_unlink(path_);
    g_free(path_);
  }
  LabelsFile(const LabelsFile &) = delete;
  LabelsFile &operator=(const LabelsFile &) = delete;
  std::string path() const { return path_ ? path_ : ""; }

 private:
  gchar *path_ = nullptr;
};

class CudaNmsElement : public ::testing::Test {
 protected:
  void SetUp() override { init_gstreamer_once(); }

  void TearDown() override {
    // Messages left on the bus hold the element, and the element holds the bus.
    if (bus_) gst_bus_set_flushing(bus_, TRUE);
    if (h_) gst_harness_teardown(h_);
    if (element_) gst_object_unref(element_);
    if (bus_) gst_object_unref(bus_);
  }

  // cudanms with `properties` (gst-launch syntax), a bus to watch, in a playing harness.
  void start(const std::string &properties = "backend=cpu", const char *caps = kCaps) {
    element_ = gst_element_factory_make("cudanms", "nms");
    ASSERT_NE(element_, nullptr);
    gst_object_ref_sink(element_);
    for (const std::string &assignment : split(properties)) {
      const size_t eq = assignment.find('=');
      gst_util_set_object_arg(G_OBJECT(element_), assignment.substr(0, eq).c_str(),
                              assignment.substr(eq + 1).c_str());
    }
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    h_ = gst_harness_new_with_element(element_, "sink", "src");
    gst_harness_set_src_caps_str(h_, caps);
  }

  static std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find(' ', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) out.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }

  GstBuffer *process(GstBuffer *in) {
    EXPECT_EQ(gst_harness_push(h_, in), GST_FLOW_OK);
    return gst_harness_pull(h_);
  }

  // Pushes the set (packed or as ROI metas) and checks the output against the library.
  ::testing::AssertionResult check(const CandidateSet &set, const Params &params,
                                   bool as_rois = false) {
    GstBuffer *in = gst_buffer_new();
    if (as_rois) {
      add_roi_candidates(in, set);
    } else {
      gst_buffer_unref(in);
      in = packed_buffer(set);
    }
    GstBuffer *out = process(in);
    if (!out) return ::testing::AssertionFailure() << "no output buffer";
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    auto result = output_matches(out, clipped, library_result(clipped, params), kWidth, kHeight);
    gst_buffer_unref(out);
    return result;
  }

  size_t pop_messages(GstMessageType type, std::vector<std::string> *texts = nullptr) {
    size_t n = 0;
    while (GstMessage *m = gst_bus_pop_filtered(bus_, type)) {
      ++n;
      if (texts) {
        GError *error = nullptr;
        gchar *debug = nullptr;
        if (type == GST_MESSAGE_WARNING) gst_message_parse_warning(m, &error, &debug);
        if (type == GST_MESSAGE_ERROR) gst_message_parse_error(m, &error, &debug);
        if (error) texts->push_back(std::string(error->message) + " | " + (debug ? debug : ""));
        g_clear_error(&error);
        g_free(debug);
      }
      gst_message_unref(m);
    }
    return n;
  }

  // The errors posted when an element with `property` set to `value` fails to start.
  std::vector<std::string> errors_at_start(const char *property, const char *value) {
    element_ = gst_element_factory_make("cudanms", "nms");
    EXPECT_NE(element_, nullptr);
    gst_object_ref_sink(element_);
    g_object_set(element_, property, value, NULL);
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    EXPECT_EQ(gst_element_set_state(element_, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    std::vector<std::string> errors;
    pop_messages(GST_MESSAGE_ERROR, &errors);
    gst_element_set_state(element_, GST_STATE_NULL);
    return errors;
  }

  GstHarness *h_ = nullptr;
  GstElement *element_ = nullptr;
  GstBus *bus_ = nullptr;
};

// A producer's download function for device candidates whose user data is a CandidateSet: host
// memory stands in for the device.
inline gboolean download_set(gpointer data, guint *n, gfloat **boxes, gfloat **scores,
                             gint32 **classes, gchar **) {
  const auto *set = static_cast<const CandidateSet *>(data);
  *n = static_cast<guint>(set->size());
  *boxes = static_cast<gfloat *>(g_memdup2(set->boxes.data(), set->boxes.size() * 4));
  *scores = static_cast<gfloat *>(g_memdup2(set->scores.data(), set->scores.size() * 4));
  *classes = static_cast<gint32 *>(g_memdup2(set->classes.data(), set->classes.size() * 4));
  return TRUE;
}

}  // namespace cudanms::testing
