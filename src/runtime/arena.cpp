#include "runtime/arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

namespace llga {

namespace {

constexpr int kMaxFailuresInARow = 4;  // then the signature stays on the heap
constexpr size_t kPoolSize = 2;        // arenas kept for the next calls (concurrent callers take more)
// A call allocating more (a scripted loop of many trips) stays on the heap:
// placing n blocks is O(n^2), and small buffers are what malloc is fast at.
constexpr size_t kMaxPlannedBlocks = 4096;

std::atomic<bool>& enabledFlag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("LLGA_MEMORY_PLAN");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}

}  // namespace

// What a recorded call allocated, in allocation order. Times count
// allocations and frees; `freed` < 0: still alive when the call returned.
struct ArenaPlanner::Recording {
  struct Block {
    size_t bytes;
    int64_t allocated, freed = -1;
  };
  std::mutex mu;
  int64_t clock = 0;
  bool ended = false;
  std::vector<Block> blocks;
};

// The plan: the n-th allocation's size and offset (or heap). The bytes must
// be free when it is handed out (Buffer::take checks).
struct ArenaPlanner::Layout {
  std::vector<size_t> bytes, offset;
  std::vector<bool> heap;
  size_t total = 0;
};

struct ArenaPlanner::Buffer {
  void* data = nullptr;
  explicit Buffer(size_t bytes) {
    data = std::aligned_alloc(64, std::max<size_t>(64, bytes));
    if (!data) throw std::bad_alloc();
  }
  ~Buffer() { std::free(data); }
  // Hands out [offset, offset + bytes) unless a block still alive overlaps
  // it: a binary search in the blocks alive, whatever the recording's length
  // (a scripted loop records thousands), and no allocation once the list
  // has grown to the most blocks alive at once (a std::map allocated a node
  // per activation).
  bool take(size_t offset, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto next = firstAtOrAfter(offset);
    if (next != busy_.end() && next->first < offset + bytes) return false;
    if (next != busy_.begin() && std::prev(next)->second > offset) return false;
    busy_.insert(next, {offset, offset + bytes});
    return true;
  }
  void give_back(size_t offset) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = firstAtOrAfter(offset); it != busy_.end() && it->first == offset) busy_.erase(it);
  }
  bool anyLive() const { return liveCount() > 0; }
  int64_t liveCount() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(busy_.size());
  }

 private:
  std::vector<std::pair<size_t, size_t>>::iterator firstAtOrAfter(size_t offset) {
    return std::lower_bound(busy_.begin(), busy_.end(), offset,
                            [](const std::pair<size_t, size_t>& r, size_t o) { return r.first < o; });
  }

  mutable std::mutex mu_;
  std::vector<std::pair<size_t, size_t>> busy_;  // [offset, end) of the blocks handed out and not freed, by offset
};

