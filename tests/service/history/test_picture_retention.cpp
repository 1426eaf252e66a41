// The events' pictures within their bounds, on real files of the test's own: a camera's past its
// days, then the folder's oldest past its size; nothing else touched.
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <utime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "picture_retention.h"
#include "pipelines/script_support.h"

namespace cudanms::service {
namespace {

using cudanms::testing::TempDir;

constexpr gint64 kNow = 1765000000;  // seconds since 1970
constexpr gint64 kDay = 86400;

// SNAPSHOTS/CAMERA/NAME of `bytes` bytes, last written `age_s` before kNow.
std::string picture(const TempDir &dir, const std::string &camera, const std::string &name,
                    gint64 age_s, size_t bytes = 1000) {
  const std::string folder = dir.path + "/" + camera, path = folder + "/" + name;
  g_mkdir_with_parents(folder.c_str(), 0755);
  const std::string content(bytes, 'x');
  EXPECT_TRUE(g_file_set_contents(path.c_str(), content.data(), bytes, nullptr));
  const utimbuf when{static_cast<time_t>(kNow - age_s), static_cast<time_t>(kNow - age_s)};
  EXPECT_EQ(utime(path.c_str(), &when), 0);
  return path;
}

bool exists(const std::string &path) { return g_file_test(path.c_str(), G_FILE_TEST_EXISTS); }

TEST(PictureRetention, ACamerasOldPicturesGoThenTheOldestPastTheSize) {
  TempDir dir;
  const std::string door_old = picture(dir, "door", "1.jpg", 10 * kDay),
                    door_week = picture(dir, "door", "2.jpg", 6 * kDay),
                    door_new = picture(dir, "door", "3.jpg", 1 * kDay),
                    yard_old = picture(dir, "yard", "1.jpg", 20 * kDay),
                    yard_new = picture(dir, "yard", "2.jpg", 2 * kDay),
                    writing = picture(dir, "door", "4.jpg.ABC123", 30 * kDay);  // a temporary

  // door's older than 7 days: its 10-day-old one; yard's older one is not door's to remove.
  std::vector<std::string> removed = remove_old_pictures(dir.path, {"door", 7, 0}, kNow);
  EXPECT_EQ(removed, std::vector<std::string>({door_old}));
  EXPECT_FALSE(exists(door_old));
  EXPECT_TRUE(exists(yard_old));
  EXPECT_TRUE(exists(writing));

  // The folder at most 2 500 bytes (four pictures of 1 000 left): the two oldest of any camera.
  removed = remove_old_pictures(dir.path, {"door", 0, 2500}, kNow);
  EXPECT_EQ(removed, std::vector<std::string>({yard_old, door_week}));
  EXPECT_TRUE(exists(door_new));
  EXPECT_TRUE(exists(yard_new));
  // Within bounds: nothing more.
  EXPECT_TRUE(remove_old_pictures(dir.path, {"door", 7, 2500}, kNow).empty());
  // No folder: nothing, no error.
  EXPECT_TRUE(remove_old_pictures(dir.path + "/none", {"door", 1, 1}, kNow).empty());
}

// A camera's own size bound takes its oldest first, never another camera's; the folder's bound
// then counts what is left.
// Clips count with the pictures: a size smaller than the clips made takes the oldest first, clip
// or picture, and keeps the newest; a clip being muxed (its temporary name) is not touched.
TEST(PictureRetention, ClipsGoWithThePicturesOldestFirst) {
  TempDir dir;
  const std::string clip_1 = picture(dir, "door", "1.mp4", 5 * kDay, 4000),
                    picture_1 = picture(dir, "door", "1.jpg", 5 * kDay - 1),
                    clip_2 = picture(dir, "door", "2.mp4", 3 * kDay, 4000),
                    picture_2 = picture(dir, "door", "2.jpg", 3 * kDay - 1),
                    clip_3 = picture(dir, "door", "3.mp4", 1 * kDay, 4000),
                    muxing = picture(dir, "door", "4.mp4.part", 30 * kDay, 4000);
  EXPECT_EQ(remove_old_pictures(dir.path, {"door", 0, 0, 6000}, kNow),
            std::vector<std::string>({clip_1, picture_1, clip_2}));
  EXPECT_TRUE(exists(picture_2));
  EXPECT_TRUE(exists(clip_3));
  EXPECT_TRUE(exists(muxing));
}

TEST(PictureRetention, ACamerasOwnSizeTakesItsOldestFirst) {
  TempDir dir;
  const std::string door_1 = picture(dir, "door", "1.jpg", 5 * kDay),
                    door_2 = picture(dir, "door", "2.jpg", 4 * kDay),
                    door_3 = picture(dir, "door", "3.jpg", 3 * kDay),
                    yard_old = picture(dir, "yard", "1.jpg", 9 * kDay),
                    yard_new = picture(dir, "yard", "2.jpg", 1 * kDay);
  // door at most 1 500 bytes: its two oldest go; yard's older one, older still, stays.
  PictureBounds bounds{"door", 0, 0, 1500};
  EXPECT_EQ(remove_old_pictures(dir.path, bounds, kNow), std::vector<std::string>({door_1, door_2}));
  EXPECT_TRUE(exists(door_3));
  EXPECT_TRUE(exists(yard_old));
  // Its days first (door's 3-day-old one), then the folder at most 1 000 bytes: yard's oldest.
  bounds = {"door", 2, 1000, 1500};
  EXPECT_EQ(remove_old_pictures(dir.path, bounds, kNow),
            std::vector<std::string>({door_3, yard_old}));
  EXPECT_TRUE(exists(yard_new));
}

}  // namespace
}  // namespace cudanms::service
