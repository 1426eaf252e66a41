#include "gpu_memory.h"

#include <cudanms/nms.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>

namespace cudanms::service {
namespace {

// The few NVML declarations used (nvml.h, stable ABI since CUDA 11).
using nvmlDevice_t = struct nvmlDevice_st *;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;

struct Nvml {
  int (*init)() = nullptr;
  int (*count)(unsigned *) = nullptr;
  int (*handle)(unsigned, nvmlDevice_t *) = nullptr;
  int (*memory)(nvmlDevice_t, nvmlMemory_t *) = nullptr;
  int (*processes)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *) = nullptr;
  int (*uuid)(nvmlDevice_t, char *, unsigned) = nullptr;
  bool ready = false;
};

const Nvml &nvml() {
  static const Nvml loaded = [] {
    Nvml n;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return n;
    n.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.count = reinterpret_cast<int (*)(unsigned *)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    n.handle = reinterpret_cast<int (*)(unsigned, nvmlDevice_t *)>(
        dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    n.memory = reinterpret_cast<int (*)(nvmlDevice_t, nvmlMemory_t *)>(
        dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    n.processes = reinterpret_cast<int (*)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *)>(
        dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
    n.uuid =
        reinterpret_cast<int (*)(nvmlDevice_t, char *, unsigned)>(dlsym(lib, "nvmlDeviceGetUUID"));
    n.ready = n.init && n.count && n.handle && n.memory && n.init() == kNvmlSuccess;
    return n;
  }();
  return loaded;
}

}  // namespace

int cuda_index_of(const std::string &uuid, const std::vector<std::string> &cuda_uuids) {
  for (size_t i = 0; i < cuda_uuids.size(); ++i)
    if (!uuid.empty() && cuda_uuids[i] == uuid) return static_cast<int>(i);
  return -1;
}

std::vector<GpuMemory> gpu_memory() {
  std::vector<GpuMemory> out;
  const Nvml &n = nvml();
  unsigned count = 0;
  if (!n.ready || n.count(&count) != kNvmlSuccess) return out;
  static const std::vector<std::string> cuda_uuids = [] {
    std::vector<std::string> uuids;
    for (int d = 0; d < cudanms::cuda_device_count(); ++d)
      uuids.push_back(cudanms::cuda_device_uuid(d));
    return uuids;
  }();
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    nvmlMemory_t memory{};
    if (n.handle(i, &device) != kNvmlSuccess || n.memory(device, &memory) != kNvmlSuccess) continue;
    GpuMemory gpu;
    gpu.index = i;
    if (!cuda_uuids.empty()) {
      char uuid[96] = "";
      const int cuda = n.uuid && n.uuid(device, uuid, sizeof uuid) == kNvmlSuccess
                           ? cuda_index_of(uuid, cuda_uuids)
                           : -1;
      if (cuda < 0) continue;  // hidden from this process (CUDA_VISIBLE_DEVICES)
      gpu.index = static_cast<unsigned>(cuda);
    }
    gpu.used = memory.used;
    gpu.total = memory.total;
    if (n.processes) {
      std::vector<nvmlProcessInfo_t> infos(64);
      unsigned found = static_cast<unsigned>(infos.size());
      int rc = n.processes(device, &found, infos.data());
      if (rc == kNvmlInsufficientSize) {
        infos.resize(found + 16);
        found = static_cast<unsigned>(infos.size());
        rc = n.processes(device, &found, infos.data());
      }
      for (unsigned k = 0; rc == kNvmlSuccess && k < found; ++k) {
        if (infos[k].pid != static_cast<unsigned>(getpid())) continue;
        gpu.process_known = true;
        gpu.process = infos[k].usedGpuMemory;
      }
    }
    out.push_back(gpu);
  }
  std::sort(out.begin(), out.end(),
            [](const GpuMemory &a, const GpuMemory &b) { return a.index < b.index; });
  return out;
}

}  // namespace cudanms::service
