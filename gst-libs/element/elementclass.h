/* What every element's GObject glue said alike, said once (docs/architecture.md, "An element's
 * class"): its definition (ELEMENT_DEFINE), the lifetime of its private state (own_private), its
 * description and pads (describe_element), its vfuncs (ELEMENT_VFUNCS) and, for a transform that
 * only reads the frames it passes, passthrough (transform_reads_only).
 *
 *   ELEMENT_DEFINE(GstBoxTrack, gst_box_track, GstBaseTransform, GST_TYPE_BASE_TRANSFORM, boxtrack,
 *                  "Multi-object tracker of the kept boxes");
 *   ...the vfuncs' bodies, named gst_box_track_start and so on...
 *   static void gst_box_track_class_init(GstBoxTrackClass *klass) {
 *     own_private<GstBoxTrack>(klass);
 *     ...its PropertyTable...
 *     describe_element(klass, "Box tracker", "Filter/Analyzer/Video", "Gives each ...",
 *                      "video/x-raw(ANY)");
 *     ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_box_track, start, transform_ip);
 *   } */
#pragma once

#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>

/* The element's names, the project as the author, and for a filter its always pads "sink" and
 * "src" of @caps (none without: a detector's base adds its own). */
void describe_element(gpointer klass, const char *long_name, const char *classification,
                      const char *description, const char *caps = nullptr);

/* A filter's always pads, "sink" and "src", both of @caps (a caps string). */
void add_filter_pads(gpointer klass, const char *caps);

/* A transform that reads metadata only: passthrough, the buffer neither copied nor made
 * writable, and still seen by transform_ip. (One that adds metadata or draws needs nothing:
 * GstBaseTransform runs an element with transform_ip alone in place, never passthrough, and
 * makes the buffer writable first; so does GstVideoFilter with transform_frame_ip alone.) */
void transform_reads_only(GstBaseTransformClass *klass);

/* Instance::priv, a C++ object ELEMENT_DEFINE's instance init makes with new, is deleted at
 * finalize, after which the parent class's finalize runs. Call once from class_init. */
template <typename Instance>
void own_private(gpointer klass) {
  static GObjectClass *parent = G_OBJECT_CLASS(g_type_class_peek_parent(klass));
  G_OBJECT_CLASS(klass)->finalize = [](GObject *object) {
    Instance *self = reinterpret_cast<Instance *>(object);
    delete self->priv;
    self->priv = nullptr;
    parent->finalize(object);
  };
}

/* The element's instance (its parent's, then `priv`, its own state: a TypeNamePrivate, made with
 * new by the instance init defined here, deleted by own_private; what the element sets up of its
 * own is its TypeNamePrivate's members' initialisers), its GType (type_name, a child of
 * PARENT_TYPE), its debug category type_name_debug called after the element, and its
 * registration as `name`, of rank none:
 *   ELEMENT_DEFINE(GstBoxTrack, gst_box_track, GstBaseTransform, GST_TYPE_BASE_TRANSFORM, boxtrack,
 *                  "Multi-object tracker of the kept boxes"); */
#define ELEMENT_DEFINE(TypeName, type_name, ParentName, PARENT_TYPE, name, debug_description) \
  struct _##TypeName {                                                                        \
    ParentName parent;                                                                        \
    TypeName##Private *priv;                                                                  \
  };                                                                                          \
  G_DEFINE_TYPE_WITH_CODE(                                                                    \
      TypeName, type_name, PARENT_TYPE,                                                       \
      GST_DEBUG_CATEGORY_INIT(type_name##_debug, #name, 0, debug_description));               \
  GST_ELEMENT_REGISTER_DEFINE(name, #name, GST_RANK_NONE, type_name##_get_type());            \
  static void type_name##_init(TypeName *self) { self->priv = new TypeName##Private(); }

/* klass->vfunc = type_name_vfunc for each vfunc listed (up to 8): an element's implementations
 * carry the names of the vfuncs they implement.
 *   ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_box_track, start, transform_ip); */
#define ELEMENT_VFUNCS(klass, type_name, ...)                                                      \
  ELEMENT_VFUNCS_PICK_(__VA_ARGS__, ELEMENT_VFUNCS_8_, ELEMENT_VFUNCS_7_, ELEMENT_VFUNCS_6_,       \
                       ELEMENT_VFUNCS_5_, ELEMENT_VFUNCS_4_, ELEMENT_VFUNCS_3_, ELEMENT_VFUNCS_2_, \
                       ELEMENT_VFUNCS_1_)                                                          \
  (klass, type_name, __VA_ARGS__)

#define ELEMENT_VFUNCS_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, picked, ...) picked
#define ELEMENT_VFUNC_(k, t, v) (k)->v = GST_DEBUG_FUNCPTR(t##_##v)
#define ELEMENT_VFUNCS_1_(k, t, v) ELEMENT_VFUNC_(k, t, v)
// One rung a line: the preprocessor has no loop.
// clang-format off
#define ELEMENT_VFUNCS_2_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_1_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_3_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_2_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_4_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_3_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_5_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_4_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_6_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_5_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_7_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_6_(k, t, __VA_ARGS__)
#define ELEMENT_VFUNCS_8_(k, t, v, ...) ELEMENT_VFUNC_(k, t, v); ELEMENT_VFUNCS_7_(k, t, __VA_ARGS__)
// clang-format on
