#include "dnnbatchgroup.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <map>

using cudanms::Status;

namespace {

std::mutex registry_lock;
/* The running groups of batch-size > 1, by options; a group goes when its last member does. */
std::map<std::string, std::weak_ptr<DnnBatchGroup>> &registry() {
  static auto *groups = new std::map<std::string, std::weak_ptr<DnnBatchGroup>>();
  return *groups;
}

std::string key_of(const DnnBatchGroup::Options &options) {
  return options.name + '\n' + std::to_string(options.batch_size) + ' ' +
         std::to_string(options.timeout_us) + '\n' + options.config.key();
}

}  // namespace

std::unique_ptr<DnnBatchGroup::Member> DnnBatchGroup::join(const Options &options, std::string *why,
                                                           std::string *detail) {
  std::shared_ptr<DnnBatchGroup> group;
  std::lock_guard<std::mutex> guard(registry_lock);
  const std::string key = key_of(options);
  if (options.batch_size > 1) {
    for (auto it = registry().begin(); it != registry().end();)
      it = it->second.expired() ? registry().erase(it) : std::next(it);
    auto found = registry().find(key);
    if (found != registry().end()) group = found->second.lock();
  }
  if (!group) {
    std::unique_ptr<DnnDetector> detector = DnnDetector::open(options.config, why, detail);
    if (!detector) return nullptr;
    const Status warmed = detector->warm_up(options.batch_size);
    if (!warmed.ok()) {
      *why = "cannot run a batch of " + std::to_string(options.batch_size) + " frames";
      *detail = warmed.message();
      return nullptr;
    }
    group.reset(new DnnBatchGroup(options, std::move(detector)));
    if (options.batch_size > 1) registry()[key] = group;
  }
  DnnBatchGroup *joined = group.get();
  std::unique_ptr<Member> member(new Member(std::move(group)));
  joined->enter(member.get());
  return member;
}

DnnBatchGroup::DnnBatchGroup(const Options &options, std::unique_ptr<DnnDetector> detector)
    : options_(options), detector_(std::move(detector)) {
  if (options_.batch_size > 1) runner_ = std::thread([this] { run_batches(); });
}

DnnBatchGroup::~DnnBatchGroup() {
  if (!runner_.joinable()) return;
  {
    std::lock_guard<std::mutex> guard(lock_);
    stopping_ = true;
  }
  runner_woken_.notify_one();
  runner_.join();
}

DnnBatchGroup::Member::~Member() { group_->leave(this); }

struct DnnBatchGroup::Waiting {
  const Member *member = nullptr;
  DnnJob *job = nullptr;
  bool done = false; /* under the group's lock */
  Status status;
  std::condition_variable woken; /* done */
};

DnnBatchGroup::Ticket DnnBatchGroup::Member::submit(DnnJob *job) {
  return group_->submit(this, job);
}

Status DnnBatchGroup::Member::wait(const Ticket &ticket) { return group_->wait(ticket); }

bool DnnBatchGroup::Member::done(const Ticket &ticket) { return group_->done(ticket); }

const DnnDetector &DnnBatchGroup::Member::detector() const { return *group_->detector_; }

void DnnBatchGroup::enter(const Member *member) {
  std::lock_guard<std::mutex> guard(lock_);
  quiet_[member] = false;
  live_++;
  room_.notify_all(); /* a bigger batch: frames held back by a full one may enter */
}

void DnnBatchGroup::leave(const Member *member) {
  std::lock_guard<std::mutex> guard(lock_);
  if (!quiet_[member]) live_--;
  quiet_.erase(member);
  runner_woken_.notify_one(); /* a batch waiting for every member may be complete now */
}

size_t DnnBatchGroup::full() const {
  const int limit = std::min({options_.batch_size, std::max(1, live_), cudanms::dnn::kMaxBatch});
  return static_cast<size_t>(limit);
}

