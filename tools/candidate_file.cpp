#include "candidate_file.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string_view>

namespace cudanms::tools {
namespace {

const char *const kFormatNames[] = {"oro", "csv"};  // indexed by FileFormat

// Past 2^24 a float no longer holds every integer, and an oro window would silently move.
constexpr long long kLargestExactInteger = 1LL << 24;

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

std::string_view trim_end(std::string_view s) {
  const size_t last = s.find_last_not_of(" \t\r");
  return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// std::from_chars reads no leading '+', which people write.
std::string_view skip_plus(std::string_view field) {
  return field.size() > 1 && field[0] == '+' && field[1] != '-' && field[1] != '+' ? field.substr(1)
                                                                                   : field;
}

// Parses one line's fields; the messages name the field, the caller adds FILE:LINE.
class FieldReader {
 public:
  explicit FieldReader(std::string *error) : error_(error) {}

  bool read_float(std::string_view field, const char *what, float *value) {
    const std::string_view digits = skip_plus(field);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *value);
    if (ec == std::errc::result_out_of_range) {
      return fail(what, field, "is out of the range of a float");
    }
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return fail(what, field, "is not a number");
    }
    if (std::isnan(*value)) return fail(what, field, "is NaN");
    if (std::isinf(*value)) return fail(what, field, "is infinite");
    return true;
  }

  template <typename Integer>
  bool read_integer(std::string_view field, const char *what, Integer *value) {
    const std::string_view digits = skip_plus(field);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *value);
    if (ec == std::errc::result_out_of_range) return fail(what, field, "is out of range");
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return fail(what, field, "is not an integer");
    }
    return true;
  }

  bool fail(const char *what, std::string_view field, const char *why) {
    *error_ = std::string(what) + " '" + std::string(field) + "' " + why;
    return false;
  }
  bool fail(std::string why) {
    *error_ = std::move(why);
    return false;
  }

 private:
  std::string *error_;
};

bool exact_in_float(long long v) { return v >= -kLargestExactInteger && v <= kLargestExactInteger; }

bool parse_oro_line(const std::vector<std::string_view> &fields, CandidateSet *set,
                    std::string *error) {
  FieldReader reader(error);
  long long x = 0, y = 0, w = 0;
  float score = 0;
  if (!reader.read_integer(fields[0], "x", &x) || !reader.read_integer(fields[1], "y", &y) ||
      !reader.read_integer(fields[2], "w", &w) || !reader.read_float(fields[3], "score", &score)) {
    return false;
  }
  if (w < 0) return reader.fail("w", fields[2], "is negative");
  // Each term is bounded before the sums, so x + w cannot overflow a long long.
  if (!exact_in_float(x) || !exact_in_float(y) || !exact_in_float(w) || !exact_in_float(x + w) ||
      !exact_in_float(y + w)) {
    return reader.fail("the window reaches beyond +-2^24, where a float cannot hold every integer");
  }
  set->add(x, y, x + w, y + w, score);
  return true;
}

bool parse_csv_line(const std::vector<std::string_view> &fields, CandidateSet *set,
                    std::string *error) {
  FieldReader reader(error);
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0, score = 0;
  int32_t class_id = 0;
  if (!reader.read_float(fields[0], "x1", &x1) || !reader.read_float(fields[1], "y1", &y1) ||
      !reader.read_float(fields[2], "x2", &x2) || !reader.read_float(fields[3], "y2", &y2) ||
      !reader.read_float(fields[4], "score", &score) ||
      (fields.size() == 6 && !reader.read_integer(fields[5], "class", &class_id))) {
    return false;
  }
  if (x2 < x1) return reader.fail("x2 < x1: the width is negative");
  if (y2 < y1) return reader.fail("y2 < y1: the height is negative");
  set->add(x1, y1, x2, y2, score, class_id);
  return true;
}

bool has_field_count(FileFormat format, size_t count) {
  return format == FileFormat::kOro ? count == 4 : count == 5 || count == 6;
}

