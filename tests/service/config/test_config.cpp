// The camera service's config: defaults resolved per camera, and every class of error reported
// as FILE:GROUP:KEY: reason, all of them in one pass. Runs against the build's plugins (the
// cudanms and OpenCV elements' properties and pads are what the config is checked against).
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config.h"
#include "cudanms/bounded_file.h"
#include "element_check.h"
#include "fleet_camera_check.h"
#include "support/certificate.h"
#include "support/unreadable_files.h"

namespace cudanms::service {
namespace {

using cudanms::testing::make_certificate;
using cudanms::testing::UnreadableFiles;

// Whether the plugin that has `element` is loaded in this process.
bool plugin_loaded(const char *element) {
  GstPluginFeature *feature = gst_registry_lookup_feature(gst_registry_get(), element);
  if (!feature) return false;
  GstPlugin *plugin =
      gst_registry_find_plugin(gst_registry_get(), gst_plugin_feature_get_plugin_name(feature));
  gst_object_unref(feature);
  const bool loaded = plugin && gst_plugin_is_loaded(plugin);
  if (plugin) gst_object_unref(plugin);
  return loaded;
}

// Reading a config is reading text: the keys for cudanms, boxtrack and boxcount and the detector
// go through as they are, and no plugin is loaded; the elements' check (element_check.h) loads
// them. In a process of its own (this test again, asked by the variable below): a registry scan
// in this one may have loaded every plugin (GST_REGISTRY_FORK=no), and other tests check.
const char *const kReadingChild = "CUDANMS_TEST_CONFIG_READING_CHILD";

TEST(ConfigReading, LoadsNoPluginTheElementsCheckDoes) {
  gst_init(nullptr, nullptr);  // the registry scanned and written here, read as it is there
  if (!g_getenv(kReadingChild)) {
    gchar *self = g_file_read_link("/proc/self/exe", nullptr);
    const gchar *argv[] = {self, "--gtest_filter=ConfigReading.LoadsNoPluginTheElementsCheckDoes",
                           nullptr};
    gchar **env = g_environ_setenv(g_get_environ(), kReadingChild, "1", TRUE);
    gchar *out = nullptr;
    gint status = -1;
    ASSERT_TRUE(g_spawn_sync(nullptr, const_cast<gchar **>(argv), env, G_SPAWN_STDERR_TO_DEV_NULL,
                             nullptr, nullptr, &out, nullptr, &status, nullptr));
    EXPECT_TRUE(g_spawn_check_wait_status(status, nullptr)) << out;
    EXPECT_NE(std::string(out).find("[       OK ]"), std::string::npos) << out;
    g_free(out);
    g_strfreev(env);
    g_free(self);
    return;
  }
  const char *const elements[] = {"cudanms", "boxtrack", "boxcount", "cvdetect"};
  for (const char *element : elements) {
    ASSERT_NE(gst_registry_lookup_feature(gst_registry_get(), element), nullptr)
        << element << " is not in the registry (GST_PLUGIN_PATH)";
    ASSERT_FALSE(plugin_loaded(element)) << element << " was loaded at start";
  }
  const std::string text =
      "[service]\ndetector = cvdetect model=hog-people\niou-threshold = 0.3\n"
      "[camera.gate]\nurl = rtsp://127.0.0.1/gate\nmethod = weighted\ntrack-buffer = 60\n"
      "lines = door:0,5,10,5\nnot-a-property = 1\n";
  ServiceConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(parse_config(text, "cams.conf", &config, &errors, 0)) << errors.front();
  ASSERT_EQ(config.cameras.size(), 1u);
  const CameraConfig &gate = config.cameras[0];
  EXPECT_EQ(gate.elements.at("iou-threshold"), "0.3");
  EXPECT_EQ(gate.elements.at("method"), "weighted");
  EXPECT_EQ(gate.elements.at("track-buffer"), "60");
  EXPECT_EQ(gate.elements.at("not-a-property"), "1");
  EXPECT_EQ(gate.detector, "cvdetect model=hog-people");
  EXPECT_TRUE(gate.counting());
  for (const char *element : elements) EXPECT_FALSE(plugin_loaded(element)) << element;

  EXPECT_FALSE(parse_checked_config(text, "cams.conf", &config, &errors, 0));
  EXPECT_EQ(errors, std::vector<std::string>{"cams.conf:camera.gate:not-a-property: unknown key"});
  for (const char *element : elements) EXPECT_TRUE(plugin_loaded(element)) << element;
}

class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    gchar *dir = g_dir_make_tmp("cudanms-config-XXXXXX", nullptr);
    dir_ = dir;
    g_free(dir);
  }
  void TearDown() override { g_rmdir(dir_.c_str()); }