namespace {

using Layout = ArenaPlanner::Layout;
using Recording = ArenaPlanner::Recording;
using Buffer = ArenaPlanner::Buffer;

// Greedy by size: largest blocks first, each at the lowest offset where it
// overlaps no placed block whose lifetime overlaps its own.
std::shared_ptr<Layout> plan(const std::vector<Recording::Block>& blocks) {
  auto l = std::make_shared<Layout>();
  const size_t n = blocks.size();
  l->bytes.resize(n);
  l->offset.assign(n, 0);
  l->heap.resize(n);
  std::vector<uint32_t> order;
  for (size_t i = 0; i < n; ++i) {
    l->bytes[i] = blocks[i].bytes;
    l->heap[i] = blocks[i].freed < 0 || blocks[i].bytes == 0;
    if (!l->heap[i]) order.push_back(static_cast<uint32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<uint32_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed blocks alive at the same time
  for (uint32_t i : order) {
    busy.clear();
    for (uint32_t k : placed)
      if (blocks[i].allocated < blocks[k].freed && blocks[k].allocated < blocks[i].freed)
        busy.emplace_back(l->offset[k], l->offset[k] + l->bytes[k]);
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (b >= at + l->bytes[i]) break;  // fits in the gap before this one
      at = std::max(at, e);
    }
    l->offset[i] = at;
    l->total = std::max(l->total, at + l->bytes[i]);
    placed.push_back(i);
  }
  return l;
}

class RecordingSource final : public ActivationSource {
 public:
  explicit RecordingSource(std::shared_ptr<Recording> rec) : rec_(std::move(rec)) {}
  const std::shared_ptr<Recording>& recording() const { return rec_; }
  std::shared_ptr<Storage> allocate(size_t nbytes, size_t rounded, const std::shared_ptr<MemoryMeter>& meter) override {
    std::shared_ptr<Storage> s = Storage::heap(nbytes, rounded, meter);
    size_t i;
    {
      std::lock_guard<std::mutex> lock(rec_->mu);
      i = rec_->blocks.size();
      rec_->blocks.push_back({rounded, rec_->clock++});
    }
    s->owner = std::shared_ptr<void>(s->data, [rec = rec_, i, heap = std::move(s->owner)](void*) mutable {
      {
        std::lock_guard<std::mutex> lock(rec->mu);
        if (!rec->ended) rec->blocks[i].freed = rec->clock++;
      }
      heap.reset();
    });
    return s;
  }

 private:
  std::shared_ptr<Recording> rec_;
};

// A block of the arena: gives its bytes back (and uncounts them) when the
// last tensor on it goes.
struct PlannedStorage final : Storage {
  std::shared_ptr<Buffer> buffer;
  size_t offset = 0, rounded = 0;
  std::shared_ptr<MemoryMeter> meter;
  ~PlannedStorage() {
    if (meter) meter->sub(static_cast<int64_t>(rounded));
    if (buffer) buffer->give_back(offset);
  }
};

class PlannedSource final : public ActivationSource {
 public:
  PlannedSource(std::shared_ptr<const Layout> layout, std::shared_ptr<Buffer> buffer)
      : layout_(std::move(layout)), buffer_(std::move(buffer)) {}

  std::shared_ptr<Storage> allocate(size_t nbytes, size_t rounded, const std::shared_ptr<MemoryMeter>& meter) override {
    const size_t i = next_++;
    const Layout& l = *layout_;
    if (!deviated_ && (i >= l.bytes.size() || l.bytes[i] != rounded)) deviated_ = true;
    if (deviated_ || l.heap[i]) return Storage::heap(nbytes, rounded, meter);
    auto s = std::make_shared<PlannedStorage>();  // one allocation, made before the range is taken
    if (!buffer_->take(l.offset[i], rounded)) {  // lifetimes differ from the recording
      deviated_ = true;
      return Storage::heap(nbytes, rounded, meter);
    }
    s->data = static_cast<char*>(buffer_->data) + l.offset[i];
    s->nbytes = nbytes;
    s->owned = true;
    s->buffer = buffer_;
    s->offset = l.offset[i];
    s->rounded = rounded;
    if (meter) {
      meter->add(static_cast<int64_t>(rounded));
      s->meter = meter;
    }
    return s;
  }

  bool asPlanned() const { return !deviated_ && next_ == layout_->bytes.size(); }
  const std::shared_ptr<const Layout>& layout() const { return layout_; }
  std::shared_ptr<Buffer> buffer() const { return buffer_; }

 private:
  std::shared_ptr<const Layout> layout_;
  std::shared_ptr<Buffer> buffer_;
  size_t next_ = 0;
  bool deviated_ = false;
};

}  // namespace

ArenaPlanner::ArenaPlanner() = default;
ArenaPlanner::~ArenaPlanner() = default;

void ArenaPlanner::setEnabled(bool on) { enabledFlag().store(on); }
bool ArenaPlanner::enabled() { return enabledFlag().load(); }

ArenaPlanner::Call::Call(ArenaPlanner& planner) : planner_(planner), exceptions_(std::uncaught_exceptions()) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(planner_.mu_);
  if (planner_.stats_.disabled) return;
  if (planner_.layout_) {
    std::shared_ptr<Buffer> buf;
    if (!planner_.pool_.empty()) {
      buf = std::move(planner_.pool_.back());
      planner_.pool_.pop_back();
    } else {
      buf = std::make_shared<Buffer>(planner_.layout_->total);
      std::erase_if(planner_.issued_, [](const std::weak_ptr<Buffer>& w) { return w.expired(); });
      planner_.issued_.push_back(buf);
    }
    source_ = std::make_unique<PlannedSource>(planner_.layout_, std::move(buf));
  } else if (!planner_.warm_) {
    planner_.warm_ = true;  // the first call builds primitives and caches: its allocations are not typical
    return;
  } else if (!planner_.recording_) {
    planner_.recording_ = true;
    source_ = std::make_unique<RecordingSource>(std::make_shared<Recording>());
  } else {
    return;  // another call is recording: this one runs on the heap
  }
  scope_ = std::make_unique<SourceScope>(source_.get());
}

