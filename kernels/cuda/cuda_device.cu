// The context binding of cuda_device.h. The context calls are the driver API's, fetched through
// the runtime (cudaGetDriverEntryPointByVersion): the libraries link only the static runtime, so
// that they load, and report "no CUDA device", on machines without the driver.
#include <cuda.h>

#include <mutex>

#include "cuda_device.h"

namespace cudanms::detail {
namespace {

struct ContextCalls {
  CUresult (*get_current)(CUcontext *) = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*pop)(CUcontext *) = nullptr;
  CUresult (*get_device)(CUdevice *) = nullptr;
  CUresult (*device_get)(CUdevice *, int) = nullptr;
  CUresult (*retain_primary)(CUcontext *, CUdevice) = nullptr;
  bool ok = false;
};

const ContextCalls &context_calls() {
  static ContextCalls calls;
  static std::once_flag once;
  std::call_once(once, [] {
    auto fetch = [](const char *name, auto *fn) {
      void *p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        return false;
      }
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
      return true;
    };
    calls.ok = fetch("cuCtxGetCurrent", &calls.get_current) &&
               fetch("cuCtxPushCurrent", &calls.push) && fetch("cuCtxPopCurrent", &calls.pop) &&
               fetch("cuCtxGetDevice", &calls.get_device) &&
               fetch("cuDeviceGet", &calls.device_get) &&
               fetch("cuDevicePrimaryCtxRetain", &calls.retain_primary);
  });
  return calls;
}

}  // namespace

Status cuda_status(const char *what, cudaError_t error) {
  return Status::Error(std::string(what) + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

Status DeviceBinding::open(int device) {
  int count = 0;
  CUDANMS_CUDA_TRY(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return Status::Error("CUDA device " + std::to_string(device) + " does not exist (" +
                         std::to_string(count) + " found)");
  }
  const ContextCalls &calls = context_calls();
  if (!calls.ok) return Status::Error("the CUDA driver has no context calls");
  CUcontext current = nullptr;
  if (calls.get_current(&current) != CUDA_SUCCESS) current = nullptr;
  if (current != nullptr) {
    CUdevice on = -1;
    if (calls.get_device(&on) != CUDA_SUCCESS) return Status::Error("cuCtxGetDevice failed");
    CUdevice wanted = -1;
    if (on != device && (calls.device_get(&wanted, device) != CUDA_SUCCESS ||
                         calls.retain_primary(&current, wanted) != CUDA_SUCCESS)) {
      return Status::Error("the primary context of CUDA device " + std::to_string(device) +
                           " cannot be retained (device " + std::to_string(on) +
                           "'s context is current)");
    }
  } else {
    // The runtime makes the device's primary context current.
    CUDANMS_CUDA_TRY(cudaSetDevice(device));
    CUDANMS_CUDA_TRY(cudaFree(nullptr));
    if (calls.get_current(&current) != CUDA_SUCCESS || current == nullptr) {
      return Status::Error("no CUDA context after cudaSetDevice(" + std::to_string(device) + ")");
    }
  }
  context_ = current;
  device_ = device;
  cudaDeviceProp prop{};
  CUDANMS_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  name_ = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
  sm_count_ = prop.multiProcessorCount;
  return Status::Ok();
}

DeviceBinding::Scope::Scope(void *context) {
  const ContextCalls &calls = context_calls();
  ok_ =
      calls.ok && context != nullptr && calls.push(static_cast<CUcontext>(context)) == CUDA_SUCCESS;
}

DeviceBinding::Scope::~Scope() {
  if (!ok_) return;
  CUcontext popped = nullptr;
  context_calls().pop(&popped);
}

}  // namespace cudanms::detail
