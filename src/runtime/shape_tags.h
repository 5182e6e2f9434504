// Kernel state made for one shape (oneDNN primitives, weights reordered for
// them) is tagged with the shape of the graph call that last used it, so a
// compiled graph can let go of the state only shapes it will not run again
// used: the batch split measures chunk sizes it then drops, each of which
// had made primitives and weight copies in its own layout (resnet18 at
// batch 32 held 520 MiB of weight copies after trying six chunk sizes).
// Caches of such state (the backend's PrimitiveCache) register here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace llga {

class ShapeTagged {
 public:
  virtual ~ShapeTagged();
  ShapeTagged(const ShapeTagged&) = delete;
  ShapeTagged& operator=(const ShapeTagged&) = delete;
  // Moves the entries whose last user had `tag` into `gone` (released by the
  // caller once no lock is held: an entry may own caches of its own).
  virtual void forgetTag(uint64_t tag, std::vector<std::shared_ptr<void>>& gone) = 0;

 protected:
  ShapeTagged() = default;
  // A derived cache's constructor calls this last: from here forgetShapeTag
  // reaches it (not while its base or members are still being made, when
  // forgetTag would be the pure one or read members not yet there).
  void registerSelf();
  // A derived cache's destructor calls this first, so that no forgetTag
  // reaches it while its members are destroyed (idempotent).
  void unregister();

 private:
  bool registered_ = false;  // guarded by the registry's mutex
};

// The tag of the graph call running on this thread (0: none).
uint64_t currentShapeTag();

class ShapeTagScope {
 public:
  explicit ShapeTagScope(uint64_t tag);
  ~ShapeTagScope();
  ShapeTagScope(const ShapeTagScope&) = delete;
  ShapeTagScope& operator=(const ShapeTagScope&) = delete;

 private:
  uint64_t prev_;
};

// Every registered cache forgets `tag`'s entries; returns how many went.
size_t forgetShapeTag(uint64_t tag);

}  // namespace llga