  // The errors of `text`, or none when it parses.
  // Checked as on a machine that sees `visible_gpus` GPUs (none by default).
  std::vector<std::string> errors_of(const std::string &text, ServiceConfig *config = nullptr,
                                     int visible_gpus = 0) {
    ServiceConfig scratch;
    std::vector<std::string> errors;
    const bool ok =
        parse_checked_config(text, "cams.conf", config ? config : &scratch, &errors, visible_gpus);
    EXPECT_EQ(ok, errors.empty());
    return errors;
  }

  std::string dir_;
};

std::string joined(const std::vector<std::string> &lines) {
  std::string out;
  for (const std::string &l : lines) out += l + "\n";
  return out;
}

TEST_F(Config, CamerasTakeTheServiceDefaultsAndTheirOwnKeys) {
  const std::string text =
      "[service]\n"
      "metrics-address = 127.0.0.1:0\n"
      "detector = cvdetect model=hog-people\n"
      "json = " +
      dir_ +
      "/out/{camera}.jsonl\n"
      "iou-threshold = 0.3\n"
      "reconnect-max = 8\n"
      "\n"
      "[camera.gate]\n"
      "url = rtsp://user:secret@127.0.0.1:8554/stream\n"
      "\n"
      "[camera.yard]\n"
      "source = videotestsrc is-live=true\n"
      "cuda-context = per-camera\n"
      "iou-threshold = 0.6\n"
      "method = weighted\n"
      "reconnect-attempts = 3\n"
      "enabled = false\n";
  ServiceConfig config;
  ASSERT_EQ(errors_of(text, &config), std::vector<std::string>());
  EXPECT_EQ(config.metrics_address, "127.0.0.1:0");
  ASSERT_EQ(config.cameras.size(), 2u);
  const CameraConfig &gate = config.cameras[0], &yard = config.cameras[1];
  EXPECT_EQ(gate.name, "gate");
  EXPECT_EQ(gate.uri, "rtsp://user:secret@127.0.0.1:8554/stream");
  EXPECT_EQ(gate.detector, "cvdetect model=hog-people");
  EXPECT_EQ(gate.json, dir_ + "/out/gate.jsonl");  // a folder to make is fine
  EXPECT_EQ(gate.elements.at("iou-threshold"), "0.3");
  EXPECT_EQ(gate.reconnect_initial_s, 1.0);
  EXPECT_EQ(gate.reconnect_max_s, 8.0);
  EXPECT_EQ(gate.reconnect_attempts, -1);
  EXPECT_EQ(gate.stall_timeout_s, 10.0);
  EXPECT_TRUE(gate.enabled);
  EXPECT_TRUE(gate.mqtt_topic.empty());
  EXPECT_EQ(yard.source, "videotestsrc is-live=true");
  EXPECT_TRUE(gate.share_cuda_context);
  EXPECT_FALSE(yard.share_cuda_context);
  EXPECT_EQ(yard.json, dir_ + "/out/yard.jsonl");
  EXPECT_EQ(yard.elements.at("iou-threshold"), "0.6");
  EXPECT_EQ(yard.elements.at("method"), "weighted");
  EXPECT_EQ(yard.reconnect_attempts, 3);
  EXPECT_FALSE(yard.enabled);
  EXPECT_EQ(gate.elements.count("method"), 0u);  // HOG's windows: cudanms's default, greedy

  // The same text is the same settings (a reload leaves the cameras alone); a changed default
  // changes the settings of every camera that takes it.
  ServiceConfig again, changed;
  ASSERT_TRUE(errors_of(text, &again).empty());
  EXPECT_EQ(again.cameras[0].settings, gate.settings);
  std::string other = text;
  other.replace(other.find("reconnect-max = 8"), 17, "reconnect-max = 9");
  ASSERT_TRUE(errors_of(other, &changed).empty());
  EXPECT_NE(changed.cameras[0].settings, gate.settings);
}

// A camera's lines are parsed once, as the config is read: their points' text names them in the
// counts file and tells a reload which lines stayed; zones are not lines.
TEST_F(Config, LinesAreParsedOnceIntoTheirShapes) {
  ServiceConfig config;
  ASSERT_EQ(errors_of("[camera.gate]\nsource = videotestsrc\nlines = door:0,5,10,5;exit:1,2 3,4\n"
                      "zones = hall:0,0 9,0 9,9\n"
                      "[camera.yard]\nsource = videotestsrc\nlines = door:0,0.5,1,0.5\n"
                      "normalized = yes\n[camera.roof]\nsource = videotestsrc\n",
                      &config),
            std::vector<std::string>());
  ASSERT_EQ(config.cameras.size(), 3u);
  EXPECT_EQ(config.cameras[0].line_shapes,
            (std::map<std::string, std::string>{{"door", "0.000000,5.000000 10.000000,5.000000 "},
                                                {"exit", "1.000000,2.000000 3.000000,4.000000 "}}));
  EXPECT_EQ(config.cameras[1].line_shapes,
            (std::map<std::string, std::string>{
                {"door", "0.000000,0.500000 1.000000,0.500000 normalized"}}));
  EXPECT_TRUE(config.cameras[2].line_shapes.empty());
}

