#include "elementcudacontext.h"

#include <algorithm>

#ifdef CUDANMS_HAVE_GST_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudautils.h>

#include <map>
#endif

/* gstreamer-cuda's GST_CUDA_CONTEXT_TYPE, spelt out for builds without it. */
static const char kCudaContextType[] = "gst.cuda.context";

GstContext *gst_cv_cuda_device_context_new(int gpu_id) {
  if (gpu_id < 0) return nullptr;
  GstContext *context = gst_context_new(kCudaContextType, TRUE);
  gst_structure_set(gst_context_writable_structure(context), "cuda-device-id", G_TYPE_UINT,
                    static_cast<guint>(gpu_id), NULL);
  return context;
}

int gst_cv_cuda_context_device(GstContext *context) {
  guint device = 0;
  if (!context || g_strcmp0(gst_context_get_context_type(context), kCudaContextType) != 0 ||
      !gst_structure_get_uint(gst_context_get_structure(context), "cuda-device-id", &device))
    return -1;
  return static_cast<int>(device);
}

void ElementCudaContext::remember_named_device(GstContext *context) {
  const int named = gst_cv_cuda_context_device(context);
  if (named >= 0) named_device_ = named;
}

int ElementCudaContext::wanted_device(int gpu_id) const {
  return gpu_id >= 0 ? gpu_id : std::max(named_device_, 0);
}

#ifdef CUDANMS_HAVE_GST_CUDA

namespace {

/* The driver's calls through the runtime, as kernels/ fetches them: only the static runtime is
 * linked, so that the plugins load on machines without the driver. */
template <typename Fn>
bool driver_call(const char *name, Fn **fn) {
  void *p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return false;
  *fn = reinterpret_cast<Fn *>(p);
  return true;
}

/* Whether CUDA device gpu_id is there for gstreamer-cuda. A device that is not there is no
 * driver error (compute-sanitizer reports those): asked first. */
bool device_usable(int gpu_id) {
  int count = 0;
  return gpu_id >= 0 && gst_cuda_load_library() && cudaGetDeviceCount(&count) == cudaSuccess &&
         gpu_id < count;
}

/* A new reference to the one GstCudaContext of device gpu_id's primary context, or nullptr.
 * Made once and kept, with the primary context retained, for the life of the process, as the
 * CUDA runtime keeps it. */
GstCudaContext *primary_cuda_context(int gpu_id) {
  static std::mutex lock;
  static std::map<int, GstCudaContext *> made;
  if (!device_usable(gpu_id)) return nullptr;
  std::lock_guard<std::mutex> guard(lock);
  auto found = made.find(gpu_id);
  if (found != made.end()) return GST_CUDA_CONTEXT(gst_object_ref(found->second));
  CUresult (*device_get)(CUdevice *, int) = nullptr;
  CUresult (*retain)(CUcontext *, CUdevice) = nullptr;
  CUdevice device = 0;
  CUcontext handle = nullptr;
  if (!driver_call("cuDeviceGet", &device_get) ||
      !driver_call("cuDevicePrimaryCtxRetain", &retain) ||
      device_get(&device, gpu_id) != CUDA_SUCCESS || retain(&handle, device) != CUDA_SUCCESS)
    return nullptr;
  GstCudaContext *context = gst_cuda_context_new_wrapped(handle, device);
  if (!context) return nullptr;
  gst_object_ref_sink(context);
  made.emplace(gpu_id, context);
  return GST_CUDA_CONTEXT(gst_object_ref(context));
}

struct PeerQuery {
  GstQuery *query;
  bool answered = false;
};

gboolean ask_peer(GstElement *, GstPad *pad, gpointer data) {
  auto *ask = static_cast<PeerQuery *>(data);
  ask->answered = gst_pad_peer_query(pad, ask->query);
  return !ask->answered; /* on to the next pad until one answers */
}

}  // namespace

GstContext *gst_cv_cuda_primary_context_new(int gpu_id) {
  GstCudaContext *cuda = primary_cuda_context(gpu_id);
  if (!cuda) return nullptr;
  GstContext *context = gst_context_new_cuda_context(cuda);
  gst_object_unref(cuda);
  return context;
}

GstContext *gst_cv_cuda_own_context_new(int gpu_id) {
  if (!device_usable(gpu_id)) return nullptr;
  GstCudaContext *cuda = gst_cuda_context_new(static_cast<guint>(gpu_id));
  if (!cuda) return nullptr;
  GstContext *context = gst_context_new_cuda_context(cuda);
  gst_object_unref(cuda);
  return context;
}

