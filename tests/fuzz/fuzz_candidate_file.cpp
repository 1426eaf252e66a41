// libFuzzer target: the candidate-file parser (tools/candidate_file.h) on any bytes, then what
// the tool does with a file it accepted: NMS on the CPU, and writing it back, which must read
// back to the same candidates. The first byte picks the format.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "candidate_file.h"
#include "cudanms/nms.h"

using namespace cudanms;
using namespace cudanms::tools;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const FileFormat format = data[0] % 2 ? FileFormat::kCsv : FileFormat::kOro;
  const std::string text(reinterpret_cast<const char *>(data) + 1, size - 1);
  CandidateFile file;
  if (!parse_candidates(text, "fuzz", format, &file).ok()) return 0;

  static Status created;
  static const std::unique_ptr<Context> cpu = Context::create({Backend::kCpu}, &created);
  Params params;
  params.method = data[0] & 2 ? Method::kMatrix : Method::kGreedy;
  params.overlap = static_cast<Overlap>((data[0] >> 2) % 3);
  Result result;
  if (!cpu->run(file.candidates.view(), params, &result).ok()) std::abort();
  if (result.kept.size() > file.candidates.size()) std::abort();

  std::string written;
  if (!format_candidates(file.candidates, format, &written).ok()) std::abort();
  CandidateFile again;
  if (!parse_candidates(written, "written", format, &again).ok()) std::abort();
  if (again.candidates.boxes != file.candidates.boxes ||
      again.candidates.scores != file.candidates.scores ||
      again.candidates.classes != file.candidates.classes)
    std::abort();
  return 0;
}
