#include "fence.h"

#include <gio/gio.h>

namespace cudanms::service {

std::atomic<gint64> LeaseFence::fence_at_{G_MAXINT64};

bool LeaseFence::write(const std::string &path, gint64 fence_at_us, std::string *error) {
  const std::string text = std::to_string(fence_at_us) + "\n";
  GError *gerror = nullptr;
  if (g_file_set_contents(path.c_str(), text.c_str(), static_cast<gssize>(text.size()), &gerror))
    return true;
  *error = gerror->message;
  g_clear_error(&gerror);
  return false;
}

LeaseFence::LeaseFence(std::string path, std::function<void(bool fenced)> changed)
    : path_(std::move(path)), changed_(std::move(changed)) {
  fence_at_ = 0;
  check();
  timer_ = g_timeout_add(
      100,
      [](gpointer data) -> gboolean {
        static_cast<LeaseFence *>(data)->check();
        return G_SOURCE_CONTINUE;
      },
      this);
}

LeaseFence::~LeaseFence() {
  if (timer_) g_source_remove(timer_);
  fence_at_ = G_MAXINT64;
}

void LeaseFence::check() {
  gchar *text = nullptr;
  gint64 fence_at = 0;
  if (g_file_get_contents(path_.c_str(), &text, nullptr, nullptr))
    fence_at = g_ascii_strtoll(text, nullptr, 10);
  g_free(text);
  fence_at_ = fence_at;
  const bool fenced = g_get_monotonic_time() >= fence_at;
  if (told_ && fenced == fenced_) return;
  told_ = true;
  fenced_ = fenced;
  changed_(fenced);
}

}  // namespace cudanms::service