/* gstreamer-cuda's gst_cuda_ensure_element_context() but for the context it makes: downstream's,
 * upstream's, then the bin's or the application's (need-context), each answer arriving through
 * set_context() on this thread (hence the recursive lock); else the primary one, announced. */
bool ElementCudaContext::ensure(GstElement *element, int gpu_id) {
  /* Without the driver, gstreamer-cuda 1.22 aborts in cuInit rather than failing: ask first. */
  if (!gst_cuda_load_library()) return false;
  std::lock_guard<std::recursive_mutex> guard(lock_);
  if (context_) return true;
  GstQuery *query = gst_query_new_context(GST_CUDA_CONTEXT_TYPE);
  for (auto foreach_pad : {gst_element_foreach_src_pad, gst_element_foreach_sink_pad}) {
    PeerQuery ask{query};
    foreach_pad(element, ask_peer, &ask);
    GstContext *found = nullptr;
    if (ask.answered) gst_query_parse_context(query, &found);
    if (found) gst_element_set_context(element, found);
    if (context_) break;
  }
  gst_query_unref(query);
  if (!context_) {
    gst_element_post_message(
        element, gst_message_new_need_context(GST_OBJECT(element), GST_CUDA_CONTEXT_TYPE));
  }
  if (context_) return true;

  const int device = wanted_device(gpu_id);
  GstCudaContext *made = primary_cuda_context(device);
  if (!made) {
    GST_WARNING_OBJECT(element, "no primary CUDA context on device %d: a new context", device);
    auto **context = reinterpret_cast<GstCudaContext **>(&context_);
    return gst_cuda_ensure_element_context(element, device, context);
  }
  context_ = GST_OBJECT(made);
  GstContext *announced = gst_context_new_cuda_context(made);
  gst_element_set_context(element, announced);
  gst_element_post_message(element, gst_message_new_have_context(GST_OBJECT(element), announced));
  return true;
}

void ElementCudaContext::reset() {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  if (context_) gst_object_unref(context_);
  context_ = nullptr;
  named_device_ = -1;
}

void ElementCudaContext::set_context(GstElement *element, GstContext *context, int gpu_id) {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  GstCudaContext *cuda = context_ ? GST_CUDA_CONTEXT(context_) : nullptr;
  gst_cuda_handle_set_context(element, context, gpu_id, &cuda);
  context_ = GST_OBJECT(cuda);
  remember_named_device(context);
}

bool ElementCudaContext::handle_query(GstElement *element, GstQuery *query) {
  if (GST_QUERY_TYPE(query) != GST_QUERY_CONTEXT) return false;
  std::lock_guard<std::recursive_mutex> guard(lock_);
  return context_ && gst_cuda_handle_context_query(element, query, GST_CUDA_CONTEXT(context_));
}

GstObject *ElementCudaContext::get() const {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  return context_ ? GST_OBJECT(gst_object_ref(context_)) : nullptr;
}

void *ElementCudaContext::handle() const {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  return context_ ? gst_cuda_context_get_handle(GST_CUDA_CONTEXT(context_)) : nullptr;
}

int ElementCudaContext::device_for(int gpu_id) const {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  if (!context_) return wanted_device(gpu_id);
  guint device = 0;
  g_object_get(context_, "cuda-device-id", &device, NULL);
  return static_cast<int>(device);
}

ElementCudaContext::Scope::Scope(const ElementCudaContext &context) {
  GstObject *held = context.get();
  if (!held) return;
  pushed_ = gst_cuda_context_push(GST_CUDA_CONTEXT(held));
  gst_object_unref(held); /* the element keeps it alive while it is current */
}

ElementCudaContext::Scope::~Scope() {
  if (pushed_) gst_cuda_context_pop(nullptr);
}

#else

GstContext *gst_cv_cuda_primary_context_new(int) { return nullptr; }
GstContext *gst_cv_cuda_own_context_new(int) { return nullptr; }
bool ElementCudaContext::ensure(GstElement *, int) { return false; }
void ElementCudaContext::reset() {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  named_device_ = -1;
}
void ElementCudaContext::set_context(GstElement *, GstContext *context, int) {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  remember_named_device(context);
}
bool ElementCudaContext::handle_query(GstElement *, GstQuery *) { return false; }
GstObject *ElementCudaContext::get() const { return nullptr; }
void *ElementCudaContext::handle() const { return nullptr; }
int ElementCudaContext::device_for(int gpu_id) const {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  return wanted_device(gpu_id);
}
ElementCudaContext::Scope::Scope(const ElementCudaContext &) {}
ElementCudaContext::Scope::~Scope() {}

#endif
