// One NMS context for several threads: the frames of many camera streams batched on one GPU.
//
//   auto shared = std::make_shared<cudanms::SharedContext>(cudanms::Context::create(options, &s));
//   // on each stream's thread:
//   status = shared->run({boxes, scores, class_ids, n}, params, &result);
//
// A call that finds a context idle runs at once. Calls that arrive while every context runs wait,
// and when one ends they go on together as the next batch: one Context::run of several frames, on
// CUDA one launch sequence and one synchronisation for them all (the benchmark's batch rows: 64
// frames of 300 candidates cost 1.7 us a frame on an H100, one such frame alone 22 us). The thread
// that finds a context idle runs the batch for the others ("flat combining"), so no thread is added
// and a lone stream waits for nothing. Each caller gets the Status and Result that Context::run
// gives its frame alone.
//
// Several contexts (the second constructor) run that many turns at once, so callers wait only
// while all are busy.
//
// Measured (bench streams rows, H100): sharing does not pay there. Each thread's own context is
// faster, because the contexts' CUDA streams overlap on the GPU while a shared one makes callers
// wait for the turn before theirs. 16 threads of 300 candidates: 192k frames/s through a context
// each; 98k, 122k, 110k and 92k through 1, 2, 4 and 8 shared contexts (32 threads of 1 000: 165k
// against 73k to 101k). What sharing saves is GPU memory and launches, not time.
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
  // Takes contexts from Context::create, alike (same backend and device), each running a turn.
  // Given none, or a null one, every run() is an error.
  explicit SharedContext(std::vector<std::unique_ptr<Context>> contexts);
  SharedContext(const SharedContext &) = delete;
  SharedContext &operator=(const SharedContext &) = delete;

  // Context::run, from any thread, batched with the calls that arrive while another runs.
  Status run(const CandidatesView &candidates, const Params &params, Result *result);
  // Context::run on device candidates, from any thread; each runs as a frame of its own (a
  // batch takes host candidates only), in turn with the batches.
  Status run(const DeviceCandidatesView &candidates, const Params &params, Result *result);

  // The first context, for backend(), device_name() and cuda_context(); its run() must not be
  // called. Null where the SharedContext was given none.
  const Context *context() const;
  size_t contexts() const { return lanes_.size(); }

  // A turn: the calls that one thread runs on one context, host frames as one batch.
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
  // A context and what its turn uses, reused so that a frame allocates nothing here: only the
  // thread running the turn touches them (turn swaps its emptied buffer with waiting_'s).
  struct Lane {
    std::unique_ptr<Context> context;
    bool busy = false;
    std::vector<Call *> turn;
    std::vector<Call *> host;
    std::vector<Frame> frames;
    std::vector<Result> results;
  };
  Status submit(Call *call);
  static void run_turn(Lane *lane);

  std::vector<Lane> lanes_;
  bool usable_ = false;  // given at least one context, none null
  mutable std::mutex lock_;
  std::condition_variable turn_done_;
  std::vector<Call *> waiting_;  // calls that no turn has taken yet
  Stats stats_;
};

}  // namespace cudanms