// A fleet camera's keys in etcd, checked as a host runs them: over its [service] defaults, by
// the config's reader; what cannot run says why, naming the key.
TEST_F(Config, FleetCameraKeysAreCheckedAsAHostRunsThem) {
  const std::string defaults = "[service]\ndetector = cvdetect model=hog-people\n";
  const std::string key = "/cudanms/site/cameras/";
  FleetCameraCheck good = check_fleet_camera("gate", "source = videotestsrc\nenabled = false\n",
                                             key + "gate", defaults);
  EXPECT_EQ(good.error, "");
  EXPECT_FALSE(good.enabled);
  EXPECT_NE(good.group.find("source=videotestsrc"), std::string::npos) << good.group;
  EXPECT_EQ(
      check_fleet_camera("bad name", "source = videotestsrc\n", key + "bad name", defaults).error,
      key + "bad name: a camera's name is 1 to 64 letters, digits, - and _");
  EXPECT_EQ(
      check_fleet_camera("yard", "[camera.other]\nsource = videotestsrc\n", key + "yard", defaults)
          .error,
      key + "yard: holds a [group] line: give the camera's keys alone");
  const FleetCameraCheck no_source =
      check_fleet_camera("yard", "lines = a:0,0\n", key + "yard", defaults);
  EXPECT_NE(no_source.error.find(key + "yard"), std::string::npos) << no_source.error;
  EXPECT_NE(no_source.error.find("no url (or source)"), std::string::npos) << no_source.error;
  EXPECT_NE(no_source.error.find("lines"), std::string::npos) << no_source.error;
}

// The default detector, the face cascade, and any cascade get OpenCV's grouping by default; a
// method named in the config wins.
TEST_F(Config, CascadesAreGroupedAsOpenCvGroupsThem) {
  const std::string text =
      "[camera.door]\n"
      "source = videotestsrc is-live=true\n"
      "\n"
      "[camera.hall]\n"
      "source = videotestsrc is-live=true\n"
      "detector = cvdetect model=/usr/share/opencv4/lbpcascades/lbpcascade_frontalface.xml\n"
      "min-neighbors = 5\n"
      "\n"
      "[camera.lobby]\n"
      "source = videotestsrc is-live=true\n"
      "method = weighted\n";
  ServiceConfig config;
  ASSERT_EQ(errors_of(text, &config), std::vector<std::string>());
  ASSERT_EQ(config.cameras.size(), 3u);
  EXPECT_EQ(config.cameras[0].elements.at("method"), "group");
  EXPECT_EQ(config.cameras[0].elements.at("min-neighbors"), "3");
  EXPECT_EQ(config.cameras[1].elements.at("method"), "group");
  EXPECT_EQ(config.cameras[1].elements.at("min-neighbors"), "5");
  EXPECT_EQ(config.cameras[2].elements.at("method"), "weighted");
  EXPECT_EQ(config.cameras[2].elements.count("min-neighbors"), 0u);

  // The policy as a key: off leaves a cascade's windows to cudanms's default, on groups any
  // detector's; a value it does not know is an error.
  ASSERT_EQ(errors_of("[service]\ncascade-grouping = off\n"
                      "[camera.door]\nsource = videotestsrc is-live=true\n"
                      "[camera.yard]\nsource = videotestsrc is-live=true\n"
                      "detector = cvdetect model=hog-people\ncascade-grouping = on\n",
                      &config),
            std::vector<std::string>());
  ASSERT_EQ(config.cameras.size(), 2u);
  EXPECT_EQ(config.cameras[0].elements.count("method"), 0u);
  EXPECT_EQ(config.cameras[1].elements.at("method"), "group");
  EXPECT_EQ(config.cameras[1].elements.at("min-neighbors"), "3");
  EXPECT_EQ(errors_of("[camera.door]\nsource = videotestsrc is-live=true\n"
                      "cascade-grouping = sometimes\n"),
            std::vector<std::string>{
                "cams.conf:camera.door:cascade-grouping: must be auto, on or off, not "
                "\"sometimes\""});
}

TEST_F(Config, MqttTopicsComeFromThePrefix) {
  ServiceConfig config;
  ASSERT_EQ(errors_of("[service]\nmqtt-address = 127.0.0.1:1883\nmqtt-prefix = site/cams\n"
                      "[camera.a]\nurl = rtsp://127.0.0.1/a\n"
                      "[camera.b]\nurl = rtsp://127.0.0.1/b\nmqtt-topic = site/special\n",
                      &config),
            std::vector<std::string>());
  EXPECT_EQ(config.cameras[0].mqtt_topic, "site/cams/a");
  EXPECT_EQ(config.cameras[0].status_topic, "site/cams/a/status");
  EXPECT_EQ(config.cameras[1].mqtt_topic, "site/special");
  EXPECT_EQ(config.cameras[1].status_topic, "site/cams/b/status");
}

