// Candidate files, one detection a line, in the two text formats the tool reads and writes:
//
//   oro  x,y,w,score            the benchmark format of Oro et al. (ICASSP 2016): integer x, y
//                               and side w of a square window; the box is x..x+w, y..y+w, class 0
//   csv  x1,y1,x2,y2,score[,class]   float corners, integer class (0 when left out)
//
// Blank lines and lines starting with '#' are skipped in both. Anything else that is not a
// well-formed detection (a missing or extra field, a non-number, NaN or infinity, a negative
// size, a fraction where an integer belongs) rejects the whole file with "FILE:LINE: why".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "candidate_set.h"
#include "cudanms/nms.h"

namespace cudanms::tools {

enum class FileFormat { kOro, kCsv };

const char *to_string(FileFormat format);
bool parse_file_format(const std::string &name, FileFormat *format);
// From the extension: true with *format set for ".csv" and ".oro", false for anything else.
bool file_format_from_extension(const std::string &path, FileFormat *format);

struct CandidateFile {
  CandidateSet candidates;
  // Per candidate: its line as written, less trailing whitespace, so that a subset can be echoed
  // without losing any digit; and its 1-based line number, for messages.
  std::vector<std::string> source_lines;
  std::vector<size_t> line_numbers;
};

// `name` is what messages call the text, normally its path.
Status parse_candidates(const std::string &text, const std::string &name, FileFormat format,
                        CandidateFile *file);
Status read_candidate_file(const std::string &path, FileFormat format, CandidateFile *file);

// One line per candidate, scores written so that they read back to the same float. oro holds
// only integer square windows of class 0; any other candidate is an error naming it.
Status format_candidates(const CandidateSet &candidates, FileFormat format, std::string *text);

}  // namespace cudanms::tools
