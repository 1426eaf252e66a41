/* cudanms metadata: the candidate windows a detector attaches to a frame, and the result the
 * cudanms element attaches after non-maximum suppression.
 *
 * A detector attaches ONE candidates meta per buffer, however many windows it emits, and fills
 * its packed arrays:
 *
 *   GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta (buffer, 4096);
 *   gst_cuda_nms_candidates_meta_append (c, x1, y1, x2, y2, score, class_id);   // one window
 *   gst_cuda_nms_candidates_meta_append_many (c, boxes, scores, class_ids, n);  // or n at once
 *
 * cudanms reads the arrays in place and attaches a GstCudaNmsResultMeta (the kept boxes and the
 * frame's counts) plus one GstVideoRegionOfInterestMeta per kept box:
 *
 *   GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta (buffer);
 *   for (guint i = 0; i < r->n_kept; i++) use (&r->boxes[4 * i], r->scores[i], r->class_ids[i]);
 *
 * A GPU detector (cudacascade) can instead leave the candidates in device memory
 * (#GstCudaNmsDeviceCandidates): cudanms then runs NMS on them in place, and they never reach the
 * host. Any other reader calls gst_cuda_nms_candidates_meta_map() first, which downloads them
 * once and caches them in the arrays:
 *
 *   if (!gst_cuda_nms_candidates_meta_map (c, &error)) handle_error (error);
 *   for (guint i = 0; i < c->n; i++) use (&c->boxes[4 * i], c->scores[i], c->class_ids[i]);
 *
 * Boxes are {x1, y1, x2, y2} in pixels of the frame the buffer carries. Both metas carry the
 * "video", "orientation" and "size" tags, like GstVideoRegionOfInterestMeta: they are copied
 * with the buffer and rescaled by videoscale (or any element doing the "gst-video-scale"
 * transform), and dropped by elements that rotate or crop the frame. A copy shares device
 * candidates; a rescale downloads them first and rescales the host copy.
 *
 * Only GStreamer 1.22 API is used; link with pkg-config module gstreamer-cudanms-meta-1.0.
 */
#ifndef __GST_CUDA_NMS_META_H__
#define __GST_CUDA_NMS_META_H__

#include <gst/gst.h>

G_BEGIN_DECLS

/* ------------------------------------------------------------------------------------------ */
/* Candidates                                                                                  */
/* ------------------------------------------------------------------------------------------ */

#define GST_CUDA_NMS_CANDIDATES_META_API_TYPE (gst_cuda_nms_candidates_meta_api_get_type())
#define GST_CUDA_NMS_CANDIDATES_META_INFO (gst_cuda_nms_candidates_meta_get_info())

typedef struct _GstCudaNmsCandidatesMeta GstCudaNmsCandidatesMeta;
typedef struct _GstCudaNmsDeviceCandidates GstCudaNmsDeviceCandidates;

/**
 * GstCudaNmsDeviceCandidates:
 * @device: the CUDA device ordinal
 * @cuda_context: the CUcontext the memory belongs to
 * @boxes: device memory, @capacity x {x1, y1, x2, y2}, 16-byte aligned
 * @scores: device memory, @capacity scores
 * @class_ids: device memory, @capacity class ids, or NULL (class 0)
 * @count: a device word: how many of @capacity are used
 * @capacity: candidates the buffers hold
 * @ready_event: a cudaEvent_t recorded after the producer wrote them (NULL: already written)
 * @download: copies them to the host: *@n of them into arrays it allocates with g_malloc
 *   (*@boxes 4 x n, *@scores, *@class_ids n each), which the meta then owns; FALSE with a
 *   g_malloc'd message in *@error on failure
 * @user_data: the producer's, for @download and @release
 * @release: called with @user_data when the last reference is dropped: the producer returns the
 *   memory to its pool
 * @host_count: optional, host-mapped memory that holds the count once @ready_event has
 *   completed: a consumer reads it there with no copy (NULL: copy @count)
 *
 * A frame's candidates in device memory, reference counted: a buffer copy shares them. The
 * producer fills the fields of gst_cuda_nms_device_candidates_new() and attaches it with
 * gst_cuda_nms_candidates_meta_set_device(). Read-only once attached.
 */