// The events' clips: on for every camera or one, their seconds before and after (0 to 60); none
// without a folder for them (snapshots).
TEST_F(Config, ClipsNeedTheirFolderAndBoundedSeconds) {
  ServiceConfig config;
  ASSERT_EQ(errors_of("[service]\nsnapshots = /tmp\nclips = true\nclip-pre-capture = 3\n"
                      "[camera.a]\nurl = rtsp://127.0.0.1/a\n"
                      "[camera.b]\nurl = rtsp://127.0.0.1/b\nclips = false\n"
                      "clip-post-capture = 0.5\n",
                      &config),
            std::vector<std::string>());
  ASSERT_EQ(config.cameras.size(), 2u);
  EXPECT_TRUE(config.cameras[0].clips);
  EXPECT_EQ(config.cameras[0].clip_pre_s, 3);
  EXPECT_EQ(config.cameras[0].clip_post_s, 5);
  EXPECT_FALSE(config.cameras[1].clips);
  EXPECT_EQ(config.cameras[1].clip_post_s, 0.5);
  const std::string bad =
      joined(errors_of("[service]\nclip-pre-capture = 61\nclip-post-capture = soon\n"
                       "[camera.a]\nurl = rtsp://127.0.0.1/a\nclips = true\n"));
  EXPECT_NE(bad.find("clip-pre-capture: must be at most 60 s, not 61"), std::string::npos) << bad;
  EXPECT_NE(bad.find("clip-post-capture: must be a number of seconds"), std::string::npos) << bad;
  const std::string nowhere =
      joined(errors_of("[service]\n[camera.a]\nurl = rtsp://127.0.0.1/a\nclips = true\n"));
  EXPECT_NE(nowhere.find("camera.a:clips: needs snapshots in [service]"), std::string::npos)
      << nowhere;
}

// One config with an error of every class: each is reported, with its group and key, and
// nothing else is.
// The events' pictures' bounds: a size with its unit for the folder, days for a camera (a
// [service] value every camera's default).
TEST_F(Config, PicturesAreBoundBySizeAndDays) {
  ServiceConfig config;
  ASSERT_EQ(errors_of("[service]\nsnapshots-size = 1.5G\npicture-retain-days = 30\n"
                      "[camera.a]\nurl = rtsp://127.0.0.1/a\n"
                      "[camera.b]\nurl = rtsp://127.0.0.1/b\npicture-retain-days = 2.5\n",
                      &config),
            std::vector<std::string>());
  EXPECT_EQ(config.snapshots_size, static_cast<guint64>(1.5 * 1024 * 1024 * 1024));
  ASSERT_EQ(config.cameras.size(), 2u);
  EXPECT_EQ(config.cameras[0].picture_retain_days, 30);
  EXPECT_EQ(config.cameras[1].picture_retain_days, 2.5);
  const auto bad = errors_of(
      "[service]\nsnapshots-size = big\npicture-retain-days = -1\n[camera.a]\nurl = "
      "rtsp://127.0.0.1/a\n");
  EXPECT_NE(joined(bad).find("snapshots-size: must be a size, e.g. 500M or 20G"), std::string::npos)
      << joined(bad);
  EXPECT_NE(joined(bad).find("picture-retain-days: must be a number of days"), std::string::npos)
      << joined(bad);
}

// advertise-url: the URL a fleet's other hosts reach this one at, http(s)://HOST:PORT alone.
TEST_F(Config, AdvertiseUrlIsAnEndpointsUrl) {
  const std::string camera = "[camera.a]\nurl = rtsp://127.0.0.1/a\n";
  ServiceConfig config;
  EXPECT_EQ(errors_of("[service]\nadvertise-url = https://gate-host.site.lan:9358/\n" + camera,
                      &config),
            std::vector<std::string>());
  EXPECT_EQ(config.fleet.advertise_url, "https://gate-host.site.lan:9358");
  EXPECT_EQ(errors_of("[service]\nadvertise-url = http://10.0.0.7:8080\n" + camera, &config),
            std::vector<std::string>());
  EXPECT_EQ(config.fleet.advertise_url, "http://10.0.0.7:8080");
  for (const char *bad : {"gate-host:9358", "ftp://gate-host:21", "http://user@gate-host:9358",
                          "http://gate-host:9358/page", "http://gate-host:9358/?a=1", "http://"}) {
    const auto errors = errors_of(std::string("[service]\nadvertise-url = ") + bad + "\n" + camera);
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_NE(errors[0].find("service:advertise-url: must be http://HOST:PORT or "
                             "https://HOST:PORT"),
              std::string::npos)
        << errors[0];
  }
}

