// One NMS context for several threads: the frames of many camera streams batched on one GPU.
//
//   auto shared = std::make_shared<cudanms::SharedContext>(cudanms::Context::create(options, &s));
//   // on each stream's thread:
//   status = shared->run({boxes, scores, class_ids, n}, params, &result);
//
// A call that finds the context idle runs at once. Calls that arrive while it runs wait, and when
// it ends they go on together as the next batch: one Context::run of several frames, on CUDA one
// launch sequence and one synchronisation for them all (the benchmark's batch rows: 64 frames of
// 300 candidates cost 1.7 us a frame on an H100, one such frame alone 22 us). The thread that
// finds the context idle runs the batch for the others ("flat combining"), so no thread is added
// and a lone stream waits for nothing. Each caller gets the Status and Result that Context::run
// gives its frame alone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms {

class SharedContext {
 public:
  // Takes a context from Context::create. Given none (create failed), every run() is an error.
  explicit SharedContext(std::unique_ptr<Context> context);
  SharedContext(const SharedContext &) = delete;
  SharedContext &operator=(const SharedContext &) = delete;

  // Context::run, from any thread, batched with the calls that arrive while another runs.
  Status run(const CandidatesView &candidates, const Params &params, Result *result);
  // Context::run on device candidates, from any thread; each runs as a frame of its own (a
  // batch takes host candidates only), in turn with the batches.
  Status run(const DeviceCandidatesView &candidates, const Params &params, Result *result);

  // For backend(), device_name() and cuda_context(); its run() must not be called. Null where
  // the SharedContext was given none.
  const Context *context() const { return context_.get(); }

  // A turn: the calls that waited for the same end of a run, host frames as one batch.
  struct Stats {
    uint64_t frames = 0;  // calls run
    uint64_t turns = 0;
    uint64_t largest = 0;  // the most calls in one turn
    uint64_t batched = 0;  // host frames that ran in a batch of more than one
  };
  Stats stats() const;
  // The calls waiting for the next turn now.
  size_t waiting() const;

 private:
  struct Call;
  Status submit(Call *call);
  void run_turn();

  std::unique_ptr<Context> context_;
  mutable std::mutex lock_;
  std::condition_variable turn_done_;
  bool running_ = false;         // a thread is running a turn
  std::vector<Call *> waiting_;  // calls for the next turn
  Stats stats_;
  // The running turn's, reused so that a frame allocates nothing here: only the thread running a
  // turn touches them (turn_ swaps its emptied buffer with waiting_'s).
  std::vector<Call *> turn_;
  std::vector<Call *> host_;
  std::vector<Frame> frames_;
  std::vector<Result> results_;
};

}  // namespace cudanms
