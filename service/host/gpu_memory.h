// GPU memory as nvidia-smi reports it, through NVML, loaded when the service asks (no link-time
// dependency: a machine without NVIDIA's driver simply has no GPUs to report). NVML needs no
// CUDA context, so asking never costs GPU memory itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cudanms::service {

struct GpuMemory {
  // CUDA's index, as gpus and gpu-id count (CUDA_VISIBLE_DEVICES applied); NVML's (nvidia-smi's)
  // where CUDA sees no device.
  unsigned index = 0;
  std::uint64_t used = 0;  // bytes in use on the device, by every process
  std::uint64_t total = 0;
  bool process_known = false;  // NVML lists this process (not in a PID namespace of its own)
  std::uint64_t process = 0;   // bytes this process holds on the device
};

// Every GPU this process may use (every GPU of the host when CUDA sees none); empty without
// NVIDIA's driver.
std::vector<GpuMemory> gpu_memory();

// The CUDA index of the device with NVML's `uuid` among CUDA's devices' UUIDs; -1 when CUDA does
// not show it.
int cuda_index_of(const std::string &uuid, const std::vector<std::string> &cuda_uuids);

}  // namespace cudanms::service
