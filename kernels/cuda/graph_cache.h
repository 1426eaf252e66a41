// CUDA graphs of launch sequences, one per key, replayed instead of submitted launch by launch:
// one submission in place of six for the host frames of the CUDA backend.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda_device.h"

namespace cudanms::detail {

// `Key` is what the captured launches depend on (their parameters travel in device memory). At
// most `limit` graphs are kept, the oldest dropped first. The caller's context must be current.
template <typename Key>
class GraphCache {
 public:
  explicit GraphCache(size_t limit) : limit_(limit) {}
  ~GraphCache() { clear(); }
  GraphCache(const GraphCache &) = delete;
  GraphCache &operator=(const GraphCache &) = delete;

  // Launches the graph of `key` on `stream`, capturing what `submit` puts on the stream the first
  // time. A graph holds the addresses it was captured with: all are dropped when `memory`, a
  // count of the moves of the memory they use, has changed since. Where the stream cannot be
  // captured (a caller's legacy stream), submits directly.
  template <typename Submit>
  Status replay(const Key &key, uint64_t memory, cudaStream_t stream, Submit submit) {
    if (memory != memory_) {
      clear();
      memory_ = memory;
    }
    auto found = std::find_if(graphs_.begin(), graphs_.end(),
                              [&key](const auto &graph) { return graph.first == key; });
    if (found == graphs_.end()) {
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return submit();
      }
      const Status submitted = submit();
      cudaGraph_t graph = nullptr;
      const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made =
          captured == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : captured;
      if (graph) cudaGraphDestroy(graph);
      if (!submitted.ok()) return submitted;
      CUDANMS_CUDA_TRY(made);
      if (graphs_.size() == limit_) {
        cudaGraphExecDestroy(graphs_.front().second);
        graphs_.erase(graphs_.begin());
      }
      graphs_.emplace_back(key, exec);
      found = graphs_.end() - 1;
    }
    CUDANMS_CUDA_TRY(cudaGraphLaunch(found->second, stream));
    return Status::Ok();
  }

  void clear() {
    for (const auto &graph : graphs_) cudaGraphExecDestroy(graph.second);
    graphs_.clear();
  }

 private:
  size_t limit_;
  uint64_t memory_ = 0;
  std::vector<std::pair<Key, cudaGraphExec_t>> graphs_;  // oldest first
};

}  // namespace cudanms::detail
