#include "event_history.h"

#include <algorithm>
#include <chrono>

#include "log.h"

namespace cudanms::service {
namespace {

constexpr size_t kBatch = 512;
constexpr int kRetryMs = 250;  // a batch the database refused is tried again after this
constexpr gint64 kGiveUpUs = 5 * G_USEC_PER_SEC;  // at the exit, the most it waits for one

}  // namespace

std::unique_ptr<EventHistory> EventHistory::open(const std::string &where, std::string *error,
                                                 size_t queue_limit) {
  std::unique_ptr<HistoryStore> store = open_history_store(where, error);
  if (!store) return nullptr;
  return std::unique_ptr<EventHistory>(new EventHistory(std::move(store), queue_limit));
}

EventHistory::EventHistory(std::unique_ptr<HistoryStore> store, size_t queue_limit)
    : store_(std::move(store)), queue_limit_(queue_limit) {
  thread_ = std::thread([this] { write_batches(); });
}

EventHistory::~EventHistory() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    stopping_ = true;
    stopped_us_ = g_get_monotonic_time();
  }
  woken_.notify_one();
  thread_.join();
}

bool EventHistory::add(HistoryEvent event) {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (queue_.size() >= queue_limit_) {
      stats_.dropped++;
      return false;
    }
    queue_.push_back(std::move(event));
    added_++;
  }
  woken_.notify_one();
  return true;
}

bool EventHistory::flush(gint64 timeout_us) {
  std::unique_lock<std::mutex> lock(lock_);
  const guint64 target = added_;
  return written_.wait_for(lock, std::chrono::microseconds(timeout_us),
                           [&] { return done_ >= target; });
}

void EventHistory::write_batches() {
  std::unique_lock<std::mutex> lock(lock_);
  for (;;) {
    woken_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, all written
    const size_t n = std::min(queue_.size(), kBatch);
    std::vector<HistoryEvent> batch(queue_.begin(), queue_.begin() + n);
    lock.unlock();
    std::string error;
    const bool ok = store_->write(batch, &error);
    lock.lock();
    if (ok) {
      queue_.erase(queue_.begin(), queue_.begin() + n);
      done_ += n;
      stats_.written += n;
      written_.notify_all();
      continue;
    }
    // Kept at the front, in order; tried again (a stopping history too: what was counted is
    // written once the database answers).
    stats_.failures++;
    stats_.last_error = error;
    if (stopping_ && g_get_monotonic_time() - stopped_us_ > kGiveUpUs) {
      stats_.dropped += queue_.size();  // a database that never answers does not hold the exit
      done_ += queue_.size();
      queue_.clear();
      written_.notify_all();
      return;
    }
    // New events do not cut the wait short: a database down is asked again every kRetryMs,
    // not once an event.
    woken_.wait_for(lock, std::chrono::milliseconds(kRetryMs), [] { return false; });
  }
}

bool EventHistory::query(const HistoryQuery &query, std::vector<HistoryEvent> *out,
                         std::string *error) {
  return store_->page(query, out, error);
}

bool EventHistory::hourly(const HistoryQuery &query, std::vector<HourlyCrossings> *out,
                          std::string *error) {
  return store_->hourly(query, out, error);
}

bool EventHistory::has_camera(const std::string &camera) { return store_->has_camera(camera); }

bool EventHistory::file_of(gint64 seq, EventFile file, std::string *path, std::string *host) {
  return store_->file_of(seq, file, path, host);
}

bool EventHistory::forget_files(const std::vector<std::string> &paths, std::string *error) {
  return store_->forget_files(paths, error);
}

HistoryStats EventHistory::stats() const {
  std::lock_guard<std::mutex> guard(lock_);
  HistoryStats out = stats_;
  out.queued = queue_.size();
  return out;
}

std::shared_ptr<EventHistory> open_host_history(const std::string &where) {
  if (where.empty()) return nullptr;
  std::string error;
  std::shared_ptr<EventHistory> history = EventHistory::open(where, &error);
  if (history)
    log_line("the events' history in %s", history_name(where).c_str());
  else
    log_line("cannot keep the events' history: %s; the cameras run, their events are not kept",
             error.c_str());
  return history;
}

}  // namespace cudanms::service
