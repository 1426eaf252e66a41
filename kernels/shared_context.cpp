#include "cudanms/shared_context.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

namespace cudanms {

// A caller's frame, on its stack until `done`.
struct SharedContext::Call {
  const CandidatesView *host = nullptr;
  const DeviceCandidatesView *device = nullptr;
  const Params *params = nullptr;
  Result *result = nullptr;
  Status status;
  bool done = false;
};

SharedContext::SharedContext(std::unique_ptr<Context> context) : context_(std::move(context)) {}

Status SharedContext::run(const CandidatesView &candidates, const Params &params, Result *result) {
  Call call;
  call.host = &candidates;
  call.params = &params;
  call.result = result;
  return submit(&call);
}

Status SharedContext::run(const DeviceCandidatesView &candidates, const Params &params,
                          Result *result) {
  Call call;
  call.device = &candidates;
  call.params = &params;
  call.result = result;
  return submit(&call);
}

SharedContext::Stats SharedContext::stats() const {
  std::lock_guard<std::mutex> guard(lock_);
  return stats_;
}

size_t SharedContext::waiting() const {
  std::lock_guard<std::mutex> guard(lock_);
  return waiting_.size();
}

Status SharedContext::submit(Call *call) {
  if (call->result == nullptr) return Status::Error("result is null");
  if (context_ == nullptr) return Status::Error("no context to run on (Context::create failed)");
  std::unique_lock<std::mutex> lock(lock_);
  waiting_.push_back(call);
  while (!call->done) {
    if (running_) {
      turn_done_.wait(lock);
      continue;
    }
    // Idle: this thread runs every waiting call, its own among them.
    running_ = true;
    turn_.swap(waiting_);
    lock.unlock();
    run_turn();
    lock.lock();
    stats_.frames += turn_.size();
    stats_.turns += 1;
    stats_.largest = std::max<uint64_t>(stats_.largest, turn_.size());
    if (host_.size() > 1) stats_.batched += host_.size();
    for (Call *c : turn_) c->done = true;
    turn_.clear();
    running_ = false;
    turn_done_.notify_all();
  }
  return call->status;
}

// Never throws: a thread waiting on `running_` would wait for ever.
void SharedContext::run_turn() {
  host_.clear();
  try {
    for (Call *c : turn_) {
      if (c->device != nullptr) {
        c->status = context_->run(*c->device, *c->params, c->result);
      } else {
        host_.push_back(c);
      }
    }
    if (host_.size() == 1) {
      host_[0]->status = context_->run(*host_[0]->host, *host_[0]->params, host_[0]->result);
    } else if (host_.size() > 1) {
      frames_.clear();
      for (Call *c : host_) frames_.push_back({*c->host, *c->params});
      if (context_->run(frames_, &results_).ok()) {
        for (size_t k = 0; k < host_.size(); ++k) {
          std::swap(*host_[k]->result, results_[k]);
          host_[k]->status = Status::Ok();
        }
      } else {
        // One frame's bad input fails a whole batch, before any work: each caller gets its own
        // frame's status.
        for (Call *c : host_) c->status = context_->run(*c->host, *c->params, c->result);
      }
    }
  } catch (const std::bad_alloc &) {
    for (Call *c : turn_) c->status = Status::Error("out of host memory for a batch of frames");
  } catch (const std::exception &e) {
    for (Call *c : turn_) c->status = Status::Error(e.what());
  }
}

}  // namespace cudanms
