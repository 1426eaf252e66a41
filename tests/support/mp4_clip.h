// An MP4 clip (H.264 or H.265) decoded whole, as a player would: its frames and their span, whether
// it starts on a keyframe; for the tests of the service's event clips.
#pragma once

#include <gst/gst.h>

#include <algorithm>
#include <string>

namespace cudanms::testing {

struct DecodedClip {
  int frames = 0, units = 0;                           // decoded, and demuxed
  GstClockTime first = GST_CLOCK_TIME_NONE, last = 0;  // the decoded frames' PTS
  bool starts_on_keyframe = false;
  double seconds() const {
    return GST_CLOCK_TIME_IS_VALID(first) ? static_cast<double>(last - first) / GST_SECOND : 0;
  }
};

// Runs `pipeline` (taken) to its end: true at an end of stream, false at an error or after
// `timeout`.
inline bool run_to_end(GstElement *pipeline, GstClockTime timeout = 30 * GST_SECOND) {
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, timeout, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool whole = end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
  if (end) gst_message_unref(end);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return whole;
}

// A probe on `element`'s pad `pad`, calling `on_buffer(buffer, data)` for each buffer.
inline void on_buffers(GstElement *pipeline, const char *element, const char *pad,
                       void (*on_buffer)(GstBuffer *, gpointer), gpointer data) {
  struct Call {
    void (*on_buffer)(GstBuffer *, gpointer);
    gpointer data;
  };
  GstElement *e = gst_bin_get_by_name(GST_BIN(pipeline), element);
  GstPad *p = gst_element_get_static_pad(e, pad);
  gst_pad_add_probe(
      p, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer call) {
        auto *c = static_cast<Call *>(call);
        c->on_buffer(GST_PAD_PROBE_INFO_BUFFER(info), c->data);
        return GST_PAD_PROBE_OK;
      },
      new Call{on_buffer, data}, [](gpointer call) { delete static_cast<Call *>(call); });
  gst_object_unref(p);
  gst_object_unref(e);
}

// The clip at `path` (`codec`: h264 or h265) decoded to its end; false on any error.
inline bool decode_clip(const std::string &path, DecodedClip *out,
                        const std::string &codec = "h264") {
  gchar *location = g_strescape(path.c_str(), nullptr);
  GstElement *pipeline =
      gst_parse_launch(("filesrc location=\"" + std::string(location) + "\" ! qtdemux ! " + codec +
                        "parse name=parse ! avdec_" + codec + " ! fakesink name=sink")
                           .c_str(),
                       nullptr);
  g_free(location);
  if (!pipeline) return false;
  on_buffers(
      pipeline, "parse", "src",
      [](GstBuffer *unit, gpointer data) {
        auto *d = static_cast<DecodedClip *>(data);
        if (d->units++ == 0)
          d->starts_on_keyframe = !GST_BUFFER_FLAG_IS_SET(unit, GST_BUFFER_FLAG_DELTA_UNIT);
      },
      out);
  on_buffers(
      pipeline, "sink", "sink",
      [](GstBuffer *frame, gpointer data) {
        auto *d = static_cast<DecodedClip *>(data);
        if (!GST_CLOCK_TIME_IS_VALID(d->first)) d->first = GST_BUFFER_PTS(frame);
        d->last = std::max(d->last, GST_BUFFER_PTS(frame));
        d->frames++;
      },
      out);
  return run_to_end(pipeline);
}

}  // namespace cudanms::testing
