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

ShapeTagged::ShapeTagged() {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().caches.insert(this);
}

ShapeTagged::~ShapeTagged() {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().caches.erase(this);
}

uint64_t currentShapeTag() { return t_tag; }

ShapeTagScope::ShapeTagScope(uint64_t tag) : prev_(std::exchange(t_tag, tag)) {}

ShapeTagScope::~ShapeTagScope() { t_tag = prev_; }

size_t forgetShapeTag(uint64_t tag) {
  if (!tag) return 0;
  std::lock_guard<std::mutex> lock(registry().mu);
  size_t n = 0;
  for (ShapeTagged* c : registry().caches) n += c->forgetTag(tag);
  return n;
}

}  // namespace llga
