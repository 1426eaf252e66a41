// The peers the benchmark times on the same data as cudanms, linked in when the build finds them:
// OpenCV's cv::dnn::NMSBoxes on the CPU. (torchvision runs on the GPU host from Python:
// tools/bench_torchvision.py.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "candidate_set.h"
#include "cudanms/nms.h"

namespace cudanms::tools {

class PeerNms {
 public:
  virtual ~PeerNms() = default;
  // Kept indices into the candidates, best score first, as cudanms orders them; an error where
  // the peer threw.
  virtual Status run(std::vector<uint32_t> *kept) = 0;
};

// The OpenCV version the tool was built with, or empty when it was built without OpenCV.
std::string opencv_version();

// cv::dnn::NMSBoxes over `candidates` with params' greedy IoU threshold: one call when
// class-agnostic, otherwise NMSBoxesBatched where OpenCV has it (4.7+) or one call per class.
// For Method::kGroup, cv::groupRectangles (class-agnostic only).
// The boxes are converted to OpenCV's types here, once, so that run() times OpenCV alone. Null,
// with *why set, when OpenCV is not built in or cannot do what params ask.
std::unique_ptr<PeerNms> make_opencv_nms(const CandidateSet &candidates, const Params &params,
                                         std::string *why);

// What make_opencv_nms calls for these params, for the report.
std::string opencv_call(const Params &params);

}  // namespace cudanms::tools
