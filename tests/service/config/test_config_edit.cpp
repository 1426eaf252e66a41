// The operator page's changes to a config file (config_edit.h): who may make them, what is
// refused and why (nothing saved then), and what a saved file keeps.
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "config_edit.h"

namespace cudanms::service {
namespace {

constexpr const char *kSite =
    "# the site's cameras\n"
    "[service]\n"
    "metrics-address = 127.0.0.1:0\n"
    "web-auth = key-of-the-site\n"
    "[camera.gate]\n"
    "# the gate, from the street\n"
    "url = rtsp://127.0.0.1:1/gate\n"
    "lines = middle:0.5,0,0.5,1\n"
    "normalized = true\n"
    "[camera.dock]\n"
    "url = rtsp://127.0.0.1:1/dock\n"
    "lines = edge:10,400,600,400\n";

class ConfigEdit : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);  // the config's detectors are checked as elements
    gchar *dir = g_dir_make_tmp("config-edit-XXXXXX", nullptr);
    dir_ = dir;
    g_free(dir);
    path_ = dir_ + "/site.conf";
    ASSERT_TRUE(g_file_set_contents(path_.c_str(), kSite, -1, nullptr));
  }
  void TearDown() override {
    g_remove(path_.c_str());
    g_rmdir(dir_.c_str());
  }
  std::string file() const {
    gchar *text = nullptr;
    g_file_get_contents(path_.c_str(), &text, nullptr, nullptr);
    std::string out = text ? text : "";
    g_free(text);
    return out;
  }
  Reply change(const std::string &camera, const std::string &body,
               const std::string &authorization = "Bearer key-of-the-site") {
    return change_config("/api/cameras/" + camera + "/shapes", body, authorization,
                         "key-of-the-site", path_, "no file");
  }
  std::string dir_, path_;
};

TEST_F(ConfigEdit, ALineDrawnIsSavedWithTheCommentsAndTheOtherCameras) {
  const Reply saved = change("gate", R"({"lines": "middle:0.5,0,0.5,1;door:0.2,0.1,0.2,0.9"})");
  EXPECT_EQ(saved.status, 200) << saved.body;
  const std::string text = file();
  EXPECT_NE(text.find("lines=middle:0.5,0,0.5,1;door:0.2,0.1,0.2,0.9"), std::string::npos) << text;
  EXPECT_NE(text.find("# the gate, from the street"), std::string::npos) << text;
  EXPECT_NE(text.find("edge:10,400,600,400"), std::string::npos) << text;
  // No lines at all is a change too: the camera stops counting.
  EXPECT_EQ(change("gate", R"({"lines": ""})").status, 200);
}

TEST_F(ConfigEdit, AZoneDrawnKeepsTheLinesAndBothMayComeAtOnce) {
  const Reply zone = change("gate", R"({"zones": "yard:0.1,0.1 0.9,0.1 0.9,0.9 0.1,0.9"})");
  EXPECT_EQ(zone.status, 200) << zone.body;
  EXPECT_NE(zone.body.find("zones = yard:"), std::string::npos) << zone.body;
  std::string text = file();
  EXPECT_NE(text.find("zones=yard:0.1,0.1 0.9,0.1 0.9,0.9 0.1,0.9"), std::string::npos) << text;
  EXPECT_NE(text.find("lines=middle:0.5,0,0.5,1"), std::string::npos) << text;
  // A camera counting in pixels may change to 0..1 when the change gives all its shapes.
  const Reply both =
      change("dock", R"({"lines": "edge:0.1,0.6,0.9,0.6", "zones": "bay:0,0 0.5,0 0.5,0.5"})");
  EXPECT_EQ(both.status, 200) << both.body;
  text = file();
  EXPECT_NE(text.find("lines=edge:0.1,0.6,0.9,0.6\nzones=bay:0,0 0.5,0 0.5,0.5\nnormalized=true"),
            std::string::npos)
      << text;
}

TEST(ConfigEditKeys, AFleetCamerasKeysKeepTheirCommentsAndOtherKeys) {
  ShapesEdit edit;
  ASSERT_EQ(read_shapes_edit(R"({"lines": "door:0.2,0.1,0.2,0.9"})", &edit).status, 0);
  std::string edited, why;
  ASSERT_TRUE(
      shapes_edited("# the north gate\nurl = rtsp://127.0.0.1:1/gate\nzones = z:0,0 1,0 1,1\n",
                    edit, &edited, &why))
      << why;
  EXPECT_EQ(edited,
            "# the north gate\nurl=rtsp://127.0.0.1:1/gate\nzones=z:0,0 1,0 1,1\n"
            "lines=door:0.2,0.1,0.2,0.9\nnormalized=true\n");
  EXPECT_FALSE(shapes_edited("[camera.gate]\nurl = x\n[camera.other]\n", edit, &edited, &why));
}

