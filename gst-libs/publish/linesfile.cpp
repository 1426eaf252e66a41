#include "linesfile.h"

bool LinesFile::open(const std::string &location, bool append) {
  close();
  if (location.empty() || location == "-") {
    out_ = stdout;
    is_stdout_ = true;
    name_ = "stdout";
    return true;
  }
  name_ = location;
  is_stdout_ = false;
  out_ = fopen(location.c_str(), append ? "a" : "w");
  return out_ != nullptr;
}

bool LinesFile::write_line(const char *text, size_t length) {
  return out_ && fwrite(text, 1, length, out_) == length && fputc('\n', out_) != EOF &&
         fflush(out_) == 0;
}

bool LinesFile::close() {
  if (!out_) return true;
  const bool ok = is_stdout_ ? fflush(out_) == 0 : fclose(out_) == 0;
  out_ = nullptr;
  return ok;
}
