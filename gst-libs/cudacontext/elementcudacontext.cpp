#include "elementcudacontext.h"

#ifdef CUDANMS_HAVE_GST_CUDA
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudautils.h>
#endif

#ifdef CUDANMS_HAVE_GST_CUDA

bool ElementCudaContext::ensure(GstElement *element, int gpu_id) {
  /* Without the driver, gstreamer-cuda 1.22 aborts in cuInit rather than failing: ask first. */
  if (!gst_cuda_load_library()) return false;
  /* It queries neighbours and the application, whose answer comes back through set_context() on
   * this thread, into the same pointer (hence the recursive lock); else it makes a context. */
  std::lock_guard<std::recursive_mutex> guard(lock_);
  auto **context = reinterpret_cast<GstCudaContext **>(&context_);
  return gst_cuda_ensure_element_context(element, gpu_id, context);
}

void ElementCudaContext::reset() {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  if (context_) gst_object_unref(context_);
  context_ = nullptr;
}

void ElementCudaContext::set_context(GstElement *element, GstContext *context, int gpu_id) {
  std::lock_guard<std::recursive_mutex> guard(lock_);
  GstCudaContext *cuda = context_ ? GST_CUDA_CONTEXT(context_) : nullptr;
  gst_cuda_handle_set_context(element, context, gpu_id, &cuda);
  context_ = GST_OBJECT(cuda);
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

bool ElementCudaContext::ensure(GstElement *, int) { return false; }
void ElementCudaContext::reset() {}
void ElementCudaContext::set_context(GstElement *, GstContext *, int) {}
bool ElementCudaContext::handle_query(GstElement *, GstQuery *) { return false; }
GstObject *ElementCudaContext::get() const { return nullptr; }
void *ElementCudaContext::handle() const { return nullptr; }
ElementCudaContext::Scope::Scope(const ElementCudaContext &) {}
ElementCudaContext::Scope::~Scope() {}

#endif
