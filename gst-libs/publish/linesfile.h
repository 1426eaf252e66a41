/* A file of lines (JSON lines), or stdout for "" and "-": each line flushed as it is written, so
 * that `tail -f` follows a live stream. Shared by jsonmetawriter and metapublish method=file;
 * failures return false with errno set, for the element to report. */
#pragma once

#include <cstdio>
#include <string>

class LinesFile {
 public:
  LinesFile() = default;
  ~LinesFile() { close(); }
  LinesFile(const LinesFile &) = delete;
  LinesFile &operator=(const LinesFile &) = delete;

  bool open(const std::string &location, bool append = false);  // replaces the file, or appends
  bool write_line(const char *text, size_t length);
  bool close();  // flushes stdout, closes a file; true when nothing is open
  const std::string &name() const { return name_; }

 private:
  FILE *out_ = nullptr;
  bool is_stdout_ = false;
  std::string name_;
};