// The page and the API beyond loopback: HTTPS with a usable certificate and key, or plain HTTP
// only when told so; on loopback plain HTTP as ever.
TEST_F(Config, PlainHttpListensBeyondLoopbackOnlyWhenToldSo) {
  const std::string camera = "[camera.a]\nurl = rtsp://127.0.0.1/a\n";
  for (const char *address : {"127.0.0.1:9358", "[::1]:9358", "localhost:0"})
    EXPECT_EQ(errors_of(std::string("[service]\nmetrics-address = ") + address + "\n" + camera),
              std::vector<std::string>())
        << address;
  const auto everyone = errors_of("[service]\nmetrics-address = 0.0.0.0:9358\n" + camera);
  ASSERT_EQ(everyone.size(), 1u);
  EXPECT_NE(everyone[0].find("cams.conf:service:metrics-address: 0.0.0.0:9358 is reached from "
                             "every network of this host"),
            std::string::npos)
      << everyone[0];
  EXPECT_NE(everyone[0].find("insecure-listen = true"), std::string::npos);
  const auto lan = errors_of("[service]\nmetrics-address = 192.168.7.2:80\n" + camera);
  ASSERT_EQ(lan.size(), 1u);
  EXPECT_NE(lan[0].find("the network of 192.168.7.2"), std::string::npos) << lan[0];
  EXPECT_EQ(
      errors_of("[service]\nmetrics-address = 0.0.0.0:9358\ninsecure-listen = true\n" + camera),
      std::vector<std::string>());

  if (!g_tls_backend_supports_tls(g_tls_backend_get_default()))
    GTEST_SKIP() << "no TLS backend (Debian's glib-networking)";
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  if (!make_certificate(cert, key)) GTEST_SKIP() << "no openssl";
  ServiceConfig config;
  EXPECT_EQ(errors_of("[service]\nmetrics-address = 0.0.0.0:9358\ntls-certificate = " + cert +
                          "\ntls-key = " + key + "\n" + camera,
                      &config),
            std::vector<std::string>());
  EXPECT_EQ(config.tls_certificate, cert);
  EXPECT_EQ(config.tls_key, key);
  const auto alone = errors_of("[service]\ntls-certificate = " + cert + "\n" + camera);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_NE(alone[0].find("tls-certificate and tls-key go together"), std::string::npos);
  // A key that is not the certificate's (a certificate in its place), a file that is not there.
  const auto mismatched =
      errors_of("[service]\ntls-certificate = " + cert + "\ntls-key = " + cert + "\n" + camera);
  ASSERT_EQ(mismatched.size(), 1u);
  EXPECT_NE(mismatched[0].find("tls-certificate: cannot use it with tls-key"), std::string::npos)
      << mismatched[0];
  // etcd's: the host's certificate with its key, a CA that is one.
  const auto fleet_alone = errors_of("[service]\nfleet-certificate = " + cert + "\n" + camera);
  ASSERT_EQ(fleet_alone.size(), 1u);
  EXPECT_NE(fleet_alone[0].find("fleet-certificate and fleet-key go together"), std::string::npos);
  EXPECT_EQ(errors_of("[service]\nfleet-ca = " + cert + "\nfleet-certificate = " + cert +
                      "\nfleet-key = " + key + "\n" + camera),
            std::vector<std::string>());
  const auto missing = errors_of("[service]\ntls-key = " + dir_ + "/none.pem\n" + camera);
  EXPECT_NE(joined(missing).find("no such file: " + dir_ + "/none.pem"), std::string::npos)
      << joined(missing);
  g_remove(cert.c_str());
  g_remove(key.c_str());
}

// etcd's login: a user with the file of its password, both or neither; the password never sent
// in clear beyond this host.
TEST_F(Config, AnEtcdLoginIsAUserAndAPasswordFileNeverInClearOnTheNetwork) {
  const std::string camera = "[camera.a]\nurl = rtsp://127.0.0.1/a\n";
  const std::string password = dir_ + "/etcd-password";
  ASSERT_TRUE(g_file_set_contents(password.c_str(), "s3cret\n", -1, nullptr));
  ServiceConfig config;
  EXPECT_EQ(errors_of("[service]\nfleet = http://127.0.0.1:2379\nfleet-user = site\n"
                      "fleet-password-file = " +
                          password + "\n",
                      &config),
            std::vector<std::string>());
  EXPECT_EQ(config.fleet.login.user, "site");
  EXPECT_EQ(config.fleet.login.password_file, password);
  const auto alone = errors_of("[service]\nfleet = http://127.0.0.1:2379\nfleet-user = site\n");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_NE(alone[0].find("fleet-user and fleet-password-file go together"), std::string::npos)
      << alone[0];
  const auto missing =
      errors_of("[service]\nfleet-user = site\nfleet-password-file = " + dir_ + "/none\n" + camera);
  EXPECT_NE(joined(missing).find("no such file: " + dir_ + "/none"), std::string::npos)
      << joined(missing);
  const auto clear = errors_of(
      "[service]\nfleet = http://127.0.0.1:2379,http://10.0.0.7:2379\n"
      "fleet-user = site\nfleet-password-file = " +
      password + "\n");
  ASSERT_EQ(clear.size(), 1u);
  EXPECT_NE(clear[0].find("http://10.0.0.7:2379 is plain HTTP beyond this host"), std::string::npos)
      << clear[0];
  EXPECT_EQ(clear[0].find("s3cret"), std::string::npos);
  EXPECT_EQ(errors_of("[service]\nfleet = https://10.0.0.7:2379\nfleet-user = site\n"
                      "fleet-password-file = " +
                      password + "\n"),
            std::vector<std::string>());
  // The process's login: the file read once; one that is empty is said, not sent.
  ASSERT_TRUE(g_file_set_contents(password.c_str(), "\n", -1, nullptr));
  EXPECT_NE(service::use_etcd_login({"site", password}).find("is empty"), std::string::npos);
  EXPECT_EQ(service::use_etcd_login({}), "");
  g_remove(password.c_str());
}

