// An application's command line (commandline.h): its options and GStreamer's taken out of argv, a
// bad one answered with the reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "commandline.h"

namespace {

struct Args {
  std::vector<std::string> words;
  std::vector<char *> pointers;
  int argc = 0;
  char **argv = nullptr;

  explicit Args(std::vector<std::string> w) : words(std::move(w)) {
    for (auto &word : words) pointers.push_back(word.data());
    pointers.push_back(nullptr);
    argc = static_cast<int>(words.size());
    argv = pointers.data();
  }
};

TEST(CommandLine, TakesItsOptionsAndGStreamersOutOfArgv) {
  gint64 frames = 0;
  const GOptionEntry entries[] = {{"frames", 'n', 0, G_OPTION_ARG_INT64, &frames, "Frames", "N"},
                                  {}};
  Args args({"app", "--frames", "12", "--gst-debug-level=1", "pipeline"});
  std::string error;
  ASSERT_TRUE(gst_cv_parse_command_line({"PIPELINE", "summary", "description"}, entries, &args.argc,
                                        &args.argv, &error))
      << error;
  EXPECT_EQ(frames, 12);
  ASSERT_EQ(args.argc, 2);
  EXPECT_STREQ(args.argv[1], "pipeline");
}

TEST(CommandLine, AnUnknownOptionOrABadValueIsAnsweredWithTheReason) {
  gint64 frames = 0;
  const GOptionEntry entries[] = {{"frames", 'n', 0, G_OPTION_ARG_INT64, &frames, "Frames", "N"},
                                  {}};
  Args unknown({"app", "--frame", "12"});
  std::string error;
  EXPECT_FALSE(
      gst_cv_parse_command_line({"PIPELINE"}, entries, &unknown.argc, &unknown.argv, &error));
  EXPECT_NE(error.find("--frame"), std::string::npos) << error;
  Args bad({"app", "--frames", "twelve"});
  error.clear();
  EXPECT_FALSE(gst_cv_parse_command_line({"PIPELINE"}, entries, &bad.argc, &bad.argv, &error));
  EXPECT_NE(error.find("twelve"), std::string::npos) << error;
}

}  // namespace
