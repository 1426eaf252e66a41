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
    return change_config("/api/cameras/" + camera + "/lines", body, authorization,
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

TEST_F(ConfigEdit, WhatIsRefusedSaysWhyAndSavesNothing) {
  struct Case {
    std::string path, body, authorization, web_auth, file;
    int status;
  };
  const std::string good = R"({"lines": "door:0.2,0.1,0.2,0.9"})";
  const std::string key = "Bearer key-of-the-site";
  const Case cases[] = {
      {"/api/cameras/gate/lines", good, "Bearer wrong", "key-of-the-site", path_, 401},
      {"/api/cameras/gate/lines", good, "", "key-of-the-site", path_, 401},
      {"/api/cameras/gate/lines", good, key, "", path_, 403},  // no web-auth: no changes
      {"/api/cameras/gate/lines", good, key, "key-of-the-site", "", 409},  // no file
      {"/api/cameras/gate/zones", good, key, "key-of-the-site", path_, 404},
      {"/api/cameras/yard/lines", good, key, "key-of-the-site", path_, 404},
      {"/api/cameras/dock/lines", good, key, "key-of-the-site", path_, 409},  // in pixels
      {"/api/cameras/gate/lines", R"({"lines": "door:0.2,0.1,1.2,0.9"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/lines", R"({"lines": "door:0.2,0.1,0.2,0.1"})", key, "key-of-the-site",
       path_, 400},
      {"/api/cameras/gate/lines", R"({"lines": "a;b"})", key, "key-of-the-site", path_, 400},
      {"/api/cameras/gate/lines", R"({"lines": 7})", key, "key-of-the-site", path_, 400},
      {"/api/cameras/gate/lines", "not json", key, "key-of-the-site", path_, 400},
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
  EXPECT_EQ(lines_camera("/api/cameras/gate/lines"), "gate");
  EXPECT_EQ(lines_camera("/api/cameras/yard%20west/lines"), "yard west");
  EXPECT_EQ(lines_camera("/api/cameras//lines"), "");
  EXPECT_EQ(lines_camera("/api/cameras/gate"), "");
  EXPECT_EQ(lines_camera("/api/cameras"), "");
}

}  // namespace
}  // namespace cudanms::service