ArenaPlanner::Call::~Call() {
  scope_.reset();
  // Unwinding: the call's buffers were freed with its registers; what it
  // allocated says nothing about the next call's (not a deviation).
  const bool failed = std::uncaught_exceptions() > exceptions_;
  if (!source_) {
    if (failed) {
      std::lock_guard<std::mutex> lock(planner_.mu_);
      ++planner_.stats_.failed_calls;
    }
    return;
  }
  if (auto* planned = dynamic_cast<PlannedSource*>(source_.get()))
    planner_.finishPlanned(planned->asPlanned(), failed, planned->buffer(), planned->layout());
  else
    planner_.finishRecording(static_cast<RecordingSource*>(source_.get())->recording(), failed);
}

void ArenaPlanner::finishRecording(const std::shared_ptr<Recording>& rec, bool failed) {
  std::vector<Recording::Block> blocks;
  {
    std::lock_guard<std::mutex> lock(rec->mu);
    rec->ended = true;  // frees from now on (outputs, kept buffers) are not part of the call
    blocks = rec->blocks;
  }
  if (failed) {  // a partial recording: the next call records again
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    ++stats_.failed_calls;
    return;
  }
  if (blocks.size() > kMaxPlannedBlocks) {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    ++stats_.recorded_calls;
    stats_.disabled = true;
    stats_.heap_blocks = static_cast<int64_t>(blocks.size());
    return;
  }
  std::shared_ptr<const Layout> layout = plan(blocks);
  std::lock_guard<std::mutex> lock(mu_);
  recording_ = false;
  layout_ = layout;
  pool_.clear();
  ++stats_.recorded_calls;
  stats_.arena_bytes = static_cast<int64_t>(layout->total);
  stats_.blocks = static_cast<int64_t>(std::count(layout->heap.begin(), layout->heap.end(), false));
  stats_.heap_blocks = static_cast<int64_t>(layout->heap.size()) - stats_.blocks;
}

void ArenaPlanner::finishPlanned(bool as_planned, bool failed, std::shared_ptr<Buffer> buffer,
                                 const std::shared_ptr<const Layout>& layout) {
  const bool held = buffer->anyLive();  // a buffer from the arena outlives the call
  std::lock_guard<std::mutex> lock(mu_);
  if (layout_ != layout) {
    // planned by a layout replaced meanwhile (a concurrent call deviated): only drop the buffer
  } else if (failed && !held) {
    ++stats_.failed_calls;  // the plan stays; the arena is as good as before
  } else if (as_planned && !held) {
    ++stats_.planned_calls;
    failures_in_a_row_ = 0;
  } else {
    ++stats_.deviations;
    if (++failures_in_a_row_ >= kMaxFailuresInARow) stats_.disabled = true;
    layout_.reset();  // the next call records again
    pool_.clear();
  }
  // A held arena is left to its holders (freed with the last of them).
  if (!held && layout_ == layout && pool_.size() < kPoolSize) pool_.push_back(std::move(buffer));
}

ArenaStats ArenaPlanner::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ArenaStats s = stats_;
  for (const std::weak_ptr<Buffer>& w : issued_)
    if (auto b = w.lock()) s.in_use_blocks += b->liveCount();
  return s;
}

}  // namespace llga
