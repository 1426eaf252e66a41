// libFuzzer target: the cudanms element's metadata intake. Each input becomes one frame through
// a GstHarness (cudanms backend=cpu): a candidates meta of any floats (NaN, inf, huge, negative
// sizes), possibly one window repeated up to 4096 times, and ROI metas whose "detection"
// structures hold confidence, label_id, label and coordinates of random types. The element must
// pass every frame with a result meta that accounts for every candidate.
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gstcudanms.h"

namespace {

// Reads the input front to back; past its end, zeros.
struct Input {
  const uint8_t *data;
  size_t size;
  size_t at = 0;
  uint8_t byte() { return at < size ? data[at++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(byte() | byte() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  float f32() {
    const uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  bool done() const { return at >= size; }
};

// A field of a random type: the element must read only what has the type it expects.
void set_random_field(GstStructure *s, const char *name, Input &in) {
  switch (in.byte() % 5) {
    case 0:
      gst_structure_set(s, name, G_TYPE_DOUBLE, static_cast<double>(in.f32()), NULL);
      break;
    case 1:
      gst_structure_set(s, name, G_TYPE_INT, static_cast<gint>(in.u32()), NULL);
      break;
    case 2:
      gst_structure_set(s, name, G_TYPE_STRING, "x\xff", NULL);
      break;
    case 3:
      gst_structure_set(s, name, G_TYPE_UINT64, static_cast<guint64>(in.u32()) << 20, NULL);
      break;
    default:
      break;  // absent
  }
}

GstHarness *harness() {
  static GstHarness *h = [] {
    gst_init(nullptr, nullptr);
    GST_ELEMENT_REGISTER(cudanms, nullptr);
    GstHarness *made = gst_harness_new_parse("cudanms backend=cpu keep-candidates=true");
    gst_harness_set_src_caps_str(made, "video/x-raw,format=GRAY8,width=640,height=480");
    return made;
  }();
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in{data, size};
  GstHarness *h = harness();
  const uint8_t mode = in.byte();
  g_object_set(gst_harness_find_element(h, "cudanms"), "max-candidates", 1u + in.u16(),
               "class-agnostic", mode & 1, "method", (mode >> 1) & 1, "overlap", (mode >> 2) % 3,
               NULL);
  gst_object_unref(gst_harness_find_element(h, "cudanms"));  // find_element took a reference

  GstBuffer *buf = gst_buffer_new();
  guint64 candidates = 0;
  if (mode & 8) {
    GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(buf, 0);
    // Up to 4096 copies: enough for the counts to matter, few enough that a unit stays short
    // under ASan (38k equal-score copies once took 73 s in the CPU matrix NMS, since linear).
    const guint repeat = mode & 16 ? 1 + in.u16() % 4096 : 1;
    while (!in.done() && in.byte() % 8 != 0) {
      const float x1 = in.f32(), y1 = in.f32(), x2 = in.f32(), y2 = in.f32(), score = in.f32();
      const gint32 class_id = static_cast<gint32>(in.u32());
      for (guint r = 0; r < repeat; r++) {
        gst_cuda_nms_candidates_meta_append(c, x1, y1, x2, y2, score, class_id);
        candidates++;
      }
    }
  }
  while (!in.done()) {
    GstVideoRegionOfInterestMeta *roi = gst_buffer_add_video_region_of_interest_meta(
        buf, in.byte() % 2 ? "thing" : "", in.u32(), in.u32(), in.u32(), in.u32());
    candidates++;
    if (in.byte() % 3 == 0) continue;
    GstStructure *detection = gst_structure_new_empty("detection");
    for (const char *name : {"confidence", "label_id", "label", "x_min", "y_max"})
      set_random_field(detection, name, in);
    gst_video_region_of_interest_meta_add_param(roi, detection);
  }

  if (gst_harness_push(h, buf) != GST_FLOW_OK) std::abort();
  GstBuffer *out = gst_harness_pull(h);
  GstCudaNmsResultMeta *r = out ? gst_buffer_get_cuda_nms_result_meta(out) : nullptr;
  if (!r || r->candidates_in != candidates ||
      r->invalid + r->dropped_score + r->dropped_capacity + r->kept > candidates ||
      r->n_kept != r->kept)
    std::abort();
  for (guint i = 0; i < r->n_kept; i++) {
    if (!r->labels[i]) std::abort();
  }
  gst_buffer_unref(out);
  return 0;
}