struct _GstCudaNmsDeviceCandidates {
  gint device;
  gpointer cuda_context;
  const gfloat *boxes;
  const gfloat *scores;
  const gint32 *class_ids;
  const guint32 *count;
  guint capacity;
  gpointer ready_event;
  gboolean (*download)(gpointer user_data, guint *n, gfloat **boxes, gfloat **scores,
                       gint32 **class_ids, gchar **error);
  gpointer user_data;
  GDestroyNotify release;
  const guint32 *host_count;

  /*< private >*/
  gint refcount;
};

/* A zeroed GstCudaNmsDeviceCandidates with one reference. */
GstCudaNmsDeviceCandidates *gst_cuda_nms_device_candidates_new(void);
GstCudaNmsDeviceCandidates *gst_cuda_nms_device_candidates_ref(GstCudaNmsDeviceCandidates *dc);
void gst_cuda_nms_device_candidates_unref(GstCudaNmsDeviceCandidates *dc);

/**
 * GstCudaNmsCandidatesMeta:
 * @meta: parent #GstMeta
 * @n: number of candidates
 * @capacity: number of candidates the arrays can hold without growing
 * @boxes: @n x {x1, y1, x2, y2}, packed, in frame pixels
 * @scores: @n scores
 * @class_ids: @n class ids
 * @device: the candidates in device memory, or NULL. While @mapped is FALSE, @n is 0 and the
 *   arrays are empty: call gst_cuda_nms_candidates_meta_map() to read them on the host
 * @mapped: whether the arrays hold the candidates (always TRUE without @device)
 * @downloads: how many times @device was copied to the host for this meta (0 or 1): a pipeline
 *   that keeps its candidates on the GPU shows 0
 * @points_per_candidate: how many points (a face's landmarks, a body's joints) each candidate
 *   carries, 0 for none
 * @points: @n x @points_per_candidate x {x, y} in frame pixels, or NULL without points
 *
 * All of a frame's candidate windows, in packed arrays: the layout cudanms hands to its NMS
 * library without a copy. Read the fields; change them only through the functions below.
 */
struct _GstCudaNmsCandidatesMeta {
  GstMeta meta;

  guint n;
  guint capacity;
  gfloat *boxes;
  gfloat *scores;
  gint32 *class_ids;

  GstCudaNmsDeviceCandidates *device;
  gboolean mapped;
  guint downloads;

  guint points_per_candidate;
  gfloat *points;
};

GType gst_cuda_nms_candidates_meta_api_get_type(void);
const GstMetaInfo *gst_cuda_nms_candidates_meta_get_info(void);

/* Returns the buffer's candidates meta, adding an empty one if it has none (one meta per buffer:
 * a second call returns the same meta). Reserves room for @capacity candidates. The buffer must
 * be writable. */
GstCudaNmsCandidatesMeta *gst_buffer_add_cuda_nms_candidates_meta(GstBuffer *buffer,
                                                                  guint capacity);

/* The buffer's candidates meta, or NULL. */
#define gst_buffer_get_cuda_nms_candidates_meta(b) \
  ((GstCudaNmsCandidatesMeta *)gst_buffer_get_meta((b), GST_CUDA_NMS_CANDIDATES_META_API_TYPE))

/* Grows the arrays to hold at least @capacity candidates (never shrinks). */
void gst_cuda_nms_candidates_meta_reserve(GstCudaNmsCandidatesMeta *meta, guint capacity);

/* Hands the meta device candidates (taking over the caller's reference). Only an empty meta
 * (no candidates, none on the device) takes them: FALSE otherwise, and the reference is dropped. */
gboolean gst_cuda_nms_candidates_meta_set_device(GstCudaNmsCandidatesMeta *meta,
                                                 GstCudaNmsDeviceCandidates *device);

/* Makes the arrays hold the candidates: for device candidates, downloads them once (waiting for
 * their event) and caches them; otherwise does nothing. FALSE when the download fails (the arrays
 * then stay empty), with *@error (may be NULL) saying why. */
