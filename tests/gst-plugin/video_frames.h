// Real frames for the detector tests: Megamind.avi decoded by GStreamer, pushed through a
// GstHarness as raw video.
#pragma once

#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <gst/video/video.h>

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "gst-plugin/cv_support.h"

namespace cudanms::testing {

// Megamind.avi's first n frames as BGR, decoded by GStreamer (the GPU host's OpenCV has no
// videoio).
inline std::vector<cv::Mat> megamind_frames(int n) {
  std::vector<cv::Mat> frames;
  GstElement *pipeline = gst_parse_launch(
      ("filesrc location=\"" + opencv_sample("Megamind.avi") +
       "\" ! decodebin ! videoconvert ! video/x-raw,format=BGR ! appsink name=sink sync=false")
          .c_str(),
      nullptr);
  if (!pipeline) return frames;
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  while (static_cast<int>(frames.size()) < n) {
    GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 30 * GST_SECOND);
    if (!sample) break;
    GstVideoInfo info;
    GstVideoFrame frame;
    if (gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) &&
        gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample), GST_MAP_READ)) {
      frames.push_back(cv::Mat(info.height, info.width, CV_8UC3,
                               GST_VIDEO_FRAME_PLANE_DATA(&frame, 0),
                               GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0))
                           .clone());
      gst_video_frame_unmap(&frame);
    }
    gst_sample_unref(sample);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return frames;
}

inline GstHarness *harness_for(const std::string &description, const cv::Mat &frame,
                        const char *format = "BGR") {
  GstHarness *h = gst_harness_new_parse(description.c_str());
  gst_harness_set_src_caps_str(
      h, ("video/x-raw,format=" + std::string(format) + ",width=" + std::to_string(frame.cols) +
          ",height=" + std::to_string(frame.rows) + ",framerate=25/1")
             .c_str());
  return h;
}

inline GstBuffer *buffer_of(const cv::Mat &frame) {
  return gst_buffer_new_memdup(frame.data, frame.total() * frame.elemSize());
}

}  // namespace cudanms::testing
