#include "gpulist.h"

#include <glib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

bool gst_cv_parse_gpu_list(const std::string &text, std::vector<unsigned> *gpus, bool *all,
                           std::string *why) {
  gpus->clear();
  *all = text == "all";
  if (*all || text == "none") return true;
  gchar **parts = g_strsplit(text.c_str(), ",", -1);
  bool good = parts[0] != nullptr;
  for (gchar **part = parts; good && *part; ++part) {
    const char *item = g_strstrip(*part);
    char *end = nullptr;
    errno = 0;
    const unsigned long id = std::strtoul(item, &end, 10);
    good = *item >= '0' && *item <= '9' && *end == '\0' && errno == 0 && id < 1024 &&
           std::find(gpus->begin(), gpus->end(), id) == gpus->end();
    if (good) gpus->push_back(static_cast<unsigned>(id));
  }
  g_strfreev(parts);
  if (!good) {
    gpus->clear();
    *why = "must be all, none or GPU indices once each (0,2,3), not \"" + text + "\"";
  }
  return good;
}