bool DnnBatchGroup::filling_holds(const Member *member) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const Ticket &w) { return w->member == member; });
}

DnnBatchGroup::Ticket DnnBatchGroup::submit(const Member *member, DnnJob *job) {
  auto me = std::make_shared<Waiting>();
  me->member = member;
  me->job = job;
  if (!runner_.joinable()) { /* batch-size 1: no waiting */
    me->status = run({me}, Clock::now());
    std::lock_guard<std::mutex> guard(lock_);
    me->done = true;
    return me;
  }
  std::unique_lock<std::mutex> lock(lock_);
  bool &quiet = quiet_[member];
  if (quiet) quiet = false, live_++; /* back: waited for again */
  /* One frame of a member a batch; a full batch not yet taken by the runner: this frame waits
   * for the next one. */
  room_.wait(lock, [&] { return pending_.size() < full() && !filling_holds(member); });
  pending_.push_back(me);
  if (pending_.size() == 1) filling_since_ = Clock::now();
  if (pending_.size() == 1 || pending_.size() >= full()) {
    lock.unlock(); /* woken, the runner takes the lock at once rather than sleep on it again */
    runner_woken_.notify_one();
  }
  return me;
}

Status DnnBatchGroup::wait(const Ticket &ticket) {
  {
    std::unique_lock<std::mutex> lock(lock_);
    ticket->woken.wait(lock, [&] { return ticket->done; });
    if (!ticket->status.ok()) return ticket->status;
  }
  return ticket->job->collect(); /* the GPU waited for on this frame's thread, not the runner's */
}

bool DnnBatchGroup::done(const Ticket &ticket) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (!ticket->done) return false;
  }
  return !ticket->job->download || ticket->job->download->ready();
}

void DnnBatchGroup::mark_absent_quiet(const Batch &batch) {
  for (auto &[member, quiet] : quiet_) {
    const bool in_batch = std::any_of(batch.begin(), batch.end(),
                                      [&](const Ticket &w) { return w->member == member; });
    if (!in_batch && !quiet) quiet = true, live_--;
  }
}

Status DnnBatchGroup::run(const Batch &batch, Clock::time_point filling_since) {
  DnnJob *jobs[cudanms::dnn::kMaxBatch];
  for (size_t i = 0; i < batch.size(); i++) jobs[i] = batch[i]->job;
  const auto launched = Clock::now();
  const Status status = detector_->launch(jobs, static_cast<int>(batch.size()));
  const auto ran = Clock::now();
  using Ms = std::chrono::duration<double, std::milli>;
  for (size_t i = 0; i < batch.size(); i++) {
    jobs[i]->fill_ms = Ms(launched - filling_since).count();
    jobs[i]->launch_ms = Ms(ran - launched).count();
  }
  return status;
}

void DnnBatchGroup::run_batches() {
  pthread_setname_np(pthread_self(), "dnn-batches"); /* told apart in top -H and /proc */
  std::unique_lock<std::mutex> lock(lock_);
  for (;;) {
    runner_woken_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return; /* stopping: no member is left to send a frame */
    const auto deadline = filling_since_ + std::chrono::microseconds(options_.timeout_us);
    if (!runner_woken_.wait_until(lock, deadline, [&] { return pending_.size() >= full(); }))
      mark_absent_quiet(pending_);
    Batch batch;
    batch.swap(pending_);
    const Clock::time_point filling_since = filling_since_;
    lock.unlock();
    /* Woken after the lock is let go: a thread woken under it would only sleep again on the lock
     * (on a host whose CPUs are busy, each such second wake waits for a CPU). */
    room_.notify_all();
    const Status status = run(batch, filling_since);
    lock.lock();
    for (const Ticket &w : batch) {
      w->status = status;
      w->done = true;
    }
    lock.unlock();
    for (const Ticket &w : batch) w->woken.notify_one(); /* the batch holds each ticket */
    lock.lock();
  }
}
