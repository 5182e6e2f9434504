// A small thread-safe cache of per-shape state for kernels (oneDNN
// primitives, reordered weights), keyed by the shapes and parameters seen.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace llga {

template <typename Entry>
class PrimitiveCache {
 public:
  using Key = std::vector<int64_t>;
  template <typename Make>
  std::shared_ptr<Entry> get(const Key& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    auto e = std::make_shared<Entry>(make());  // built outside the lock; a racing twin is harmless
    std::lock_guard<std::mutex> lock(mu_);
    return map_.emplace(key, e).first->second;
  }

 private:
  std::mutex mu_;
  std::map<Key, std::shared_ptr<Entry>> map_;
};

// Appends sizes and strides of a tensor-like to a key.
template <typename T>
void addToKey(std::vector<int64_t>& key, const T& t) {
  key.push_back(static_cast<int64_t>(t.sizes().size()));
  key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
  key.push_back(static_cast<int64_t>(t.dtype()));
}

}  // namespace llga
