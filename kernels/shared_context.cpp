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
    std::vector<Call *> turn;
    turn.swap(waiting_);
    lock.unlock();
    run_turn(turn);
    lock.lock();
    const uint64_t host = std::count_if(turn.begin(), turn.end(), [](Call *c) { return c->host; });
    stats_.frames += turn.size();
    stats_.turns += 1;
    stats_.largest = std::max<uint64_t>(stats_.largest, turn.size());
    if (host > 1) stats_.batched += host;
    for (Call *c : turn) c->done = true;
    running_ = false;
    turn_done_.notify_all();
  }
  return call->status;
}

// Never throws: a thread waiting on `running_` would wait for ever.
void SharedContext::run_turn(const std::vector<Call *> &calls) {
  try {
    frames_.clear();
    std::vector<Call *> host;
    for (Call *c : calls) {
      if (c->device != nullptr) {
        c->status = context_->run(*c->device, *c->params, c->result);
      } else {
        host.push_back(c);
        frames_.push_back({*c->host, *c->params});
      }
    }
    if (host.size() == 1) {
      host[0]->status = context_->run(*host[0]->host, *host[0]->params, host[0]->result);
    } else if (host.size() > 1) {
      if (context_->run(frames_, &results_).ok()) {
        for (size_t k = 0; k < host.size(); ++k) {
          std::swap(*host[k]->result, results_[k]);
          host[k]->status = Status::Ok();
        }
      } else {
        // One frame's bad input fails a whole batch, before any work: each caller gets its own
        // frame's status.
        for (Call *c : host) c->status = context_->run(*c->host, *c->params, c->result);
      }
    }
  } catch (const std::bad_alloc &) {
    for (Call *c : calls) c->status = Status::Error("out of host memory for a batch of frames");
  } catch (const std::exception &e) {
    for (Call *c : calls) c->status = Status::Error(e.what());
  }
}

}  // namespace cudanms
