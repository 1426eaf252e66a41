#include "cudanmscontexts.h"

#include <iterator>
#include <map>
#include <mutex>
#include <tuple>

namespace {

/* Weak: a shared context goes when the last element using it stops. */
using Key = std::tuple<int, void *, bool>; /* device, CUcontext, time_device */
std::mutex registry_lock;
std::map<Key, std::weak_ptr<cudanms::SharedContext>> registry;

}  // namespace

std::shared_ptr<cudanms::SharedContext> gst_cuda_nms_shared_context(
    const cudanms::ContextOptions &options, void *cuda_context, const NmsContextFactory &create,
    cudanms::Status *status) {
  std::lock_guard<std::mutex> guard(registry_lock);
  const Key key{options.device, cuda_context, options.time_device};
  if (auto shared = registry[key].lock()) return shared;
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  std::unique_ptr<cudanms::Context> context = create(options, status);
  if (!context) return nullptr;
  auto shared = std::make_shared<cudanms::SharedContext>(std::move(context));
  registry[key] = shared;
  return shared;
}