std::string field_count_error(FileFormat format, size_t count) {
  const std::string found = ", found " + std::to_string(count);
  if (format == FileFormat::kOro) {
    return "expected 4 fields x,y,w,score" + found +
           (count == 5 || count == 6 ? " (5 or 6 would be a csv line)" : "");
  }
  return "expected 5 or 6 fields x1,y1,x2,y2,score[,class]" + found +
         (count == 4 ? " (4 would be an oro line)" : "");
}

void append_float(float value, std::string *text) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  text->append(buffer, result.ptr);
}

}  // namespace

const char *to_string(FileFormat format) { return kFormatNames[static_cast<int>(format)]; }

bool parse_file_format(const std::string &name, FileFormat *format) {
  for (size_t i = 0; i < std::size(kFormatNames); ++i) {
    if (name == kFormatNames[i]) {
      *format = static_cast<FileFormat>(i);
      return true;
    }
  }
  return false;
}

bool file_format_from_extension(const std::string &path, FileFormat *format) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return false;
  return parse_file_format(path.substr(dot + 1), format);
}

Status parse_candidates(const std::string &text, const std::string &name, FileFormat format,
                        CandidateFile *file) {
  *file = CandidateFile();
  const std::string_view all(text);
  size_t line_number = 0;
  for (size_t start = 0; start < all.size();) {
    const size_t newline = std::min(all.find('\n', start), all.size());
    const std::string_view line = trim_end(all.substr(start, newline - start));
    start = newline + 1;
    ++line_number;
    const std::string_view content = trim(line);
    if (content.empty() || content[0] == '#') continue;

    const std::vector<std::string_view> fields = split_fields(line);
    std::string error;
    if (!has_field_count(format, fields.size())) {
      error = field_count_error(format, fields.size());
    } else if (format == FileFormat::kOro) {
      parse_oro_line(fields, &file->candidates, &error);
    } else {
      parse_csv_line(fields, &file->candidates, &error);
    }
    if (!error.empty()) {
      *file = CandidateFile();
      return Status::Error(name + ":" + std::to_string(line_number) + ": " + error);
    }
    file->source_lines.emplace_back(line);
    file->line_numbers.push_back(line_number);
  }
  return Status::Ok();
}

Status read_candidate_file(const std::string &path, FileFormat format, CandidateFile *file) {
  *file = CandidateFile();
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> stream(std::fopen(path.c_str(), "rb"),
                                                          std::fclose);
  if (!stream) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, stream.get())) > 0) text.append(buffer, got);
  if (std::ferror(stream.get()))
    return Status::Error(path + ": cannot read: " + std::strerror(errno));
  return parse_candidates(text, path, format, file);
}

Status format_candidates(const CandidateSet &candidates, FileFormat format, std::string *text) {
  text->clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const float *box = &candidates.boxes[4 * i];
    const float score = candidates.scores[i];
    const int32_t class_id = candidates.classes[i];
    const std::string which = "candidate " + std::to_string(i);
    if (!std::isfinite(box[0]) || !std::isfinite(box[1]) || !std::isfinite(box[2]) ||
        !std::isfinite(box[3]) || !std::isfinite(score)) {
      return Status::Error(which + " has a NaN or infinite value, which no file can hold");
    }
    if (format == FileFormat::kOro) {
      const float side = box[2] - box[0];
      const bool integer_square = std::trunc(box[0]) == box[0] && std::trunc(box[1]) == box[1] &&
                                  std::trunc(side) == side && side >= 0 &&
                                  box[3] - box[1] == side && class_id == 0;
      if (!integer_square) {
        return Status::Error(which +
                             " is not an integer square window of class 0, which oro cannot hold");
      }
      for (float corner_or_side : {box[0], box[1], side}) {
        *text += std::to_string(static_cast<long long>(corner_or_side)) + ",";
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        append_float(box[k], text);
        *text += ',';
      }
    }
    append_float(score, text);
    if (format == FileFormat::kCsv) *text += "," + std::to_string(class_id);
    *text += '\n';
  }
  return Status::Ok();
}

}  // namespace cudanms::tools
