/* Batching across cameras: dnndetect elements of one process with the same batch group and
 * network settings share one DnnDetector, and their frames run through one forward.
 *
 * Each element's streaming thread hands in its frame (submit) and waits for it (wait), at once or
 * after handing in its next one, which then joins the next batch. The group's runner thread forms
 * the batches: a batch runs once batch-size frames are in, or a frame from every live member (no
 * further frame can come: each member waits on its own), or the timeout after its first frame
 * came. The runner launches it and goes on to the next without waiting for the GPU: each frame's
 * own thread waits for its candidates (cudanms for their event where they stay on the GPU; wait()
 * collects them where they go to the host), so that with a queue after the detector or frames in
 * flight the next batch fills and launches while this one runs on the GPU. The network always runs
 * on that one thread: LibTorch makes cuDNN and cuBLAS handles per thread, ~50 ms each time a new
 * thread runs it. A member without a frame in a batch that timed out (a camera gone quiet) is not
 * waited for again until its next frame: it costs the others one timeout, not one per batch. Each
 * waiting frame is woken alone, and the runner only by a batch's first frame and the frame that
 * fills it: 32 cameras must not wake each other 32 times a batch (they did, through one condition
 * variable, a lock convoy on every batch). No GStreamer.
 *
 *   auto member = DnnBatchGroup::join(options, &why);   // in start(); leaves when destroyed
 *   auto ticket = member->submit(&job);                 // in transform_ip(), per frame
 *   member->wait(ticket);                               // then, or after the next frame
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

  struct Waiting;
  /* A frame handed in: its batch's outcome once wait() returns. */
  using Ticket = std::shared_ptr<Waiting>;

  class Member {
   public:
    ~Member();
    Member(const Member &) = delete;
    Member &operator=(const Member &) = delete;
    /* Hands the job's frame to the next batch this member has no frame in (it waits while the
     * batch filling up holds one of its frames or is full); the job must stay until wait(). */
    Ticket submit(DnnJob *job);
    /* Returns once the frame's candidates are written (device candidates: once their work is
     * queued), with its batch's status. Once a ticket. */
    cudanms::Status wait(const Ticket &ticket);
    /* Whether wait() would return without waiting for the batch. */
    bool done(const Ticket &ticket);
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
  using Batch = std::vector<Ticket>;

  DnnBatchGroup(const Options &options, std::unique_ptr<DnnDetector> detector);
  Ticket submit(const Member *member, DnnJob *job);
  cudanms::Status wait(const Ticket &ticket);
  bool done(const Ticket &ticket);
  /* The batch through the detector; each frame's fill and launch times set. */
  cudanms::Status run(const Batch &batch, Clock::time_point filling_since);
  void run_batches();                             /* the runner thread */
  size_t full() const;                            /* under lock_ */
  bool filling_holds(const Member *member) const; /* under lock_ */
  void mark_absent_quiet(const Batch &batch);     /* under lock_ */
  void enter(const Member *member);
  void leave(const Member *member);

  const Options options_;
  const std::unique_ptr<DnnDetector> detector_;
  std::mutex lock_;                      /* guards what follows */
  std::condition_variable runner_woken_; /* a first frame, a full batch, a member gone, stopping */
  std::condition_variable room_;         /* the pending batch taken: frames held back may enter */
  Batch pending_;                        /* the batch filling up */
  Clock::time_point filling_since_;      /* its first frame's arrival */
  std::map<const Member *, bool> quiet_; /* every member: absent from the last timed-out batch */
  int live_ = 0;                         /* members not quiet */
  bool stopping_ = false;
  std::thread runner_; /* batch-size > 1; else the frame's own thread runs it */
};