// The hosts' credential: read with the config (a reload reads it again), its first line; an
// empty or missing file is an error that names the file, never a secret.
TEST_F(Config, AHostCredentialIsTheFirstLineOfItsFile) {
  const std::string camera = "[camera.a]\nurl = rtsp://127.0.0.1/a\n";
  const std::string file = dir_ + "/host-credential";
  ASSERT_TRUE(g_file_set_contents(file.c_str(), "c0ffee\nignored\n", -1, nullptr));
  ServiceConfig config;
  EXPECT_EQ(errors_of("[service]\nhost-credential-file = " + file + "\n" + camera, &config),
            std::vector<std::string>());
  EXPECT_EQ(config.host_credential, "c0ffee");
  ASSERT_TRUE(g_file_set_contents(file.c_str(), "\n", -1, nullptr));
  const auto empty = errors_of("[service]\nhost-credential-file = " + file + "\n" + camera);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_NE(empty[0].find("host-credential-file: " + file + " is empty"), std::string::npos)
      << empty[0];
  g_remove(file.c_str());
  EXPECT_NE(joined(errors_of("[service]\nhost-credential-file = " + file + "\n" + camera))
                .find("no such file"),
            std::string::npos);
}

TEST_F(Config, EveryErrorIsReportedWithItsGroupAndKey) {
  UnreadableFiles unreadable(kLabelsFileLimit);
  const std::string text =
      "[service]\n"
      "url = rtsp://127.0.0.1/everyone\n"
      "metrics-address = example.com:80\n"
      "stall-timeout = 0\n"
      "[cameras]\n"
      "url = rtsp://127.0.0.1/x\n"
      "[camera.a]\n"
      "url = rtsp://127.0.0.1/a\n"
      "colour = red\n"
      "iou-threshold = 7\n"
      "method = best\n"
      "[camera.b]\n"
      "url = rtsp://127.0.0.1/b\n"
      "[camera.b]\n"
      "url = rtsp://127.0.0.1/b2\n"
      "[camera.c]\n"
      "url = rtsp://127.0.0.1/c\n"
      "detector = cvdetect model=/nonexistent/people.xml\n"
      "labels-file = /dev/zero\n"
      "[camera.d]\n"
      "url = rtsp://127.0.0.1/d\n"
      "metrics-address = 127.0.0.1:1\n"
      "url = rtsp://127.0.0.1/d2\n"
      "[camera.e]\n"
      "detector = nosuchdetector\n"
      "[camera.f]\n"
      "url = /nonexistent/video.avi\n"
      "reconnect-initial = 10\n"
      "reconnect-max = 2\n"
      "reconnect-attempts = some\n"
      "enabled = yes\n"
      "json = " +
      dir_ +
      "/shared.jsonl\n"
      "[camera.g]\n"
      "url = nosuchscheme://127.0.0.1/g\n"
      "json = " +
      dir_ +
      "/shared.jsonl\n"
      "source = videotestsrc\n"
      "mqtt-topic = site/#\n"
      "[camera.bad name]\n"
      "url = rtsp://127.0.0.1/h\n";
  std::vector<std::string> errors = errors_of(text);
  const std::vector<std::string> expected = {
      "cams.conf:camera.b: given twice (lines 12 and 14)",
      "cams.conf:camera.d:url: given twice (lines 21 and 23)",
      "cams.conf:service:url: a camera's own key: it goes in a [camera.NAME] group",
      "cams.conf:service:metrics-address: the host must be an IP address or localhost, not "
      "\"example.com\"",
      "cams.conf:service:stall-timeout: must be at least 0.1 s, not 0",
      "cams.conf:camera.a:colour: unknown key",
      "cams.conf:camera.a:iou-threshold: is out of range: \"7\" (0 to 1)",
      "cams.conf:camera.a:method: must be one of greedy, matrix, soft, weighted, group, not "
      "\"best\"",
      "cams.conf:camera.c:detector: model \"/nonexistent/people.xml\" cannot be read: No such "
      "file or directory",
      "cams.conf:camera.c:labels-file: cannot read \"/dev/zero\": is not a regular file (a "
      "device, FIFO or socket is never read)",
      "cams.conf:camera.d:metrics-address: a [service] key",
      "cams.conf:camera.e: no url (or source): what does this camera show?",
      "cams.conf:camera.f:enabled: must be true or false, not \"yes\"",
      "cams.conf:camera.f:reconnect-attempts: must be unlimited or a count of 0 or more, not "
      "\"some\"",
      "cams.conf:camera.f:url: no such file: /nonexistent/video.avi",
      "cams.conf:camera.f:reconnect-max: must be at least reconnect-initial",
      "cams.conf:camera.g:source: give url or source, not both",
      "cams.conf:camera.g:url: no installed element reads nosuchscheme:// URIs",
      "cams.conf:camera.g:json: camera f writes " + dir_ + "/shared.jsonl already",
      "cams.conf:camera.g:mqtt-topic: must not hold the wildcards + or #: \"site/#\"",
      "cams.conf:camera.e:detector: no element \"nosuchdetector\"",
      "cams.conf:cameras: unknown group (groups are [service] and [camera.NAME])",
      "cams.conf:camera.bad name: a camera's name is 1 to 64 letters, digits, - and _",
  };
  for (const std::string &e : expected) {
    auto found = std::find(errors.begin(), errors.end(), e);
    EXPECT_NE(found, errors.end()) << "missing: " << e << "\nall:\n" << joined(errors);
    if (found != errors.end()) errors.erase(found);
  }
  EXPECT_TRUE(errors.empty()) << "unexpected:\n" << joined(errors);
}