gboolean gst_cuda_nms_candidates_meta_map(GstCudaNmsCandidatesMeta *meta, GError **error);

/* Appends one candidate; the arrays grow geometrically when full. Appending to device candidates
 * maps them first, and from then on the meta holds host candidates only. */
void gst_cuda_nms_candidates_meta_append(GstCudaNmsCandidatesMeta *meta, gfloat x1, gfloat y1,
                                         gfloat x2, gfloat y2, gfloat score, gint32 class_id);

/* Appends @n candidates: @boxes holds n x {x1, y1, x2, y2}; @class_ids may be NULL (class 0). */
void gst_cuda_nms_candidates_meta_append_many(GstCudaNmsCandidatesMeta *meta, const gfloat *boxes,
                                              const gfloat *scores, const gint32 *class_ids,
                                              guint n);

/* Gives every candidate of the meta @points_per_candidate points (at most 1024), which NMS
 * carries to the kept boxes (cudanms: weighted NMS merges them like the box). Candidates already
 * in the meta, and those later appended without points, get NaN points (none known). FALSE, and
 * nothing changes, for device candidates or when the candidates have another number of points. */
gboolean gst_cuda_nms_candidates_meta_set_points_per_candidate(GstCudaNmsCandidatesMeta *meta,
                                                               guint points_per_candidate);

/* Appends @n candidates as _append_many() does, with their points: @points holds
 * n x points_per_candidate x {x, y}. */
void gst_cuda_nms_candidates_meta_append_with_points(GstCudaNmsCandidatesMeta *meta,
                                                     const gfloat *boxes, const gfloat *scores,
                                                     const gint32 *class_ids, const gfloat *points,
                                                     guint n);

/* Forgets the candidates, keeping the host memory and dropping device candidates. */
void gst_cuda_nms_candidates_meta_clear(GstCudaNmsCandidatesMeta *meta);

/* ------------------------------------------------------------------------------------------ */
/* Result                                                                                      */
/* ------------------------------------------------------------------------------------------ */

#define GST_CUDA_NMS_RESULT_META_API_TYPE (gst_cuda_nms_result_meta_api_get_type())
#define GST_CUDA_NMS_RESULT_META_INFO (gst_cuda_nms_result_meta_get_info())

typedef struct _GstCudaNmsResultMeta GstCudaNmsResultMeta;

/**
 * GstCudaNmsResultMeta:
 * @meta: parent #GstMeta
 * @n_kept: number of kept boxes
 * @boxes: @n_kept x {x1, y1, x2, y2} in frame pixels (clipped to the frame), best score first
 * @scores: @n_kept scores
 * @class_ids: @n_kept class ids; -1 for a box that has none (an ROI meta's roi_type without a
 *   label_id, which labels-file does not list)
 * @candidates_in: candidates given to NMS on this frame
 * @dropped_score: candidates scoring below the score threshold
 * @invalid: candidates with NaN/inf values, negative sizes, or wholly outside the frame
 * @dropped_capacity: candidates beyond max-candidates (the lowest-ranked)
 * @kept: kept boxes (== @n_kept)
 * @latency_ns: wall time of the NMS call, in nanoseconds (with device candidates it includes
 *   the wait for the detector's GPU work, which NMS is ordered after)
 * @gpu_time_ns: GPU time of NMS's own work, with cudanms time-gpu=true on CUDA; else 0
 * @backend: where NMS ran: "cpu" or "cuda" (a static string)
 * @labels: @n_kept class names (interned strings, never freed): the label cudanms knows for the
 *   class (its labels property, else the detector's label event), else the class id in decimal
 * @points_per_box: the points each kept box carries from its candidates, 0 for none
 * @points: @n_kept x @points_per_box x {x, y} in frame pixels (weighted NMS: merged like the
 *   box), or NULL
 * @members: @n_kept counts of the candidates each kept box stands for, itself included (the
 *   window class's size with method=group; with min-neighbors, one more than its neighbours), or
 *   NULL where NMS did not count them
 * @track_ids: @n_kept track ids a tracker (boxtrack) gave the kept boxes, 0 for a box of no
 *   confirmed track; NULL where no tracker ran. Ids are unique in their stream and never reused.
 *
 * What cudanms did with a frame's candidates.
 */
