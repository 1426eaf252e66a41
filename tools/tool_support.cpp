#include "tool_support.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace cudanms::tools {

void report(const char *subcommand, const std::string &message) {
  std::fprintf(stderr, "%s %s: %s\n", kProgram, subcommand, message.c_str());
}

bool parse_options(const char *subcommand, const char *required_options, const char *summary,
                   const char *description, const GOptionEntry *entries, int argc, char **argv) {
  const std::string program = std::string(kProgram) + " " + subcommand;
  g_set_prgname(program.c_str());
  GOptionContext *context = g_option_context_new(required_options);
  g_option_context_set_summary(context, summary);
  g_option_context_set_description(context, description);
  g_option_context_add_main_entries(context, entries, nullptr);
  GError *error = nullptr;
  const bool parsed = g_option_context_parse(context, &argc, &argv, &error);
  g_option_context_free(context);
  if (!parsed) {
    report(subcommand, error->message);
    g_error_free(error);
    return false;
  }
  if (argc > 1) {
    report(subcommand, std::string("unexpected argument '") + argv[1] + "'");
    return false;
  }
  return true;
}

Status write_text(const std::string &path, const std::string &text) {
  if (path.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      return Status::Error(std::string("cannot write to stdout: ") + std::strerror(errno));
    }
    return Status::Ok();
  }
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  written = std::fclose(file) == 0 && written;
  if (!written) {
    const std::string why = std::strerror(errno);
    std::remove(path.c_str());
    return Status::Error(path + ": cannot write: " + why);
  }
  return Status::Ok();
}

// "300,1000,3000" into sizes; false for anything else. The empty string is the empty list.
bool parse_sizes(const char *text, std::vector<size_t> *sizes) {
  sizes->clear();
  const std::string list = text;
  for (size_t start = 0; start < list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    size_t value = 0;
    const char *first = list.data() + start;
    const char *last = list.data() + comma;
    const auto [end, ec] = std::from_chars(first, last, value);
    if (ec != std::errc() || end != last || value == 0 || value > kMaxCount) return false;
    sizes->push_back(value);
    start = comma + 1;
    if (comma + 1 == list.size()) return false;  // a trailing comma
  }
  return true;
}

}  // namespace cudanms::tools
