// A small thread-safe cache of per-shape state for kernels (oneDNN
// primitives, reordered weights), keyed by the shapes and parameters seen.
// This is where shape specialization happens: a call with new shapes builds
// a new entry. The cache is a bounded LRU (kMaxSpecializations entries per
// kernel), so a model called with ever-changing shapes does not grow without
// bound; every build and eviction is counted (primitiveCacheStats()).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <omp.h>

#include "runtime/shape_tags.h"

namespace llga {

inline constexpr size_t kMaxSpecializations = 16;

// A shared_ptr that threads load and replace (a kernel's latest entry, its
// fixed parameters). Not std::atomic<std::shared_ptr>: libstdc++ 12 releases
// that one's internal lock after a load with relaxed order, which is a data
// race by the memory model and what ThreadSanitizer reports on every call
// (google/sanitizers#1558). A mutex held for a pointer copy costs nothing
// next to a primitive.
template <typename T>
class SharedSlot {
 public:
  std::shared_ptr<T> load() const {
    std::lock_guard<std::mutex> lock(mu_);
    return p_;
  }
  void store(std::shared_ptr<T> p) {
    std::lock_guard<std::mutex> lock(mu_);
    p_.swap(p);  // the old one is released outside the lock
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<T> p_;
};

struct PrimitiveCacheStats {
  std::atomic<int64_t> built{0}, evicted{0}, hits{0};
};
PrimitiveCacheStats& primitiveCacheStats();  // process-wide

// Entries are also keyed by OpenMP's thread count where they are made (what
// oneDNN reads as its maximum): its jit kernels fix their work split at
// creation, so a primitive made for one thread ran on one thread after
// llga.set_num_threads(2), and one made for two kept two after (1).
// Each entry keeps the shape tag of the graph call that last used it
// (runtime/shape_tags.h): a compiled graph drops a shape's state with it.
template <typename Entry>
class PrimitiveCache final : public ShapeTagged {
 public:
  using Key = std::vector<int64_t>;
  template <typename Make>
  std::shared_ptr<Entry> get(const Key& key, Make&& make) {
    const Probe probe{omp_get_max_threads(), key};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = map_.find(probe); it != map_.end()) {
        it->second.last_use = ++clock_;
        it->second.tag = currentShapeTag();
        primitiveCacheStats().hits.fetch_add(1, std::memory_order_relaxed);
        return it->second.entry;
      }
    }
    auto e = std::make_shared<Entry>(make());  // built outside the lock; a racing twin is harmless
    primitiveCacheStats().built.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMaxSpecializations && !map_.count(probe)) {
      auto victim = map_.begin();
      for (auto it = map_.begin(); it != map_.end(); ++it)
        if (it->second.last_use < victim->second.last_use) victim = it;
      map_.erase(victim);  // entries in use elsewhere stay alive through their shared_ptr
      primitiveCacheStats().evicted.fetch_add(1, std::memory_order_relaxed);
    }
    auto [it, inserted] = map_.try_emplace(Stored{probe.threads, key}, Slot{e, 0, 0});
    it->second.last_use = ++clock_;
    it->second.tag = currentShapeTag();
    return it->second.entry;
  }
  void forgetTag(uint64_t tag, std::vector<std::shared_ptr<void>>& gone) override {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (auto it = map_.begin(); it != map_.end();) {
      if (it->second.tag == tag) {
        gone.push_back(std::move(it->second.entry));
        it = map_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    primitiveCacheStats().evicted.fetch_add(n, std::memory_order_relaxed);
  }
  PrimitiveCache() { registerSelf(); }  // once its members are made
  ~PrimitiveCache() override { unregister(); }  // before map_ goes
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  struct Slot {
    std::shared_ptr<Entry> entry;
    uint64_t last_use;
    uint64_t tag;  // the shape tag of its last user
  };
  struct Stored {
    int threads;
    Key key;
  };
  struct Probe {  // a lookup without copying the key
    int threads;
    const Key& key;
  };
  struct Less {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return a.threads != b.threads ? a.threads < b.threads : a.key < b.key;
    }
  };
  mutable std::mutex mu_;
  std::map<Stored, Slot, Less> map_;
  uint64_t clock_ = 0;
};

// Appends sizes and strides of a tensor-like to a key.
template <typename T>
void addToKey(std::vector<int64_t>& key, const T& t) {
  key.push_back(static_cast<int64_t>(t.sizes().size()));
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
  key.push_back(static_cast<int64_t>(t.dtype()));
}

// A constant weight: the same data on every call of its kernel, once in its
// original form and, after the plan compacts it, as the reordered copy (other
// strides, other buffer). Only its sizes and dtype pick the primitive, so the
// entries built before compaction stay in use.
template <typename T>
void addConstantToKey(std::vector<int64_t>& key, const T& t) {
  key.push_back(static_cast<int64_t>(t.sizes().size()));
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.push_back(static_cast<int64_t>(t.dtype()));
}

}  // namespace llga
