/**
 * SECTION:element-boxtrack
 * @title: boxtrack
 *
 * Tracks the boxes cudanms kept: each box that belongs to a confirmed track gets that track's
 * id, 64-bit, unique in the stream and never given twice. The id goes on the frame's
 * #GstCudaNmsResultMeta (track_ids) and on the box's #GstVideoRegionOfInterestMeta as DL
 * Streamer's gvatrack writes it: a param structure "object_id" with an int field "id", which DL
 * Streamer's own elements read; jsonmetawriter and metapublish write it ("track_id" in cudanms's
 * JSON, "id" in DL Streamer's), boxoverlay draws it. Frames without a result meta are tracked
 * from their ROI metas (any detector's, in DL Streamer's convention). Boxes are never added,
 * moved or dropped: a box of no confirmed track (yet) keeps id 0 and no "object_id".
 *
 * The tracker is ByteTrack (Zhang et al., ECCV 2022): a Kalman filter per track, high-score
 * boxes matched first, low-score boxes (track-thresh > score >= low-thresh) then keeping tracks
 * alive, optimal assignments gated by IoU, a new track confirmed after min-hits frames in a
 * row, a lost one kept track-buffer frames. For the low-score boxes to reach it, cudanms's
 * score-threshold must let them through (at most low-thresh). Classes are tracked apart unless
 * per-class=false.
 *
 * Time is the buffers' PTS: with the caps' frame rate (else the shortest step between PTS) a
 * buffer 5 frames after the last counts as 5 frames (frames dropped upstream, a reconnection);
 * a frame with no boxes ages the tracks. A PTS before the previous one (a looping file, a
 * camera whose clock restarted), a flush or another frame size reset the tracker: every track
 * ends, the ids go on (posted as an element message "boxtrack-reset" with its reason).
 *
 * With camera-motion=true the tracks follow the picture where the camera moves (a car's camera,
 * a pan-tilt-zoom one): each frame's motion against the previous one (sparse optical flow over
 * the luma, BoT-SORT's) shifts and scales the tracks before they are matched. It reads frames in
 * system memory (8-bit gray, YUV or RGB) and needs OpenCV in the build; off by default.
 *
 * State is bounded: past max-tracks tracks the lost track seen longest ago is dropped, and with
 * no lost track left a new box starts none; both are counted (evicted, refused) and warned
 * about once a minute.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=vtest.avi ! decodebin ! videoconvert ! \
 *     cvdetect model=hog-people ! cudanms iou-threshold=0.3 ! boxtrack ! \
 *     boxoverlay ! videoconvert ! autovideosink
 * ]|
 */
#include "gstboxtrack.h"

#include <cudanms/track.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <mutex>

#include "elementclass.h"
#include "frameclock.h"
#include "framemotion.h"
#include "keptboxes.h"
#include "labels.h"
#include "propertytable.h"

GST_DEBUG_CATEGORY_STATIC(gst_box_track_debug);
#define GST_CAT_DEFAULT gst_box_track_debug

#define DEFAULT_PARAMS cudanms::TrackerParams()
#define MAX_TRACK_BUFFER 100000
#define MAX_MIN_HITS 1000
#define MAX_MAX_TRACKS 10000000
#define WARNING_INTERVAL_US (60 * G_USEC_PER_SEC)

struct GstBoxTrackPrivate {
  std::mutex lock; /* guards params, the tracker's params and next id, the counts */
  cudanms::TrackerParams params = DEFAULT_PARAMS;
  cudanms::Tracker tracker{DEFAULT_PARAMS};
  guint64 tracks = 0, resets = 0, evicted = 0, refused = 0;

  /* Streaming thread only. */
  FrameClock clock;
  bool camera_motion = false; /* as set; taken when the caps come */
  bool follow_camera = false; /* camera_motion, and the caps' frames can be read */
  FrameMotion frame_motion;
  gint width = 0, height = 0; /* of the caps; 0 before the first */
  std::map<gint, std::string> labels;
  std::vector<cudanms::Detection> detections;
  std::vector<guint64> ids; /* per box: its track's id, copied out of the tracker under the lock */
  gint64 warned_at_us = 0;
  guint64 evicted_warned = 0, refused_warned = 0;
};

