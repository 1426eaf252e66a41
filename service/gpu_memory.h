// GPU memory as nvidia-smi reports it, through NVML, loaded when the service asks (no link-time
// dependency: a machine without NVIDIA's driver simply has no GPUs to report). NVML needs no
// CUDA context, so asking never costs GPU memory itself.
#pragma once

#include <cstdint>
#include <vector>

namespace cudanms::service {

struct GpuMemory {
  unsigned index = 0;      // nvidia-smi's (NVML's) index
  std::uint64_t used = 0;  // bytes in use on the device, by every process
  std::uint64_t total = 0;
  bool process_known = false;  // NVML lists this process (not in a PID namespace of its own)
  std::uint64_t process = 0;   // bytes this process holds on the device
};

// Every GPU of the host; empty without NVIDIA's driver.
std::vector<GpuMemory> gpu_memory();

}  // namespace cudanms::service