// A source begins with an element that takes no input; one whose pads come later (rtspsrc) is
// followed by elements that wait for them.
TEST_F(Config, ASourceBeginsWithASourceElement) {
  EXPECT_EQ(errors_of("[camera.a]\nsource = rtspsrc location=rtsp://127.0.0.1:1/a ! rtph264depay "
                      "! h264parse ! avdec_h264\n"),
            std::vector<std::string>());
  // Ending in caps, as a webcam's mode is given.
  EXPECT_EQ(errors_of("[camera.a]\nsource = videotestsrc ! video/x-raw,width=320,height=240\n"),
            std::vector<std::string>());
  EXPECT_EQ(errors_of("[camera.a]\nsource = videoconvert\ncuda-context = mine\n"),
            (std::vector<std::string>{
                "cams.conf:camera.a:cuda-context: must be shared or per-camera, not \"mine\"",
                "cams.conf:camera.a:source: must begin with a source element (rtspsrc, v4l2src, "
                "videotestsrc...)"}));
}

TEST_F(Config, ASecondCameraOnTheSameJsonFileIsAnError) {
  const std::string json = "json = " + dir_ + "/all.jsonl\n";
  const std::vector<std::string> errors =
      errors_of("[camera.a]\nurl = rtsp://127.0.0.1/a\n" + json +
                "[camera.b]\nurl = rtsp://127.0.0.1/b\n" + json);
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0], "cams.conf:camera.b:json: camera a writes " + dir_ + "/all.jsonl already");
}

// A fleet host's cameras, each read alone from etcd, are checked together when it runs them.
TEST_F(Config, CamerasReadAloneStillWriteAJsonFileEach) {
  CameraConfig a, b, c;
  a.name = "a", b.name = "b", c.name = "c";
  a.json = b.json = dir_ + "/all.jsonl";
  c.json = dir_ + "/c.jsonl";
  std::vector<std::string> errors;
  EXPECT_TRUE(cameras_run_together({a, c}, "etcd", &errors));
  EXPECT_TRUE(errors.empty()) << joined(errors);
  EXPECT_FALSE(cameras_run_together({a, b, c}, "etcd", &errors));
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0], "etcd:camera.b:json: camera a writes " + dir_ + "/all.jsonl already");
}

TEST_F(Config, MqttTopicWithoutABrokerAndNoCamerasAreErrors) {
  EXPECT_EQ(errors_of("[camera.a]\nurl = rtsp://127.0.0.1/a\nmqtt-topic = site/a\n"),
            std::vector<std::string>{"cams.conf:camera.a:mqtt-topic: needs mqtt-address in "
                                     "[service]"});
  EXPECT_EQ(errors_of("[service]\ndetector = cvdetect\n"),
            std::vector<std::string>{"cams.conf: no camera: add a [camera.NAME] group with its "
                                     "url"});
}