struct _GstCudaNmsResultMeta {
  GstMeta meta;

  guint n_kept;
  gfloat *boxes;
  gfloat *scores;
  gint32 *class_ids;

  guint64 candidates_in;
  guint64 dropped_score;
  guint64 invalid;
  guint64 dropped_capacity;
  guint64 kept;
  guint64 latency_ns;
  guint64 gpu_time_ns;
  const gchar *backend;
  const gchar **labels;

  guint points_per_box;
  gfloat *points;
  guint *members;
  guint64 *track_ids;
};

GType gst_cuda_nms_result_meta_api_get_type(void);
const GstMetaInfo *gst_cuda_nms_result_meta_get_info(void);

/* Adds a result meta with arrays for @n_kept boxes (zeroed) and zero counts; the caller fills
 * them. The buffer must be writable. */
GstCudaNmsResultMeta *gst_buffer_add_cuda_nms_result_meta(GstBuffer *buffer, guint n_kept);

/* Gives the kept boxes their member counts (zeroed), for the caller to fill. */
void gst_cuda_nms_result_meta_set_members(GstCudaNmsResultMeta *meta);

/* Gives the kept boxes their track ids (zeroed: no track), for the caller to fill. */
void gst_cuda_nms_result_meta_set_track_ids(GstCudaNmsResultMeta *meta);

/* Gives the kept boxes @points_per_box points each (zeroed), for the caller to fill. */
void gst_cuda_nms_result_meta_set_points_per_box(GstCudaNmsResultMeta *meta, guint points_per_box);

/* The buffer's result meta, or NULL. */
#define gst_buffer_get_cuda_nms_result_meta(b) \
  ((GstCudaNmsResultMeta *)gst_buffer_get_meta((b), GST_CUDA_NMS_RESULT_META_API_TYPE))

/* ------------------------------------------------------------------------------------------ */
/* Counts: lines crossed and zones occupied (boxcount)                                         */
/* ------------------------------------------------------------------------------------------ */

#define GST_CUDA_NMS_COUNTS_META_API_TYPE (gst_cuda_nms_counts_meta_api_get_type())
#define GST_CUDA_NMS_COUNTS_META_INFO (gst_cuda_nms_counts_meta_get_info())

typedef enum {
  GST_CUDA_NMS_COUNT_LINE_CROSSED,
  GST_CUDA_NMS_COUNT_ZONE_ENTERED,
  GST_CUDA_NMS_COUNT_ZONE_LEFT,
  GST_CUDA_NMS_COUNT_ZONE_LOITERING,
} GstCudaNmsCountEventKind;

/* "line-crossed", "zone-entered", "zone-left" or "zone-loitering". */
const gchar *gst_cuda_nms_count_event_kind_name(GstCudaNmsCountEventKind kind);

/**
 * GstCudaNmsCountEvent:
 * @kind: what happened
 * @name: the line's or the zone's name (interned)
 * @direction: lines: 1 "in", -1 "out"; zones: 0
 * @track_id: the track it happened to
 * @label: the track's label (interned)
 * @dwell: zone-left and zone-loitering: seconds since the track entered the zone; otherwise 0
 */
typedef struct {
  GstCudaNmsCountEventKind kind;
  const gchar *name;
  gint direction;
  guint64 track_id;
  const gchar *label;
  gdouble dwell;
} GstCudaNmsCountEvent;

/**
 * GstCudaNmsLineLabel:
 * @label: a label (interned)
 * @in: @out: crossings of the line so far by tracks of that label
 */
typedef struct {
  const gchar *label;
  guint64 in, out;
} GstCudaNmsLineLabel;

/**
 * GstCudaNmsLineCount:
 * @name: the line's name (interned)
 * @x1: @y1: @x2: @y2: its ends in frame pixels ("in" is from the right of (x1,y1)->(x2,y2) to its
 *   left, as the image shows it: s = (x2-x1)(py-y1) - (y2-y1)(px-x1) going from < 0 to > 0)
 * @in: @out: crossings so far, every label
 * @n_labels: @labels: the crossings by label (the labels that crossed it); set through
 *   gst_cuda_nms_counts_meta_set_line_labels()
 */