ELEMENT_DEFINE(GstBoxTrack, gst_box_track, GstBaseTransform, GST_TYPE_BASE_TRANSFORM, boxtrack,
               "Multi-object tracker of the kept boxes");

static const GParamFlags kReadWrite = static_cast<GParamFlags>(
    G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING | G_PARAM_STATIC_STRINGS);

/* Every tracking parameter goes to the tracker as it is set. */
static void install_tracker_params(GObjectClass *klass) {
  using Private = GstBoxTrackPrivate;
  const GParamFlags rw = kReadWrite;
  const cudanms::TrackerParams d = DEFAULT_PARAMS;
  PropertyTable<Private>(klass, locked_private<GstBoxTrack>,
                         [](Private &priv) { priv.tracker.set_params(priv.params); })
      .field(
          g_param_spec_double("track-thresh", "Track threshold",
                              "High boxes score at least this: they are matched first, and "
                              "may start tracks",
                              0.0, 1.0, d.track_thresh, rw),
          [](auto &s) -> auto & { return s.params.track_thresh; })
      .field(
          g_param_spec_double("high-thresh", "New track threshold",
                              "A new track needs a high box of at least this score", 0.0, 1.0,
                              d.high_thresh, rw),
          [](auto &s) -> auto & { return s.params.high_thresh; })
      .field(
          g_param_spec_double("match-thresh", "Match threshold",
                              "High boxes match tracks at a cost 1 - IoU x score below this", 0.0,
                              1.0, d.match_thresh, rw),
          [](auto &s) -> auto & { return s.params.match_thresh; })
      .field(
          g_param_spec_double("low-thresh", "Low threshold",
                              "Boxes scoring at least this but below track-thresh only keep "
                              "tracks alive (IoU above 0.5); lower ones are ignored",
                              0.0, 1.0, d.low_thresh, rw),
          [](auto &s) -> auto & { return s.params.low_thresh; })
      .field(
          g_param_spec_uint("track-buffer", "Track buffer",
                            "Frames a lost track waits to be found again (of time: PTS)", 0,
                            MAX_TRACK_BUFFER, static_cast<guint>(d.track_buffer), rw),
          [](auto &s) -> auto & { return s.params.track_buffer; })
      .field(
          g_param_spec_uint("min-hits", "Minimum hits",
                            "Frames in a row a new track must be matched on to be confirmed "
                            "and get its id (a stream's first frame confirms at once)",
                            1, MAX_MIN_HITS, d.min_hits, rw),
          [](auto &s) -> auto & { return s.params.min_hits; })
      .field(
          g_param_spec_boolean("per-class", "Per class",
                               "Match boxes only to tracks of their class", d.per_class, rw),
          [](auto &s) -> auto & { return s.params.per_class; })
      .field(
          g_param_spec_uint("max-tracks", "Max tracks",
                            "Tracks held at most (tentative, tracked and lost; ~200 bytes "
                            "each): past it the lost track seen longest ago goes",
                            1, MAX_MAX_TRACKS, static_cast<guint>(d.max_tracks), rw),
          [](auto &s) -> auto & { return s.params.max_tracks; });
}

