// The camera service's configuration: a GLib key file (INI, as deepstream-app's) with a
// [service] group and one [camera.NAME] group per camera. Every camera key may also stand in
// [service], as the default of every camera. Keys are named like the element properties they
// feed (kebab-case): the service's own keys are a table (config_keys.h), and every other camera
// key goes through to the camera's elements by name (cudanms's, boxtrack's, boxcount's), which
// check it themselves (element_check.h): reading a config loads no plugin. Checking collects
// every error before refusing, each as "FILE:GROUP:KEY: reason".
#pragma once

#include <glib.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "camera_run.h"
#include "etcd.h"

namespace cudanms::service {

// One camera, its settings resolved ([camera.NAME] over [service] over the defaults).
struct CameraConfig {
  std::string name;
  bool enabled = true;
  std::string uri;     // from `url`: a URI (rtsp://, file://, http://), or a file's path as a URI
  std::string source;  // or a gst-launch description of raw video (a webcam, a custom decoder)
  std::string detector;
  // The properties of the camera's chain (cudanms, boxtrack, boxcount), by name, as the config
  // gives them: every key that is not the service's own. The pipeline sets each on the elements
  // that have it.
  std::map<std::string, std::string> elements;
  // The camera's GPU, which every element with a gpu-id property gets: the config's gpu-id (it
  // fixes the GPU), else where the service placed it; none: not placed yet, or the CPU.
  std::optional<unsigned> gpu_id;
  bool tracker = true;             // boxtrack after cudanms
  int latency_ms = 200;            // rtspsrc's jitter buffer
  std::string protocols = "tcp";   // rtspsrc's lower transports
  std::string json;                // JSON lines file, appended to; "" for none
  std::string format = "cudanms";  // of the JSON lines and MQTT messages: cudanms or dlstreamer
  std::string mqtt_topic;          // the detections' topic ("" without MQTT)
  std::string status_topic;        // the retained state's topic ("" without MQTT)
  std::string mqtt_address;        // the broker, from [service] ("" for none)
  std::string record_dir;          // MP4 segments NAME-NNNNN.mp4 in it; "" for none
  double record_segment_s = 60;
  std::string record_encoder = "x264enc speed-preset=ultrafast tune=zerolatency key-int-max=30";
  bool record_boxes = true;        // draw the kept boxes (boxoverlay) into the recording
  double snapshot_interval_s = 1;  // between the operator page's pictures (web.h); 0: none
  double picture_retain_days = 0;  // its events' pictures older than this are removed; 0: kept
  guint64 picture_retain_bytes = 0;  // the most bytes of its pictures, the oldest removed; 0: any
  bool clips = false;       // a clip of each event beside its picture (event_clips.h)
  double clip_pre_s = 5;    // of a clip before its first event
  double clip_post_s = 5;   // after its last
  double reconnect_initial_s = 1;
  double reconnect_max_s = 30;
  long reconnect_attempts = -1;  // -1: unlimited; 0: never reconnect
  double stall_timeout_s = 10;
  bool share_cuda_context = true;  // cuda-context: one context per GPU for every camera

  // Every setting as the config resolved it: two cameras with equal settings run the same way
  // (what SIGHUP compares to decide whether a camera restarts).
  std::map<std::string, std::string> settings;
  // The keys the camera's own group gives (the others are [service]'s defaults and the config's
  // own), for errors found later to name the group they stand in.
  std::set<std::string> own_keys;

  // The camera's lines by name, each as its points' text (in pixels or, ending in
  // "normalized", in 0..1): parsed once, when the config is read, for telling which lines a
  // reload left as they were (their counts go on) and naming them in the counts file.
  std::map<std::string, std::string> line_shapes;

  // boxcount after boxtrack: lines or zones to count.
  bool counting() const;
};

// A secret's file (a password, a credential): its first line into *secret, or false with why (the
// secret itself never said).
bool read_secret(const std::string &path, std::string *secret, std::string *why);

// A camera's name: 1 to 64 letters, digits, '-' and '_' (it names files, topics and etcd keys).
bool valid_camera_name(const std::string &name);

// A host of a fleet (docs/fleet.md): its cameras are kept in etcd under
// PREFIX/SITE/cameras/NAME, and the hosts of a site share them out through leases.
struct FleetSettings {
  std::vector<std::string> endpoints;  // etcd's, http(s)://HOST:PORT; none: not a fleet host
  std::string prefix = "/cudanms";
  std::string site = "default";
  std::string host_id;  // default: the machine's name
  // The URL the other hosts (and the page's links) reach this host's endpoint at; "": the
  // address it listens on, an any-address (0.0.0.0, ::) as the machine's name (advertised_url).
  std::string advertise_url;
  int capacity = 8;     // cameras per GPU (the CPU counts as one)
  double ttl_s = 5;     // the lease's: a host silent this long loses its cameras
  EtcdTls tls;          // etcd over TLS: its CA, this host's client certificate and key
  EtcdLogin login;      // etcd's user this host logs in as, and its password's file

