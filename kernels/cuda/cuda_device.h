// The CUDA context every CUDA object of the libraries works in, shared by the NMS context, the
// cascade detector and the device candidates pool.
//
// An object binds, when it is created, to the CUDA context current on the creating thread (for
// example a GstCudaContext that an element pushed, shared with gst-plugins-bad's nvcodec
// elements), or else to the device's primary context (the CUDA runtime's default). Each of its
// calls then makes that context current for its duration, from whatever thread: device pointers
// and events of objects bound to one context can be mixed freely.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms::detail {

Status cuda_status(const char *what, cudaError_t error);

#define CUDANMS_CUDA_TRY(call)                                           \
  do {                                                                   \
    const cudaError_t cudanms_cuda_error_ = (call);                      \
    if (cudanms_cuda_error_ != cudaSuccess) {                            \
      return ::cudanms::detail::cuda_status(#call, cudanms_cuda_error_); \
    }                                                                    \
  } while (0)

class DeviceBinding {
 public:
  // Binds to the current context when it is on `device`, else to the device's primary context.
  // A current context on another device (one thread that sets up elements of several GPUs, as
  // an application starting one pipeline a GPU does) is left as it is: the binding takes
  // `device`'s primary context, retained for the life of the process as the runtime keeps it.
  Status open(int device);

  // The bound context current on this thread until the scope ends (then the previous one again).
  class Scope {
   public:
    explicit Scope(void *context);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;
    bool ok() const { return ok_; }

   private:
    bool ok_ = false;
  };
  void *context() const { return context_; }  // a CUcontext
  int device() const { return device_; }
  const std::string &name() const { return name_; }  // "cuda:0 (NVIDIA H100 80GB HBM3)"
  int sm_count() const { return sm_count_; }

 private:
  void *context_ = nullptr;
  int device_ = 0;
  std::string name_;
  int sm_count_ = 1;
};

// Enters a binding's context for the rest of the enclosing function, or returns its error.
#define CUDANMS_ENTER(binding)                                                              \
  ::cudanms::detail::DeviceBinding::Scope cudanms_scope_((binding).context());              \
  if (!cudanms_scope_.ok()) {                                                               \
    return ::cudanms::Status::Error("cannot make the CUDA context of " + (binding).name() + \
                                    " current");                                            \
  }

// Device memory of n elements of T, freed with its owner (which must be inside the binding's
// scope when it is destroyed).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  ~DeviceArray() { cudaFree(ptr_); }
  // Grows to at least n elements (the contents are lost when it grows).
  Status reserve(size_t n) {
    if (n <= size_ && ptr_ != nullptr) return Status::Ok();
    cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    CUDANMS_CUDA_TRY(cudaMalloc(&ptr_, (n > 0 ? n : 1) * sizeof(T)));
    size_ = n;
    return Status::Ok();
  }
  // Sized for v and filled with it, on the stream.
  Status upload(const std::vector<T> &v, cudaStream_t stream) {
    Status status = reserve(v.size());
    if (!status.ok() || v.empty()) return status;
    CUDANMS_CUDA_TRY(
        cudaMemcpyAsync(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    return Status::Ok();
  }
  T *get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  T *ptr_ = nullptr;
  size_t size_ = 0;
};

// Pinned host memory mapped into the device's address space: kernels write results straight into
// it, and one synchronisation later the host reads them.
template <typename T>
class MappedArray {
 public:
  MappedArray() = default;
  MappedArray(const MappedArray &) = delete;
  MappedArray &operator=(const MappedArray &) = delete;
  ~MappedArray() { cudaFreeHost(ptr_); }
  Status reserve(size_t n) {
    if (n <= size_ && ptr_ != nullptr) return Status::Ok();
    cudaFreeHost(ptr_);
    ptr_ = device_ = nullptr;
    size_ = 0;
    CUDANMS_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&ptr_), (n > 0 ? n : 1) * sizeof(T),
                                   cudaHostAllocMapped));
    CUDANMS_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void **>(&device_), ptr_, 0));
    size_ = n;
    return Status::Ok();
  }
  T *get() const { return ptr_; }
  T *device() const { return device_; }
  size_t size() const { return size_; }

 private:
  T *ptr_ = nullptr;
  T *device_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cudanms::detail
