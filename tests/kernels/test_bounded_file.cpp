// How every part of the project reads the files users name: whole regular files up to a limit,
// and a clear refusal, at once, for anything else.
#include <gtest/gtest.h>

#include <string>

#include "cudanms/bounded_file.h"
#include "support/unreadable_files.h"

namespace cudanms::testing {
namespace {

constexpr std::uint64_t kLimit = 1 << 20;

TEST(BoundedFile, ReadsARegularFileWhole) {
  gchar *path = nullptr;
  const int fd = g_file_open_tmp("bounded-XXXXXX", &path, nullptr);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string text("person\nbicycle\0car\n", 19);  // a NUL byte is kept as it is
  ASSERT_TRUE(g_file_set_contents(path, text.data(), static_cast<gssize>(text.size()), nullptr));
  std::string contents, error;
  EXPECT_TRUE(read_bounded_file(path, kLimit, &contents, &error)) << error;
  EXPECT_EQ(contents, text);
  EXPECT_TRUE(check_bounded_file(path, kLimit, &error)) << error;
  // A limit is inclusive: a file of exactly the limit is read.
  EXPECT_TRUE(read_bounded_file(path, text.size(), &contents, &error)) << error;
  EXPECT_FALSE(read_bounded_file(path, text.size() - 1, &contents, &error));
  EXPECT_NE(error.find("larger than the limit of 18 bytes (19 bytes)"), std::string::npos) << error;
  g_unlink(path);
  g_free(path);
}

TEST(BoundedFile, RefusesWhatCouldNeverBeReadWhole) {
  UnreadableFiles files(kLimit);
  for (const auto &[path, why] : files.cases()) {
    std::string contents = "untouched", error;
    EXPECT_FALSE(read_bounded_file(path, kLimit, &contents, &error)) << path;
    EXPECT_NE(error.find(why), std::string::npos) << path << ": " << error;
    EXPECT_EQ(contents, "untouched") << path;
    error.clear();
    EXPECT_FALSE(check_bounded_file(path, kLimit, &error)) << path;
    EXPECT_NE(error.find(why), std::string::npos) << path << ": " << error;
  }
  std::string contents, error;
  EXPECT_FALSE(read_bounded_file("/nonexistent/labels.txt", kLimit, &contents, &error));
  EXPECT_EQ(error, "No such file or directory");
}

}  // namespace
}  // namespace cudanms::testing
