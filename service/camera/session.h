// One connection of a camera: a pipeline of its own from the source to the outputs, built when
// the camera (re)connects and torn down when it fails or stops. Each camera's pipeline has its
// own elements, streaming threads and bus, so that nothing one camera does reaches another's.
//
//   uridecodebin uri=URL (or the camera's source) ! queue leaky ! videoconvert ! DETECTOR !
//   cudanms ! [boxtrack ! [boxcount !]] fakesink
//                                      | queue ! [boxoverlay !] videoconvert ! ENCODER ! h264parse
//                                        ! splitmuxsink
//
// A probe after the last of cudanms, boxtrack and boxcount hands every frame to the camera's
// outputs (JSON lines, MQTT, counts). With event clips, taps on the decoder's input (the camera's
// own H.264/H.265) and the recording's parser feed the camera's EventClips.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "config.h"
#include "cuda_contexts.h"
#include "outputs.h"

namespace cudanms::service {

// A camera's MP4 segments, CAMERA-NNNNN-YYYYmmdd-HHMMSS.mp4, numbered on across connections
// and restarts of the service (from the highest number already in the directory).
class Recording {
 public:
  Recording(std::string dir, std::string camera);
  std::string next_path();  // on the streaming thread of whichever connection records

 private:
  const std::string dir_, camera_;
  std::atomic<int> next_{0};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // What the camera hears of its connection, on the main loop.
  struct Events {
    std::function<void()> first_frame;
    std::function<void(const std::string &reason)> failed;  // an error, or the stream ended
    // An element gave up on its GPU (a CUDA failure; it runs on on the CPU).
    std::function<void(const std::string &reason)> gpu_failed;
  };

  // Builds the pipeline and sets it playing, on its GPU: the CUDA context `contexts` gives for
  // it (none given: its elements find their own, on device 0); null with the reason when it
  // cannot.
  static std::shared_ptr<Session> start(const CameraConfig &config, const CameraRun &run,
                                        std::shared_ptr<CameraOutputs> outputs,
                                        std::shared_ptr<Recording> recording,
                                        CudaContexts *contexts, Events events, std::string *error);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Ends the connection off the main loop: the recording gets an end of stream (at most
  // kFinaliseSeconds) so that its segment is finalised, then `finalised` runs on the main loop;
  // the pipeline then stops on that thread (its source's connection closed), then `closed` runs
  // on the main loop; the session lives until it has.
  void stop(std::function<void()> finalised, std::function<void()> closed);
  gint64 started_us() const { return started_us_; }
  // The camera's element keys boxcount has (new lines and zones) while it runs; nothing without a
  // boxcount.
  void set_counting(const std::map<std::string, std::string> &elements);

  // Bytes of frames waiting in the connection's queues now (the intake's, the recording's, the
  // source's own), in host or GPU memory.
  guint64 queued_bytes() const;
  // The detector's "device" (gstcudanmsdetector.h): where it runs, once started.
  std::string detector_device() const;

  // Sessions whose pipelines have not stopped yet (the service waits for them at exit).
  static int stopping();

  static constexpr double kFinaliseSeconds = 3.0;

 private:
  Session() = default;
  // Start's steps on the parsed pipeline: the chain's elements set and their counts resumed, the
  // pads' probes; the camera's source; the recording's segments.
  void set_up_chain(const CameraConfig &config, const CameraRun &run, CudaContexts *contexts,
                    int gpu);
  void set_up_source(const CameraConfig &config, int gpu);
  void set_up_recording(const CameraConfig &config);
  static gboolean on_bus(GstBus *bus, GstMessage *message, gpointer data);
  static GstPadProbeReturn on_output(GstPad *pad, GstPadProbeInfo *info, gpointer data);
  static GstPadProbeReturn on_intake(GstPad *pad, GstPadProbeInfo *info, gpointer data);

  std::string camera_;
  GstElement *pipeline_ = nullptr;
  GstElement *intake_ = nullptr;  // the queue after the source: where an end of stream enters
  bool recording_ = false;
  bool ended_ = false;  // the pipeline posted EOS: its outputs are final
  guint bus_watch_ = 0;
  std::shared_ptr<CameraOutputs> outputs_;
  std::shared_ptr<Recording> segments_;
  Events events_;
  gint64 started_us_ = 0;
  std::atomic<bool> first_frame_seen_{false};
  std::atomic<bool> detached_{false};  // finalised: frames no longer reach the outputs
  GstSegment segment_;                 // the stream's, on the streaming thread
  gint64 chain_start_us_ = 0;          // the frame leaving the intake queue, same thread
};

}  // namespace cudanms::service
