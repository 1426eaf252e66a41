#include "snapshot.h"

#include <gst/cudanms/cudanmsmeta.h>

namespace {

struct Pace {
  gint64 interval_us;
  std::function<bool()> wanted;
  gint64 next_us = 0;  // the streaming thread's alone
};

GstPadProbeReturn on_frame(GstPad *, GstPadProbeInfo *, gpointer data) {
  auto *pace = static_cast<Pace *>(data);
  const gint64 now = g_get_monotonic_time();
  if (now < pace->next_us || (pace->wanted && !pace->wanted())) return GST_PAD_PROBE_DROP;
  pace->next_us = now + pace->interval_us;
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_event_frame(GstPad *, GstPadProbeInfo *info, gpointer) {
  const GstCudaNmsCountsMeta *counts =
      gst_buffer_get_cuda_nms_counts_meta(GST_PAD_PROBE_INFO_BUFFER(info));
  return counts && counts->n_events > 0 ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
}

using Picture = std::function<void(GstBuffer *)>;

void on_handoff(GstElement *, GstBuffer *jpeg, GstPad *, gpointer data) {
  (*static_cast<Picture *>(data))(jpeg);
}

/* The branch's intake probe (`pass`, its `data` freed with `free`) and its pictures' callback;
 * false when @bin has no such branch. */
bool attach(GstElement *bin, const std::string &name, GstPadProbeCallback pass, gpointer data,
            GDestroyNotify free, Picture picture) {
  GstElement *sink = gst_bin_get_by_name(GST_BIN(bin), name.c_str());
  GstElement *queue = gst_bin_get_by_name(GST_BIN(bin), (name + "-intake").c_str());
  const bool found = sink && queue;
  if (found) {
    GstPad *pad = gst_element_get_static_pad(queue, "sink");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, pass, data, free);
    data = nullptr;
    gst_object_unref(pad);
    g_signal_connect_data(
        sink, "handoff", G_CALLBACK(on_handoff), new Picture(std::move(picture)),
        [](gpointer p, GClosure *) { delete static_cast<Picture *>(p); },
        static_cast<GConnectFlags>(0));
  }
  if (data && free) free(data);
  if (sink) gst_object_unref(sink);
  if (queue) gst_object_unref(queue);
  return found;
}

}  // namespace

std::string gst_cv_snapshot_branch(const std::string &tee, const std::string &name, bool events) {
  // With NVIDIA's GStreamer elements here, frames may be in GPU memory: cudadownload brings
  // them to the host (and passes host frames through; the videoconvert before it gives it a
  // format it takes). The frame is made small first: the CPU's work is what a picture costs
  // the detection path (on an H200 the download alone cost nothing measurable, drawing and
  // encoding at 1080p 9 % of 32 streams' frames/s), and the boxes' metas scale with it.
  // videoconvert gives boxoverlay a format it draws on where the frame's is not one.
  GstElementFactory *download = gst_element_factory_find("cudadownload");
  const std::string to_host = download ? "videoconvert ! cudadownload ! " : "";
  if (download) gst_object_unref(download);
  // The latest frame waits for a paced picture; a few event frames for theirs.
  const std::string waiting = events ? "8" : "1";
  return tee + ". ! queue name=" + name + "-intake leaky=downstream max-size-buffers=" + waiting +
         " max-size-time=0 max-size-bytes=0 ! " + to_host +
         "videoscale ! video/x-raw,width=[16,640],pixel-aspect-ratio=1/1 ! videoconvert ! "
         "boxoverlay" +
         (events ? " highlight-events=true" : "") +
         " ! jpegenc quality=80 ! fakesink name=" + name +
         " sync=false async=false signal-handoffs=true";
}

bool gst_cv_snapshot_attach(GstElement *bin, const std::string &name, double interval_s,
                            std::function<void(GstBuffer *jpeg)> picture,
                            std::function<bool()> wanted) {
  return attach(
      bin, name, on_frame, new Pace{static_cast<gint64>(interval_s * 1e6), std::move(wanted)},
      [](gpointer data) { delete static_cast<Pace *>(data); }, std::move(picture));
}

bool gst_cv_event_snapshot_attach(GstElement *bin, const std::string &name,
                                  std::function<void(GstBuffer *jpeg)> picture) {
  return attach(bin, name, on_event_frame, nullptr, nullptr, std::move(picture));
}
