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
  bool taken = false;  // by a turn
  bool done = false;
};

namespace {

std::vector<std::unique_ptr<Context>> only(std::unique_ptr<Context> context) {
  std::vector<std::unique_ptr<Context>> contexts;
  contexts.push_back(std::move(context));
  return contexts;
}

}  // namespace

SharedContext::SharedContext(std::unique_ptr<Context> context)
    : SharedContext(only(std::move(context))) {}

SharedContext::SharedContext(std::vector<std::unique_ptr<Context>> contexts)
    : lanes_(contexts.size()) {
  usable_ = !contexts.empty();
  for (size_t k = 0; k < contexts.size(); ++k) {
    usable_ = usable_ && contexts[k] != nullptr;
    lanes_[k].context = std::move(contexts[k]);
  }
}

const Context *SharedContext::context() const {
  return lanes_.empty() ? nullptr : lanes_[0].context.get();
}

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
  if (!usable_) return Status::Error("no context to run on (Context::create failed)");
  std::unique_lock<std::mutex> lock(lock_);
  waiting_.push_back(call);
  while (!call->done) {
    auto idle = std::find_if(lanes_.begin(), lanes_.end(), [](const Lane &l) { return !l.busy; });
    if (call->taken || idle == lanes_.end()) {
      turn_done_.wait(lock);
      continue;
    }
    // A context is idle and this call waits: this thread runs every waiting call, its own among
    // them.
    Lane &lane = *idle;
    lane.busy = true;
    lane.turn.swap(waiting_);
    for (Call *c : lane.turn) c->taken = true;
    lock.unlock();
    run_turn(&lane);
    lock.lock();
    stats_.frames += lane.turn.size();
    stats_.turns += 1;
    stats_.largest = std::max<uint64_t>(stats_.largest, lane.turn.size());
    if (lane.host.size() > 1) stats_.batched += lane.host.size();
    for (Call *c : lane.turn) c->done = true;
    lane.turn.clear();
    lane.busy = false;
    turn_done_.notify_all();
  }
  return call->status;
}

// Never throws: a thread waiting for its turn would wait for ever.
void SharedContext::run_turn(Lane *lane) {
  Context &context = *lane->context;
  std::vector<Call *> &host = lane->host;
  host.clear();
  try {
    for (Call *c : lane->turn) {
      if (c->device != nullptr) {
        c->status = context.run(*c->device, *c->params, c->result);
      } else {
        host.push_back(c);
      }
    }
    if (host.size() == 1) {
      host[0]->status = context.run(*host[0]->host, *host[0]->params, host[0]->result);
    } else if (host.size() > 1) {
      lane->frames.clear();
      for (Call *c : host) lane->frames.push_back({*c->host, *c->params});
      if (context.run(lane->frames, &lane->results).ok()) {
        for (size_t k = 0; k < host.size(); ++k) {
          std::swap(*host[k]->result, lane->results[k]);
          host[k]->status = Status::Ok();
        }
      } else {
        // One frame's bad input fails a whole batch, before any work: each caller gets its own
        // frame's status.
        for (Call *c : host) c->status = context.run(*c->host, *c->params, c->result);
      }
    }
  } catch (const std::bad_alloc &) {
    for (Call *c : lane->turn)
      c->status = Status::Error("out of host memory for a batch of frames");
  } catch (const std::exception &e) {
    for (Call *c : lane->turn) c->status = Status::Error(e.what());
  }
}

}  // namespace cudanms