TEST_F(Config, GpusAreTheVisibleOnesUnlessTheConfigNamesSome) {
  const std::string camera = "[camera.a]\nurl = rtsp://127.0.0.1/a\n";
  ServiceConfig config;
  ASSERT_EQ(errors_of(camera, &config, 4), std::vector<std::string>{});
  EXPECT_EQ(config.gpus, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(config.gpu_failure, "move");
  ASSERT_EQ(errors_of(camera, &config, 0), std::vector<std::string>{});
  EXPECT_TRUE(config.gpus.empty());  // no GPU: every camera on the CPU
  ASSERT_EQ(errors_of("[service]\ngpus = 2,0\ngpu-failure = cpu\n" + camera, &config, 4),
            std::vector<std::string>{});
  EXPECT_EQ(config.gpus, (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(config.gpu_failure, "cpu");
  ASSERT_EQ(errors_of("[service]\ngpus = none\n" + camera, &config, 4), std::vector<std::string>{});
  EXPECT_TRUE(config.gpus.empty());
}

// A camera's gpu-id is a number of its config, from its group or [service]'s, not one of
// cudanms's properties as text.
TEST_F(Config, GpuIdIsTheCamerasGpuNumber) {
  ServiceConfig config;
  ASSERT_EQ(errors_of("[service]\ngpu-id = 1\n"
                      "[camera.a]\nurl = rtsp://127.0.0.1/a\ngpu-id = 2\n"
                      "[camera.b]\nurl = rtsp://127.0.0.1/b\n",
                      &config, 3),
            std::vector<std::string>{});
  ASSERT_EQ(config.cameras.size(), 2u);
  EXPECT_EQ(config.cameras[0].gpu_id, 2u);
  EXPECT_EQ(config.cameras[1].gpu_id, 1u);
  EXPECT_EQ(config.cameras[0].elements.count("gpu-id"), 0u);
  ASSERT_EQ(errors_of("[camera.a]\nurl = rtsp://127.0.0.1/a\n", &config, 3),
            std::vector<std::string>{});
  EXPECT_FALSE(config.cameras[0].gpu_id.has_value());  // placed by the service
}

TEST_F(Config, AGpuThatDoesNotExistIsAnError) {
  EXPECT_EQ(errors_of("[service]\ngpus = 0,3\ngpu-failure = sideways\n"
                      "[camera.a]\nurl = rtsp://127.0.0.1/a\ngpu-id = 2\n"
                      "[camera.b]\nurl = rtsp://127.0.0.1/b\ngpu-id = 1\n",
                      nullptr, 2),
            (std::vector<std::string>{
                "cams.conf:service:gpu-failure: must be move or cpu, not \"sideways\"",
                "cams.conf:camera.a:gpu-id: GPU 2 does not exist (2 visible: 0 to 1)",
                "cams.conf:service:gpus: GPU 3 does not exist (2 visible: 0 to 1)"}));
  EXPECT_EQ(errors_of("[service]\ngpu-id = 0\ngpus = 1,1\n[camera.a]\nurl = rtsp://127.0.0.1/a\n"),
            (std::vector<std::string>{
                "cams.conf:service:gpu-id: GPU 0 does not exist (no CUDA device visible)",
                "cams.conf:service:gpus: must be all, none or GPU indices once each (0,2,3), not "
                "\"1,1\""}));
}

TEST_F(Config, SyntaxErrorsNameTheLine) {
  const std::vector<std::string> errors = errors_of("[camera.a]\nurl rtsp://127.0.0.1/a\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("cams.conf: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("url rtsp://127.0.0.1/a"), std::string::npos) << errors[0];
}

TEST_F(Config, AConfigThatCouldNeverBeReadWholeIsRefusedAtOnce) {
  UnreadableFiles files(kConfigFileLimit);
  for (const auto &[path, why] : files.cases()) {
    ServiceConfig config;
    std::vector<std::string> errors;
    EXPECT_FALSE(load_config(path, &config, &errors));
    ASSERT_EQ(errors.size(), 1u) << path;
    EXPECT_EQ(errors[0].rfind(path + ": cannot read the config: ", 0), 0u) << errors[0];
    EXPECT_NE(errors[0].find(why), std::string::npos) << errors[0];
  }
}

TEST_F(Config, UrlsOfTheCommandLineAreCamerasInOrder) {
  ServiceConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(parse_config(config_for_urls({"rtsp://127.0.0.1:1/a", "rtsp://127.0.0.1:2/b"},
                                           {{"detector", "cvdetect"}, {"metrics-address", ""}}),
                           "command line", &config, &errors))
      << joined(errors);
  ASSERT_EQ(config.cameras.size(), 2u);
  EXPECT_EQ(config.cameras[0].name, "cam1");
  EXPECT_EQ(config.cameras[1].uri, "rtsp://127.0.0.1:2/b");
  EXPECT_EQ(config.cameras[1].detector, "cvdetect");
  EXPECT_EQ(config.metrics_address, "");
}

}  // namespace
}  // namespace cudanms::service
