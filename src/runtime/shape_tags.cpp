#include "runtime/shape_tags.h"

#include <mutex>
#include <set>
#include <utility>

namespace llga {
namespace {

thread_local uint64_t t_tag = 0;

struct Registry {
  std::mutex mu;
  std::set<ShapeTagged*> caches;
};

Registry& registry() {
  static Registry* r = new Registry;  // outlives every static cache's destructor
  return *r;
}

}  // namespace

void ShapeTagged::registerSelf() {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registered_) return;
  registry().caches.insert(this);
  registered_ = true;
}

ShapeTagged::~ShapeTagged() { unregister(); }

void ShapeTagged::unregister() {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!registered_) return;
  registry().caches.erase(this);
  registered_ = false;
}

uint64_t currentShapeTag() { return t_tag; }

ShapeTagScope::ShapeTagScope(uint64_t tag) : prev_(std::exchange(t_tag, tag)) {}

ShapeTagScope::~ShapeTagScope() { t_tag = prev_; }

size_t forgetShapeTag(uint64_t tag) {
  if (!tag) return 0;
  std::vector<std::shared_ptr<void>> gone;  // destroyed after the lock: entries may own caches
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (ShapeTagged* c : registry().caches) c->forgetTag(tag, gone);
  }
  return gone.size();
}

}  // namespace llga
