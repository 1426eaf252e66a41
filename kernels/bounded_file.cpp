#include "cudanms/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cudanms {
namespace {

std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Opens `path` for reading without blocking (a FIFO with no writer would block a plain open)
// and checks what it is; -1 with the reason otherwise.
int open_bounded(const std::string &path, std::uint64_t limit, std::string *error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *error = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    *error = "is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    *error = "is not a regular file (a device, FIFO or socket is never read)";
  } else if (static_cast<std::uint64_t>(st.st_size) > limit) {
    *error = "is larger than the limit of " + size_text(limit) + " (" +
             std::to_string(static_cast<std::uint64_t>(st.st_size)) + " bytes)";
  } else {
    return fd;
  }
  ::close(fd);
  return -1;
}

}  // namespace

bool check_bounded_file(const std::string &path, std::uint64_t limit, std::string *error) {
  const int fd = open_bounded(path, limit, error);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

bool read_bounded_file(const std::string &path, std::uint64_t limit, std::string *contents,
                       std::string *error) {
  const int fd = open_bounded(path, limit, error);
  if (fd < 0) return false;
  // A regular file never blocks; O_NONBLOCK only mattered for the open.
  std::string text;
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit) {
      *error = "grew past the limit of " + size_text(limit) + " while it was read";
      ::close(fd);
      return false;
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  *contents = std::move(text);
  return true;
}

}  // namespace cudanms
