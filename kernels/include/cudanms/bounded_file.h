// Reading the files users name (labels, models, configs) with a bound: a FIFO, a device such as
// /dev/zero or a file of many gigabytes is an error that names why, never a read that blocks or
// never ends. Pure C++17 and POSIX, shared by the elements, the cascade library and the service.
#pragma once

#include <cstdint>
#include <string>

namespace cudanms {

// Upper bounds on what the project reads whole: generous for every real file of each kind.
constexpr std::uint64_t kLabelsFileLimit = 16ull << 20;  // coco.names is 625 bytes
constexpr std::uint64_t kModelFileLimit = 1ull << 30;    // Haar XML ~1 MB, detector ONNX ~300 MB
constexpr std::uint64_t kConfigFileLimit = 1ull << 20;

// True when `path` is a regular file of at most `limit` bytes that this process can open; else
// false with the reason in `error` (without the path: the caller names the file).
bool check_bounded_file(const std::string &path, std::uint64_t limit, std::string *error);

// The whole file, under the same rules (a file that grows past the limit while read is refused).
bool read_bounded_file(const std::string &path, std::uint64_t limit, std::string *contents,
                       std::string *error);

}  // namespace cudanms
