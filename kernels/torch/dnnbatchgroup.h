/* Batching across cameras: dnndetect elements of one process with the same batch group and
 * network settings share one DnnDetector, and their frames run through one forward.
 *
 * Each element's streaming thread hands in its frame and waits. The group's runner thread forms
 * the batches: a batch runs once batch-size frames are in, or a frame from every live member (no
 * further frame can come: each member waits on its own), or the timeout after its first frame
 * came. The runner then launches it and every frame's candidates go back to its own element;
 * where the candidates stay on the GPU, launched is enough (cudanms waits for their event), so
 * that with a queue after the detector the next batch fills and launches while this one runs on
 * the GPU. The network always runs on that one thread: LibTorch makes cuDNN and cuBLAS handles
 * per thread, ~50 ms each time a new thread runs it. A member without a frame in a batch that
 * timed out (a camera gone quiet) is not waited for again until its next frame: it costs the
 * others one timeout, not one per batch. Each waiting frame is woken alone, and the runner only
 * by a batch's first frame and the frame that fills it: 32 cameras must not wake each other 32
 * times a batch (they did, through one condition variable, a lock convoy on every batch). No
 * GStreamer.
 *
 *   auto member = DnnBatchGroup::join(options, &why);   // in start(); leaves when destroyed
 *   member->detect(&job);                               // in transform_ip(), per frame
 */
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
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
    /* Runs the job's frame in a batch; returns once its candidates are written (device
     * candidates: once their work is queued). */
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
  using Clock = std::chrono::steady_clock;
  struct Waiting {
    const Member *member = nullptr;
    DnnJob *job = nullptr;
    bool done = false;
    cudanms::Status status;
    std::condition_variable woken; /* done */
  };

  DnnBatchGroup(const Options &options, std::unique_ptr<DnnDetector> detector);
  cudanms::Status detect(const Member *member, DnnJob *job);
  /* The batch through the detector; each frame's status, fill and launch times set. */
  cudanms::Status run(const std::vector<Waiting *> &batch, Clock::time_point filling_since);
  void run_batches();                                          /* the runner thread */
  size_t full() const;                                         /* under lock_ */
  void mark_absent_quiet(const std::vector<Waiting *> &batch); /* under lock_ */
  void enter(const Member *member);
  void leave(const Member *member);

  const Options options_;
  const std::unique_ptr<DnnDetector> detector_;
  std::mutex lock_;                      /* guards what follows */
  std::condition_variable runner_woken_; /* a first frame, a full batch, a member gone, stopping */
  std::condition_variable room_;         /* the pending batch taken: frames held back may enter */
  std::vector<Waiting *> pending_;       /* the batch filling up */
  Clock::time_point filling_since_;      /* its first frame's arrival */
  std::map<const Member *, bool> quiet_; /* every member: absent from the last timed-out batch */
  int live_ = 0;                         /* members not quiet */
  bool stopping_ = false;
  std::thread runner_; /* batch-size > 1; else the frame's own thread runs it */
};
