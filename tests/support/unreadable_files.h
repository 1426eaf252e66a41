// Files that a reader without a bound never finishes: /dev/zero (endless), a FIFO nobody writes
// (its open blocks), and a sparse file one byte past a limit (no disk used). For the tests that
// every file users name is refused at once, with the reason.
#pragma once

#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cudanms::testing {

class UnreadableFiles {
 public:
  // `limit`: the size limit of the kind of file under test.
  explicit UnreadableFiles(std::uint64_t limit) {
    gchar *dir = g_dir_make_tmp("cudanms-unreadable-XXXXXX", nullptr);
    dir_ = dir;
    g_free(dir);
    fifo_ = dir_ + "/fifo";
    mkfifo(fifo_.c_str(), 0600);
    huge_ = dir_ + "/huge";
    const int fd = open(huge_.c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, static_cast<off_t>(limit + 1)) != 0) huge_.clear();
      close(fd);
    }
  }
  ~UnreadableFiles() {
    g_unlink(fifo_.c_str());
    if (!huge_.empty()) g_unlink(huge_.c_str());
    g_rmdir(dir_.c_str());
  }

  // Each file with the words the refusal must contain.
  std::vector<std::pair<std::string, std::string>> cases() const {
    return {{"/dev/zero", "not a regular file"},
            {fifo_, "not a regular file"},
            {huge_, "larger than the limit"},
            {dir_, "is a directory"}};
  }

 private:
  std::string dir_, fifo_, huge_;
};

}  // namespace cudanms::testing