  bool on() const { return !endpoints.empty(); }
  std::string folder() const { return prefix + "/" + site + "/"; }  // every key of the site
  // PREFIX/SITE/KIND/NAME: KIND is cameras, hosts, owners or state; "" NAME: the folder.
  std::string key(const std::string &kind, const std::string &name = "") const {
    return folder() + kind + "/" + name;
  }
};

struct ServiceConfig {
  std::string metrics_address = "127.0.0.1:9358";  // "" for none
  // The page's and the API's HTTPS: its certificate and private key (PEM), the certificates a
  // fleet's host trusts in the others' (tls-ca; "": the system's), and whether plain HTTP may
  // listen beyond loopback all the same.
  std::string tls_certificate, tls_key, tls_ca;
  // The secret a fleet's hosts give one another (the first line of host-credential-file): their
  // /api/host/ questions carry it, and a host with one answers no question without it.
  std::string host_credential_file, host_credential;
  bool insecure_listen = false;
  std::string mqtt_address;  // "" for none
  std::string mqtt_prefix = "cudanms";
  // The GPUs cameras are placed on (`gpus`; every visible one by default); empty: the CPU. A
  // camera's own gpu-id fixes its GPU instead.
  std::vector<unsigned> gpus;
  bool all_gpus = true;  // `gpus = all`: resolved against the visible GPUs
  // A GPU's failure: "move" its cameras to the least loaded GPU left (the CPU when none is), or
  // run them on the "cpu".
  std::string gpu_failure = "move";
  // A worker process per GPU ("per-gpu"), every camera in this one ("one"), or "" for per-gpu
  // where cameras may run on more than one GPU (supervisor.h).
  std::string workers;
  std::string web_auth;        // the key the operator's page gives to change the config; "": none
  std::string history;         // the events' history (SQLite, event_history.h); "": none
  std::string snapshots;       // each counting event's picture under DIR/CAMERA/ID.jpg; "": none
  guint64 snapshots_size = 0;  // the most bytes of pictures there, the oldest removed; 0: any
  FleetSettings fleet;
  std::vector<CameraConfig> cameras;
  guint64 generation = 0;  // a worker's: the supervisor's assignment it comes from
  // A worker's, from the same assignment (not the config): each camera's counts file and fleet
  // store, by name.
  std::map<std::string, CameraRun> runs;

  // Whether the cameras run in a worker process per GPU.
  bool per_gpu_workers() const;
};

// What only the elements can say of a config (check_elements, element_check.h): run over every
// camera read, those with errors too, so that one pass finds every error.
using ElementsCheck =
    std::function<bool(const std::vector<CameraConfig> &cameras, const std::string &name,
                       std::vector<std::string> *errors)>;

// Reads and checks the key file at `path` (at most kConfigFileLimit bytes). On any error: false,
// and every error found, each "FILE:GROUP:KEY: reason" (GROUP and KEY empty where the error is
// the file's or the group's). GPU indices (gpus, gpu-id) are checked against `visible_gpus`
// (-1: the CUDA devices this process sees, CUDA_VISIBLE_DEVICES applied). `text_read`: the
// file's text, what `config` was parsed from. `need_camera`: a file without a camera (and
// without `fleet`) is an error; the service's own files may have none (a worker with nothing
// to run, a fleet host that owns no camera yet). `check`: the elements' check too.
bool load_config(const std::string &path, ServiceConfig *config, std::vector<std::string> *errors,
                 int visible_gpus = -1, std::string *text_read = nullptr, bool need_camera = true,
                 const ElementsCheck &check = nullptr);

// The same from a key file's text; `name` stands for FILE in the errors.
bool parse_config(const std::string &text, const std::string &name, ServiceConfig *config,
                  std::vector<std::string> *errors, int visible_gpus = -1, bool need_camera = true,
                  const ElementsCheck &check = nullptr);

// What only holds across cameras, each checked alone before (a fleet host's, from etcd): a JSON
// file written by one camera alone. False with an error a camera that breaks it, `name` for FILE.
bool cameras_run_together(const std::vector<CameraConfig> &cameras, const std::string &name,
                          std::vector<std::string> *errors);

// The key file of the command-line form: one camera a URL (cam1, cam2, ...), the options as
// [service] keys.
std::string config_for_urls(const std::vector<std::string> &urls,
                            const std::map<std::string, std::string> &service_keys);

// One line a key: name, where it may stand and what it means (for --help-config).
std::string describe_keys();

}  // namespace cudanms::service
