#include "pipelinestop.h"

#include <vector>

// The elements are collected first, each with a reference, and collected again from the start
// when the bin changed meanwhile (uridecodebin and rtspsrc add and remove theirs as they run).
void gst_cv_for_each_element(GstElement *bin, const std::function<void(GstElement *)> &visit) {
  std::vector<GstElement *> elements;
  GstIterator *it = gst_bin_iterate_recurse(GST_BIN(bin));
  GValue item = G_VALUE_INIT;
  for (bool done = false; !done;) {
    switch (gst_iterator_next(it, &item)) {
      case GST_ITERATOR_OK:
        elements.push_back(GST_ELEMENT(g_value_dup_object(&item)));
        g_value_reset(&item);
        break;
      case GST_ITERATOR_RESYNC:
        for (GstElement *e : elements) gst_object_unref(e);
        elements.clear();
        gst_iterator_resync(it);
        break;
      default:
        done = true;
    }
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  for (GstElement *e : elements) {
    visit(e);
    gst_object_unref(e);
  }
}

// Wakes every rtpjitterbuffer's pushing thread before the pipeline leaves PLAYING. In GStreamer
// 1.22 a jitterbuffer that has an end of stream (an RTSP camera's BYE, its clip's end) waits for
// its timers to drain, on the condition its timer thread waits on too. Paused (on the way to
// NULL) the timer thread no longer drains them, and the one signal of the flush that follows can
// wake it rather than the pusher, which sleeps on holding its pad's stream lock: the state change
// never returns, and the connection's threads and sockets stay (found by
// TwoHundredReconnectionsLeakNothing under load). Flush-start events sent while it still plays
// set it flushing and signal again, until its task has stopped pushing (bounded).
void gst_cv_flush_jitterbuffers(GstElement *pipeline) {
  gst_cv_for_each_element(pipeline, [](GstElement *element) {
    GstElementFactory *factory = gst_element_get_factory(element);
    if (!factory || g_strcmp0(GST_OBJECT_NAME(factory), "rtpjitterbuffer")) return;
    GstPad *sink = gst_element_get_static_pad(element, "sink");
    GstPad *src = gst_element_get_static_pad(element, "src");
    // Its timers run out within its latency (rtspsrc's default: 2 s).
    for (int tries = 0; sink && src && tries < 150; ++tries) {
      gst_pad_send_event(sink, gst_event_new_flush_start());
      if (gst_pad_get_task_state(src) != GST_TASK_STARTED) break;
      g_usleep(20 * 1000);
    }
    if (sink) gst_object_unref(sink);
    if (src) gst_object_unref(src);
  });
}
