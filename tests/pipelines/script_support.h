// Shared by the pipelines/ script tests: running the scripts as a user would, with the build
// under test, bounded in time.
#pragma once

#include <gio/gio.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/file_size_limit.h"
#include "support/opencv_samples.h"

namespace cudanms::testing {

// The source tree's pipelines/ folder and the build under test, from the meson test().
inline std::string script(const char *name) {
  const char *root = g_getenv("CUDANMS_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/pipelines/" + name;
}

#define SKIP_WITHOUT_VTEST()                                                         \
  do {                                                                               \
    if (!g_file_test(opencv_sample("vtest.avi").c_str(), G_FILE_TEST_IS_REGULAR))    \
      GTEST_SKIP() << "vtest.avi is missing: install the Debian package opencv-doc"; \
  } while (0)

// A folder of the test's own, removed with all it holds (etcd's data folders included: a fleet
// test's were 123-370 MB, and left behind they filled a machine's /tmp).
struct TempDir {
  TempDir() : path(g_dir_make_tmp("cudanms-pipelines-XXXXXX", nullptr)) {}
  ~TempDir() {
    GFile *dir = g_file_new_for_path(path.c_str());
    remove_tree(dir);
    g_object_unref(dir);
  }
  // `file`, and what it holds when it is a folder (a link is removed, not followed).
  static void remove_tree(GFile *file) {
    const bool folder = g_file_query_file_type(file, G_FILE_QUERY_INFO_NOFOLLOW_SYMLINKS,
                                               nullptr) == G_FILE_TYPE_DIRECTORY;
    GFileEnumerator *e =
        folder ? g_file_enumerate_children(file, G_FILE_ATTRIBUTE_STANDARD_NAME,
                                           G_FILE_QUERY_INFO_NOFOLLOW_SYMLINKS, nullptr, nullptr)
               : nullptr;
    while (GFileInfo *info = e ? g_file_enumerator_next_file(e, nullptr, nullptr) : nullptr) {
      GFile *child = g_file_get_child(file, g_file_info_get_name(info));
      remove_tree(child);
      g_object_unref(child);
      g_object_unref(info);
    }
    if (e) g_object_unref(e);
    g_file_delete(file, nullptr, nullptr);
  }
  std::string file(const char *name) const { return path + "/" + name; }
  std::string path;
};

// Starts argv with stdout and stderr going to files (or stdout to a pipe); with
// file_size_limit, no file it writes may grow past that many bytes.
inline GSubprocess *spawn(const std::vector<std::string> &argv, const std::string &out_file,
                          const std::string &err_file, bool stdout_pipe = false,
                          rlim_t file_size_limit = 0) {
  static rlim_t limit;
  limit = file_size_limit;
  GSubprocessLauncher *launcher = g_subprocess_launcher_new(
      stdout_pipe ? G_SUBPROCESS_FLAGS_STDOUT_PIPE : G_SUBPROCESS_FLAGS_NONE);
  if (file_size_limit)
    g_subprocess_launcher_set_child_setup(launcher, limit_file_size, &limit, nullptr);
  if (!stdout_pipe) g_subprocess_launcher_set_stdout_file_path(launcher, out_file.c_str());
  g_subprocess_launcher_set_stderr_file_path(launcher, err_file.c_str());
  std::vector<const gchar *> args;
  for (const std::string &a : argv) args.push_back(a.c_str());
  args.push_back(nullptr);
  GError *error = nullptr;
  GSubprocess *p = g_subprocess_launcher_spawnv(launcher, args.data(), &error);
  EXPECT_NE(p, nullptr) << (error ? error->message : "");
  g_clear_error(&error);
  g_object_unref(launcher);
  return p;
}

// Waits up to `seconds` for p to exit; kills it if it does not. Returns its exit status, or -1
// when it had to be killed or died of a signal.
inline int wait_exit(GSubprocess *p, double seconds) {
  const gint64 deadline = g_get_monotonic_time() + static_cast<gint64>(seconds * G_USEC_PER_SEC);
  bool done = false;
  g_subprocess_wait_async(
      p, nullptr,
      [](GObject *, GAsyncResult *, gpointer done) { *static_cast<bool *>(done) = true; }, &done);
  while (!done && g_get_monotonic_time() < deadline) {
    while (g_main_context_iteration(nullptr, FALSE)) {
    }
    if (!done) g_usleep(50 * 1000);
  }
  if (!done) {
    ADD_FAILURE() << "still running after " << seconds << " s: killed";
    g_subprocess_force_exit(p);
    g_subprocess_wait(p, nullptr, nullptr);
    return -1;
  }
  return g_subprocess_get_if_exited(p) ? g_subprocess_get_exit_status(p) : -1;
}

inline std::string read_file(const std::string &path) {
  gchar *text = nullptr;
  gsize length = 0;
  if (!g_file_get_contents(path.c_str(), &text, &length, nullptr)) return "";
  std::string s(text, length);
  g_free(text);
  return s;
}

inline std::vector<std::string> lines_of(const std::string &path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Every line a JSON object; returns the sums of "candidates" and "kept" over them.
inline ::testing::AssertionResult json_lines_parse(const std::vector<std::string> &lines,
                                                   guint64 *candidates, guint64 *kept) {
  *candidates = *kept = 0;
  JsonParser *parser = json_parser_new();
  for (size_t i = 0; i < lines.size(); i++) {
    GError *error = nullptr;
    if (!json_parser_load_from_data(parser, lines[i].c_str(), -1, &error)) {
      auto failure = ::testing::AssertionFailure() << "line " << i << ": " << error->message << "\n"
                                                   << lines[i];
      g_clear_error(&error);
      g_object_unref(parser);
      return failure;
    }
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    if (!o || !json_object_has_member(o, "boxes")) {
      g_object_unref(parser);
      return ::testing::AssertionFailure() << "line " << i << " is not a frame: " << lines[i];
    }
    *candidates += json_object_get_int_member(o, "candidates");
    *kept += json_object_get_int_member(o, "kept");
  }
  g_object_unref(parser);
  return ::testing::AssertionSuccess();
}

// The video frames an MP4 file decodes to; -1 if it does not play to its end.
inline int mp4_frames(const std::string &path) {
  GstElement *pipeline = gst_parse_launch(("filesrc location=\"" + path +
                                           "\" ! qtdemux ! h264parse ! avdec_h264 ! "
                                           "appsink name=sink sync=false")
                                              .c_str(),
                                          nullptr);
  if (!pipeline) return -1;
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  int n = 0;
  while (GstSample *s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 30 * GST_SECOND)) {
    n++;
    gst_sample_unref(s);
  }
  const bool eos = gst_app_sink_is_eos(GST_APP_SINK(sink));
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return eos ? n : -1;
}

}  // namespace cudanms::testing
