/* Batching across cameras: dnndetect elements of one process with the same batch group and
 * network settings share one DnnDetector, and their frames run through one forward.
 *
 * Each element's streaming thread hands in its frame and waits. The first frame of a batch
 * waits for more, until batch-size frames are in, or a frame from every live member (no further
 * frame can come: each member waits on its own), or the timeout after it came; then the group's
 * runner thread runs the batch and every frame's candidates go back to its own element. One
 * batch runs at a time; the next one fills meanwhile. The network always runs on that one
 * thread: LibTorch makes cuDNN and cuBLAS handles per thread, ~50 ms each time a new thread runs
 * it, which a different streaming thread leading each batch paid again and again. A member without
 * a frame in a batch that timed out (a camera gone quiet) is not waited for again until its next
 * frame: it costs the others one timeout, not one per batch. No GStreamer.
 *
 *   auto member = DnnBatchGroup::join(options, &why);   // in start(); leaves when destroyed
 *   member->detect(&job);                               // in transform_ip(), per frame
 */
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dnndetector.h"

class DnnBatchGroup {
 public:
  struct Options {
    std::string name; /* instances batch together only within one name */
    DnnDetectorConfig config;
    int batch_size = 1;     /* 1: the element's own detector, no waiting */
    int64_t timeout_us = 0; /* the longest a frame waits for others */
  };

  class Member {
   public:
    ~Member();
    Member(const Member &) = delete;
    Member &operator=(const Member &) = delete;
    /* Runs the job's frame in a batch; returns once its candidates are written. */
    cudanms::Status detect(DnnJob *job);
    const DnnDetector &detector() const;

   private:
    friend class DnnBatchGroup;
    explicit Member(std::shared_ptr<DnnBatchGroup> group) : group_(std::move(group)) {}
    std::shared_ptr<DnnBatchGroup> group_;
  };

  /* A member of the group these options name: the running group with equal options, or a new
   * one (its detector opened now: nullptr with DnnDetector::open's *why and *detail when that
   * fails). */
  static std::unique_ptr<Member> join(const Options &options, std::string *why,
                                      std::string *detail);

  ~DnnBatchGroup();

 private:
  struct Waiting {
    const Member *member = nullptr;
    DnnJob *job = nullptr;
    bool done = false;
    cudanms::Status status;
  };

  DnnBatchGroup(const Options &options, std::unique_ptr<DnnDetector> detector);
  cudanms::Status detect(const Member *member, DnnJob *job);
  void run(const std::vector<Waiting *> &batch); /* then each frame's status, done */
  void run_batches();                            /* the runner thread */
  size_t full() const;                           /* under lock_ */
  void enter(const Member *member);
  void leave(const Member *member);

  const Options options_;
  const std::unique_ptr<DnnDetector> detector_;
  std::mutex lock_; /* guards what follows */
  std::condition_variable changed_;
  std::vector<Waiting *> pending_;       /* the batch filling up */
  std::map<const Member *, bool> quiet_; /* every member: absent from the last timed-out batch */
  int live_ = 0;                         /* members not quiet */
  std::deque<std::vector<Waiting *>> ready_; /* batches for the runner */
  bool stopping_ = false;
  std::thread runner_; /* batch-size > 1; else the frame's own thread runs it */
};