/* The tracker's ids and what it held, and whether it follows the camera's motion. */
static void install_state(GObjectClass *klass) {
  using Private = GstBoxTrackPrivate;
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  auto count = [ro](const char *name, const char *nick, const char *blurb) {
    return g_param_spec_uint64(name, nick, blurb, 0, G_MAXUINT64, 0, ro);
  };
  PropertyTable<Private>(klass, locked_private<GstBoxTrack>)
      .row(
          g_param_spec_uint64("next-id", "Next id",
                              "The id the next confirmed track gets; setting it only raises it "
                              "(to carry a stream's ids on into a new element)",
                              1, cudanms::Tracker::kMaxFirstId, 1, kReadWrite),
          [](Private &priv, const GValue *value) {
            priv.tracker.set_next_id(g_value_get_uint64(value));
          },
          [](const Private &priv, GValue *value) {
            g_value_set_uint64(value, priv.tracker.next_id());
          })
      .field(count("tracks", "Tracks", "Tracks held after the last frame"), &Private::tracks)
      .field(count("resets", "Resets",
                   "Times the tracker was reset (time went backwards, a flush, another frame "
                   "size)"),
             &Private::resets)
      .field(count("evicted", "Evicted", "Lost tracks dropped to stay within max-tracks"),
             &Private::evicted)
      .field(count("refused", "Refused",
                   "Boxes that started no track: max-tracks were held, none lost"),
             &Private::refused)
      .field(g_param_spec_boolean(
                 "camera-motion", "Camera motion",
                 "Follow the picture's motion (a moving camera): sparse optical flow over each "
                 "frame shifts and scales the tracks before matching; frames in system memory",
                 FALSE,
                 static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY |
                                          G_PARAM_STATIC_STRINGS)),
             &Private::camera_motion);
}

static void post_reset_message(GstBoxTrack *self, const char *why) {
  gst_element_post_message(
      GST_ELEMENT(self),
      gst_message_new_element(GST_OBJECT(self), gst_structure_new("boxtrack-reset", "reason",
                                                                  G_TYPE_STRING, why, NULL)));
}

/* Every track ends; the ids go on. */
static void reset_tracker(GstBoxTrack *self, const char *why) {
  GstBoxTrackPrivate *priv = self->priv;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->tracker.reset();
    priv->resets++;
    priv->tracks = 0;
  }
  priv->clock.reset();
  priv->frame_motion.reset();
  GST_INFO_OBJECT(self, "tracker reset: %s", why);
  post_reset_message(self, why);
}

static gboolean gst_box_track_start(GstBaseTransform *trans) {
  GstBoxTrackPrivate *priv = GST_BOX_TRACK(trans)->priv;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->tracker.reset();
    priv->tracks = 0;
  }
  priv->clock.reset();
  priv->frame_motion.reset();
  priv->width = priv->height = 0;
  priv->labels.clear();
  priv->warned_at_us = 0;
  return TRUE;
}

static gboolean gst_box_track_set_caps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  (void)outcaps;
  GstBoxTrack *self = GST_BOX_TRACK(trans);
  GstBoxTrackPrivate *priv = self->priv;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, incaps)) {
    priv->clock.set_rate(0, 1);
    return TRUE;
  }
  priv->clock.set_rate(GST_VIDEO_INFO_FPS_N(&info), GST_VIDEO_INFO_FPS_D(&info));
  bool camera_motion;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    camera_motion = priv->camera_motion;
  }
  std::string why;
  priv->follow_camera = camera_motion && priv->frame_motion.set_caps(incaps, &why);
  if (camera_motion && !priv->follow_camera) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("Cannot follow the camera's motion"),
                      ("%s", why.c_str()));
    return FALSE;
  }
  /* Boxes of another frame size are not comparable with the tracks' (a camera back at another
   * resolution). */
  if (priv->width != 0 &&
      (priv->width != GST_VIDEO_INFO_WIDTH(&info) || priv->height != GST_VIDEO_INFO_HEIGHT(&info)))
    reset_tracker(self, "the frame size changed");
  priv->width = GST_VIDEO_INFO_WIDTH(&info);
  priv->height = GST_VIDEO_INFO_HEIGHT(&info);
  return TRUE;
}

static gboolean gst_box_track_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstBoxTrack *self = GST_BOX_TRACK(trans);
  gint class_id;
  std::string label;
  if (gst_cv_label_event_parse(event, &class_id, &label)) self->priv->labels[class_id] = label;
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) reset_tracker(self, "flush");
  return GST_BASE_TRANSFORM_CLASS(gst_box_track_parent_class)->sink_event(trans, event);
}