TEST_F(ConfigEdit, WhatIsRefusedSaysWhyAndSavesNothing) {
  struct Case {
    std::string path, body, authorization, web_auth, file;
    int status;
  };
  const std::string good = R"({"lines": "door:0.2,0.1,0.2,0.9"})";
  const std::string key = "Bearer key-of-the-site";
  const Case cases[] = {
      {"/api/cameras/gate/shapes", good, "Bearer wrong", "key-of-the-site", path_, 401},
      {"/api/cameras/gate/shapes", good, "", "key-of-the-site", path_, 401},
      {"/api/cameras/gate/shapes", good, key, "", path_, 403},  // no web-auth: no changes
      {"/api/cameras/gate/shapes", good, key, "key-of-the-site", "", 409},  // no file
      {"/api/cameras/gate/lines", good, key, "key-of-the-site", path_, 404},
      {"/api/cameras/yard/shapes", good, key, "key-of-the-site", path_, 404},
      // In pixels: its lines would be read in 0..1.
      {"/api/cameras/dock/shapes", R"({"zones": "bay:0,0 0.5,0 0.5,0.5"})", key, "key-of-the-site",
       path_, 409},
      // A zone whose edges cross (a bow tie), one off the picture, one of two points.
      {"/api/cameras/gate/shapes", R"({"zones": "bow:0.1,0.1 0.9,0.9 0.9,0.1 0.1,0.9"})", key,
       "key-of-the-site", path_, 400},
      {"/api/cameras/gate/shapes", R"({"zones": "off:0.1,0.1 1.9,0.1 0.5,0.9"})", key,
       "key-of-the-site", path_, 400},
      {"/api/cameras/gate/shapes", R"({"zones": "flat:0.1,0.1 0.9,0.9"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/shapes", R"({"zones": ["yard"]})", key, "key-of-the-site", path_, 400},
      {"/api/cameras/gate/shapes", R"({"line": "door:0.2,0.1,0.2,0.9"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/shapes", R"({"lines": "door:0.2,0.1,1.2,0.9"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/shapes", R"({"lines": "door:0.2,0.1,0.2,0.1"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/shapes", R"({"lines": "a;b"})", key, "key-of-the-site", path_, 400},
      {"/api/cameras/gate/shapes", R"({"lines": 7})", key, "key-of-the-site", path_, 400},
      {"/api/cameras/gate/shapes", "not json", key, "key-of-the-site", path_, 400},
  };
  for (const Case &c : cases) {
    const Reply reply =
        change_config(c.path, c.body, c.authorization, c.web_auth, c.file, "no file to save to");
    EXPECT_EQ(reply.status, c.status) << c.path << " " << c.body << ": " << reply.body;
    EXPECT_NE(reply.body.find("\"error\""), std::string::npos) << reply.body;
    EXPECT_EQ(file(), kSite) << c.path << " " << c.body;
  }
}

TEST_F(ConfigEdit, AFileThatIsNoLongerGoodIsNotWrittenOver) {
  ASSERT_TRUE(
      g_file_set_contents(path_.c_str(), "[camera.gate]\nurl = x\nbogus-key = 1\n", -1, nullptr));
  const Reply refused = change("gate", R"({"lines": "door:0.2,0.1,0.2,0.9"})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("bogus-key"), std::string::npos) << refused.body;
  EXPECT_EQ(file(), "[camera.gate]\nurl = x\nbogus-key = 1\n");
}

TEST(ConfigEditPaths, TheCameraOfAChange) {
  EXPECT_EQ(shapes_camera("/api/cameras/gate/shapes"), "gate");
  EXPECT_EQ(shapes_camera("/api/cameras/yard%20west/shapes"), "yard west");
  EXPECT_EQ(shapes_camera("/api/cameras//shapes"), "");
  EXPECT_EQ(shapes_camera("/api/cameras/gate"), "");
  EXPECT_EQ(shapes_camera("/api/cameras"), "");
}

}  // namespace
}  // namespace cudanms::service