typedef struct {
  const gchar *name;
  gfloat x1, y1, x2, y2;
  guint64 in, out;
  guint n_labels;
  GstCudaNmsLineLabel *labels;
} GstCudaNmsLineCount;

/**
 * GstCudaNmsZoneLabel:
 * @label: a label (interned)
 * @occupancy: tracks of that label in the zone now
 */
typedef struct {
  const gchar *label;
  guint occupancy;
} GstCudaNmsZoneLabel;

/**
 * GstCudaNmsZoneCount:
 * @name: the zone's name (interned)
 * @n_points: @points: its polygon, @n_points x {x, y} in frame pixels
 * @n_labels: @labels: its occupancy by label (the labels with at least one track in it)
 * @loitering: tracks in it now that have loitered (boxcount's loitering-time)
 */
typedef struct {
  const gchar *name;
  guint n_points;
  gfloat *points;
  guint n_labels;
  GstCudaNmsZoneLabel *labels;
  guint loitering;
} GstCudaNmsZoneCount;

typedef struct _GstCudaNmsCountsMeta GstCudaNmsCountsMeta;

/**
 * GstCudaNmsCountsMeta:
 * @meta: parent #GstMeta
 * @n_events: @events: what happened on this frame, in order
 * @n_lines: @lines: every line with its running counts
 * @n_zones: @zones: every zone with its occupancy now
 *
 * A frame's counting: its events and the running counts after it. Carries the same tags as the
 * other metas: rescaled with the frame, dropped where the frame is rotated or cropped.
 */
struct _GstCudaNmsCountsMeta {
  GstMeta meta;
  guint n_events;
  GstCudaNmsCountEvent *events;
  guint n_lines;
  GstCudaNmsLineCount *lines;
  guint n_zones;
  GstCudaNmsZoneCount *zones;
};

GType gst_cuda_nms_counts_meta_api_get_type(void);
const GstMetaInfo *gst_cuda_nms_counts_meta_get_info(void);

/* Adds a counts meta with room for @n_events events, @n_lines lines and @n_zones zones (zeroed),
 * for the caller to fill; zones through gst_cuda_nms_counts_meta_set_zone(). */
GstCudaNmsCountsMeta *gst_buffer_add_cuda_nms_counts_meta(GstBuffer *buffer, guint n_events,
                                                          guint n_lines, guint n_zones);

/* Line @index's counts by label (copied). */
void gst_cuda_nms_counts_meta_set_line_labels(GstCudaNmsCountsMeta *meta, guint index,
                                              const GstCudaNmsLineLabel *labels, guint n_labels);

/* Zone @index: its name, polygon (copied) and occupancy by label (copied). */
void gst_cuda_nms_counts_meta_set_zone(GstCudaNmsCountsMeta *meta, guint index, const gchar *name,
                                       const gfloat *points, guint n_points,
                                       const GstCudaNmsZoneLabel *labels, guint n_labels);

/* The buffer's counts meta, or NULL. */
#define gst_buffer_get_cuda_nms_counts_meta(b) \
  ((GstCudaNmsCountsMeta *)gst_buffer_get_meta((b), GST_CUDA_NMS_COUNTS_META_API_TYPE))

/* ------------------------------------------------------------------------------------------ */
/* Class labels along the stream                                                              */
/* ------------------------------------------------------------------------------------------ */

/* The metas carry class ids; a detector announces the name of each class it emits with a custom
 * sticky downstream event "cudanms-label-<class id>" (fields "class-id" int, "label" string).
 * Sticky, so an element linked later still receives it. */
GstEvent *gst_cuda_nms_label_event_new(gint class_id, const gchar *label);

/* TRUE, with *class_id and *label (owned by the event) filled, when @event is such an
 * announcement. */
gboolean gst_cuda_nms_label_event_parse(GstEvent *event, gint *class_id, const gchar **label);

G_END_DECLS

#endif /* __GST_CUDA_NMS_META_H__ */