/* Max-tracks reached: a warning now and then, never one a frame. */
static void warn_about_capacity(GstBoxTrack *self, guint64 evicted, guint64 refused) {
  GstBoxTrackPrivate *priv = self->priv;
  const gint64 now = g_get_monotonic_time();
  if (priv->warned_at_us != 0 && now - priv->warned_at_us < WARNING_INTERVAL_US) return;
  GST_ELEMENT_WARNING(self, STREAM, FAILED, ("More tracks than max-tracks"),
                      ("%" G_GUINT64_FORMAT " lost tracks dropped and %" G_GUINT64_FORMAT
                       " boxes left without a track since the last warning: raise max-tracks, or "
                       "lower track-buffer",
                       evicted - priv->evicted_warned, refused - priv->refused_warned));
  priv->warned_at_us = now;
  priv->evicted_warned = evicted;
  priv->refused_warned = refused;
}

static GstFlowReturn gst_box_track_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstBoxTrack *self = GST_BOX_TRACK(trans);
  GstBoxTrackPrivate *priv = self->priv;
  std::vector<KeptBox> boxes = gst_cv_kept_boxes(buf, priv->labels);
  GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf);
  priv->detections.clear();
  for (const KeptBox &b : boxes) {
    /* A box without a class id (an ROI type alone): its label stands for the class, as a
     * negative number, which class ids never are. */
    const gint class_id =
        b.class_id >= 0 || b.label.empty()
            ? b.class_id
            : -static_cast<gint>(gst_cv_quark(b.label) & 0x7fffffff);
    priv->detections.push_back(
        {b.x1, b.y1, b.x2, b.y2, static_cast<float>(b.score), static_cast<int32_t>(class_id)});
  }
  const int64_t frame = priv->clock.frame_of(GST_BUFFER_PTS(buf));
  const cudanms::CameraMotion motion =
      priv->follow_camera ? priv->frame_motion.next(buf) : cudanms::CameraMotion();
  guint64 evicted, refused;
  bool reset;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    const cudanms::TrackedFrame &out = priv->tracker.update(frame, priv->detections, motion);
    priv->ids.assign(out.ids.begin(), out.ids.end());
    priv->tracks = out.tentative + out.tracked + out.lost;
    priv->evicted += out.evicted;
    priv->refused += out.refused;
    if (out.reset) priv->resets++;
    reset = out.reset;
    evicted = priv->evicted;
    refused = priv->refused;
  }
  if (reset) {
    GST_INFO_OBJECT(self, "tracker reset: PTS %" GST_TIME_FORMAT " is before the previous one",
                    GST_TIME_ARGS(GST_BUFFER_PTS(buf)));
    post_reset_message(self, "time went backwards");
  }
  if (evicted != priv->evicted_warned || refused != priv->refused_warned)
    warn_about_capacity(self, evicted, refused);

  if (result) {
    gst_cuda_nms_result_meta_set_track_ids(result);
    for (guint i = 0; i < result->n_kept; i++) result->track_ids[i] = priv->ids[i];
  }
  /* An id an earlier tracker wrote is replaced, also by "none" (0, as DL Streamer reads it). */
  for (size_t i = 0; i < boxes.size(); i++)
    if (boxes[i].roi && (priv->ids[i] > 0 || boxes[i].track_id > 0))
      gst_cv_roi_set_track_id(boxes[i].roi, priv->ids[i]);
  return GST_FLOW_OK;
}

static void gst_box_track_class_init(GstBoxTrackClass *klass) {
  own_private<GstBoxTrack>(klass);
  install_tracker_params(G_OBJECT_CLASS(klass));
  install_state(G_OBJECT_CLASS(klass));

  describe_element(
      klass, "Box tracker", "Filter/Analyzer/Video",
      "Gives each kept box the id of the object it follows (ByteTrack), on the cudanms result "
      "meta and on each ROI meta (DL Streamer's object_id)",
      "video/x-raw(ANY)");

  ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_box_track, start, set_caps, sink_event,
                 transform_ip);
}
