// Shared by the tests of the detector and output plugins: registering their elements statically,
// and the sample videos of Debian's opencv-doc.
#pragma once

#include <glib.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cudanms/bounded_file.h"
#include "gstblazeface.h"
#include "gstboxcount.h"
#include "gstboxoverlay.h"
#include "gstboxtrack.h"
#include "gstcudacascade.h"
#include "gstcudanms.h"
#include "gstcvdetect.h"
#include "gstjsonmetawriter.h"
#include "support/opencv_samples.h"
#include "support/unreadable_files.h"

namespace cudanms::testing {

inline void init_cv_elements_once() {
  static const bool done = [] {
    gst_init(nullptr, nullptr);
    // The elements registered from the static libraries the plugins are built from.
    return GST_ELEMENT_REGISTER(cudanms, nullptr) && GST_ELEMENT_REGISTER(cvdetect, nullptr) &&
           GST_ELEMENT_REGISTER(cudacascade, nullptr) && GST_ELEMENT_REGISTER(blazeface, nullptr) &&
           GST_ELEMENT_REGISTER(boxoverlay, nullptr) &&
           GST_ELEMENT_REGISTER(jsonmetawriter, nullptr) &&
           GST_ELEMENT_REGISTER(boxtrack, nullptr) && GST_ELEMENT_REGISTER(boxcount, nullptr);
  }();
  ASSERT_TRUE(done);
}

// A frame through `element` (a launch description), held elsewhere too (not writable): whether
// the very buffer leaves. `then` sees the harness before it goes (the element's counters).
inline bool passes_the_frame_itself(const std::string &element,
                                    const std::function<void(GstHarness *)> &then = nullptr) {
  GstHarness *h = gst_harness_new_parse(element.c_str());
  gst_harness_set_src_caps_str(h, "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1");
  GstBuffer *in = gst_buffer_new_allocate(nullptr, 64 * 48, nullptr);
  gst_buffer_ref(in);
  EXPECT_EQ(gst_harness_push(h, in), GST_FLOW_OK) << element;
  GstBuffer *out = gst_harness_pull(h);
  EXPECT_NE(out, nullptr) << element;
  const bool same = out == in;
  if (out) gst_buffer_unref(out);
  gst_buffer_unref(in);
  if (then) then(h);
  gst_harness_teardown(h);
  return same;
}

// A detector that loads its model at start: the state change fails with an error, whose
// message this returns (and its debug text in *debug). `element` is its launch description, e.g.
// "cvdetect model=x.xml".
inline std::string start_error(const std::string &element, std::string *debug = nullptr) {
  GstElement *pipeline = gst_parse_launch(
      ("videotestsrc num-buffers=1 ! videoconvert ! " + element + " ! fakesink").c_str(), nullptr);
  EXPECT_NE(pipeline, nullptr);
  if (!pipeline) return "";
  std::string text;
  EXPECT_EQ(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstBus *bus = gst_element_get_bus(pipeline);
  if (GstMessage *m = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR)) {
    GError *error = nullptr;
    gchar *details = nullptr;
    gst_message_parse_error(m, &error, &details);
    text = error->message;
    if (debug && details) *debug = details;
    g_clear_error(&error);
    g_free(details);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return text;
}

// A model that could never be read whole (/dev/zero, a FIFO, past the size limit, a folder) is
// refused when `element` (its launch name) starts, at once, naming the file and why.
inline void expect_unreadable_models_refused(const std::string &element) {
  UnreadableFiles files(cudanms::kModelFileLimit);
  for (const auto &[path, why] : files.cases()) {
    const std::string text = start_error(element + " model=\"" + path + "\"");
    EXPECT_NE(text.find(path), std::string::npos) << text;
    EXPECT_NE(text.find(why), std::string::npos) << text;
  }
}

}  // namespace cudanms::testing

// Skips the test, visibly, when a file of an optional Debian package is missing.
#define SKIP_WITHOUT_FILE(path, package)                                                 \
  do {                                                                                   \
    if (!g_file_test((path).c_str(), G_FILE_TEST_IS_REGULAR))                            \
      GTEST_SKIP() << (path) << " is missing: install the Debian package " << (package); \
  } while (0)
