// pipelines/demo on vtest.avi, as the README runs it but for a few frames: the annotated MP4
// plays, the PNG is a PNG, the JSON lines parse, and the summary line counts what they hold.
#include <gtest/gtest.h>

#include "script_support.h"
#include "support/blazeface_model.h"

namespace cudanms::testing {
namespace {

// The demo on the first `frames` frames of vtest.avi into dir, on the CPU; its exit status.
int run_demo(const TempDir &dir, int frames, rlim_t file_size_limit = 0) {
  gst_init(nullptr, nullptr);
  GSubprocess *demo = spawn({script("demo"), "--frames", std::to_string(frames), "--snapshot-frame",
                             std::to_string(frames / 2), "--out", dir.path, "--backend", "cpu"},
                            dir.file("stdout"), dir.file("stderr"), false, file_size_limit);
  if (!demo) return -1;
  const int status = wait_exit(demo, 180);
  g_object_unref(demo);
  return status;
}

TEST(Demo, WritesMp4PngAndJsonLines) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  const int status = run_demo(dir, 8);
  const std::string out = read_file(dir.file("stdout"));
  ASSERT_EQ(status, 0) << out << read_file(dir.file("stderr"));

  // The run's summary line, and the files it names.
  const std::vector<std::string> lines = lines_of(dir.file("vtest.jsonl"));
  ASSERT_EQ(lines.size(), 8u);
  guint64 candidates, kept;
  ASSERT_TRUE(json_lines_parse(lines, &candidates, &kept));
  EXPECT_GE(candidates, 8u * 10);
  EXPECT_GE(kept, 8u);
  const std::string summary = "summary: frames 8, candidates " + std::to_string(candidates) +
                              ", kept " + std::to_string(kept) + ", NMS p50 ";
  EXPECT_NE(out.find(summary), std::string::npos) << "want \"" << summary << "\" in\n" << out;
  EXPECT_NE(out.find("backend cpu"), std::string::npos) << out;

  const std::string png = read_file(dir.file("vtest.png"));
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_EQ(mp4_frames(dir.file("vtest-annotated.mp4")), 8);
}

// The DNN face demo as the README runs it, on a few frames: BlazeFace's raw anchors through
// cudanms method=weighted, about one box a frame for the one face in view.
TEST(Demo, FacesThroughBlazeFaceAndWeightedNms) {
  SKIP_WITHOUT_BLAZEFACE_MODEL();
  if (!g_file_test(opencv_sample("Megamind.avi").c_str(), G_FILE_TEST_IS_REGULAR))
    GTEST_SKIP() << "Megamind.avi is missing: install the Debian package opencv-doc";
  gst_init(nullptr, nullptr);
  TempDir dir;
  GSubprocess *demo = spawn({script("demo"), "--faces", "--dnn", "--frames", "20",
                             "--snapshot-frame", "10", "--out", dir.path, "--backend", "cpu"},
                            dir.file("stdout"), dir.file("stderr"));
  ASSERT_NE(demo, nullptr);
  const int status = wait_exit(demo, 180);
  g_object_unref(demo);
  const std::string out = read_file(dir.file("stdout"));
  ASSERT_EQ(status, 0) << out << read_file(dir.file("stderr"));

  const std::vector<std::string> lines = lines_of(dir.file("Megamind-dnn.jsonl"));
  ASSERT_EQ(lines.size(), 20u);
  guint64 candidates, kept;
  ASSERT_TRUE(json_lines_parse(lines, &candidates, &kept));
  EXPECT_GE(candidates, 20u * 3);  // a handful of anchors on the face
  EXPECT_GE(kept, 20u);            // the face in every frame ...
  EXPECT_LE(kept, 20u * 2);        // ... merged into about one box
  EXPECT_NE(out.find("summary: frames 20, candidates " + std::to_string(candidates) + ", kept " +
                     std::to_string(kept)),
            std::string::npos)
      << out;
  EXPECT_EQ(read_file(dir.file("Megamind-dnn.png")).substr(1, 3), "PNG");
  // Each kept face carries its six merged keypoints into the JSON.
  size_t with_points = 0;
  for (const std::string &line : lines)
    with_points += line.find("\"points\":[[") != std::string::npos;
  EXPECT_GE(with_points, 19u);
}

// A full disk under the MP4, PNG or JSON: the run fails (exit status 1) saying why; nothing is
// lost silently. A file size limit stands in for the full disk on any machine.
TEST(Demo, OutputsThatCannotBeWrittenFailTheRun) {
  SKIP_WITHOUT_VTEST();
  TempDir dir;
  const int status = run_demo(dir, 4, 48 * 1024);
  const std::string err = read_file(dir.file("stderr"));
  EXPECT_EQ(status, 1) << read_file(dir.file("stdout")) << err;
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
}

TEST(Demo, HelpAndBadInput) {
  TempDir dir;
  GSubprocess *help = spawn({script("demo"), "--help"}, dir.file("help"), dir.file("err"));
  EXPECT_EQ(wait_exit(help, 30), 0);
  g_object_unref(help);
  EXPECT_NE(read_file(dir.file("help")).find("usage: pipelines/demo"), std::string::npos);

  GSubprocess *bad = spawn({script("demo"), "--input", "/nonexistent.avi", "--out", dir.path},
                           dir.file("out"), dir.file("err"));
  EXPECT_EQ(wait_exit(bad, 30), 2);
  g_object_unref(bad);
  EXPECT_NE(read_file(dir.file("err")).find("no such file: /nonexistent.avi"), std::string::npos);
}

}  // namespace
}  // namespace cudanms::testing
