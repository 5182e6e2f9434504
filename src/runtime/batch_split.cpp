#include "runtime/batch_split.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace llga {

void BatchSplit::setMode(Mode m, int64_t chunk) {
  if (m == Mode::Fixed && chunk < 1)
    throw std::invalid_argument("a batch chunk must be at least 1 item, got " + std::to_string(chunk));
  std::lock_guard<std::mutex> lock(mu_);
  mode_ = m;
  fixed_ = m == Mode::Fixed ? chunk : 0;
  states_.clear();  // measurements were of the previous mode's calls
}

BatchSplit::State& BatchSplit::state(int64_t items, int lanes) {
  auto [it, fresh] = states_.try_emplace(items);
  State& s = it->second;
  if (fresh) {
    s.report.items = items;
    // items, ceil(items / 2), ... down to 1 or kMaxChunks chunks; then tried from the smallest up
    std::vector<int64_t> chunks;
    for (int64_t parts = 1; parts <= kMaxChunks; parts *= 2) {
      const int64_t c = (items + parts - 1) / parts;
      if (chunks.empty() || chunks.back() != c) chunks.push_back(c);
      if (c == 1) break;
    }
    std::reverse(chunks.begin(), chunks.end());
    for (int64_t c : chunks) s.candidates.push_back({c, 1});
    if (lanes > 1) {  // side by side: every lane gets a chunk
      s.side_lanes = lanes;
      for (int64_t c : chunks)
        if ((items + c - 1) / c >= lanes) s.candidates.push_back({c, lanes});
    }
    if (states_.size() > kMaxBatchSizes) {
      auto oldest = std::min_element(states_.begin(), states_.end(), [&](const auto& a, const auto& b) {
        return (a.first == items ? std::numeric_limits<uint64_t>::max() : a.second.last_used) <
               (b.first == items ? std::numeric_limits<uint64_t>::max() : b.second.last_used);
      });
      states_.erase(oldest);
    }
  }
  s.last_used = ++calls_;
  return s;
}

BatchSplit::Pick BatchSplit::pick(int64_t items, int lanes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::Off || items < 2 || !refused_.empty()) return {items, false};
  if (mode_ == Mode::Fixed) return {std::min(fixed_, items), false};
  if (items < kMinItems) return {items, false};
  State& s = state(items, lanes);
  if (s.report.chunk) return {s.report.chunk, false, s.report.lanes};
  return {s.candidates[s.next].chunk, true, s.candidates[s.next].lanes};
}

BatchSplit::Recorded BatchSplit::record(int64_t items, int64_t chunk, double later_chunks_ns, double call_ns,
                                        int lanes) {
  std::lock_guard<std::mutex> lock(mu_);
  Recorded r;
  if (mode_ != Mode::Auto || !refused_.empty()) return r;
  State& s = state(items, lanes);
  if (s.report.chunk || s.next >= s.candidates.size() || s.candidates[s.next].chunk != chunk ||
      s.candidates[s.next].lanes != lanes)
    return r;  // a call that raced another's measurement of the same candidate
  // A shape's first run makes its primitives and records its buffers for the
  // memory planner; the second lays out (and first touches) the planned
  // arena. A call counts from the third run of its chunk's shape on.
  const int needed = chunk == items ? 2 : 1;  // earlier calls with this candidate
  const double ns = s.warm_calls >= needed ? call_ns : later_chunks_ns;
  if (ns < 0) {
    ++s.warm_calls;
    return r;
  }
  s.fastest_ns = s.samples == 0 ? ns : std::min(s.fastest_ns, ns);
  s.sampled_ns += ns * static_cast<double>(items);
  if (++s.samples < kMaxSamples && s.sampled_ns < kSampleNs) return r;  // its next call is timed too
  (lanes > 1 ? s.report.ns_per_item_side_by_side : s.report.ns_per_item).emplace_back(chunk, s.fastest_ns);
  const Candidate b = best(s.report, s.side_lanes);
  r.best = b.chunk;
  ++s.next;
  s.warm_calls = 0;
  s.samples = 0;
  s.sampled_ns = 0;
  const auto& series = b.lanes > 1 ? s.report.ns_per_item_side_by_side : s.report.ns_per_item;
  const double best_ns =
      std::find_if(series.begin(), series.end(), [&](const auto& p) { return p.first == b.chunk; })->second;
  if (s.fastest_ns > kGiveUp * best_ns)  // past the best: the rest of this series is not tried
    while (s.next < s.candidates.size() && s.candidates[s.next].lanes == lanes) ++s.next;
  if (s.next == s.candidates.size()) {
    s.report.chunk = b.chunk;
    s.report.lanes = b.lanes;
    r.settled = true;
  }
  // Only one candidate's state at a time: the next call builds the chosen
  // chunk's again unless it is the one just measured.
  if (!(r.settled && r.best == chunk)) r.dropped.push_back(chunk);
  return r;
}

BatchSplit::Candidate BatchSplit::best(const BatchSplitReport& r, int side_lanes) {
  auto fastest = [](const std::vector<std::pair<int64_t, double>>& v) {
    std::pair<int64_t, double> f{0, std::numeric_limits<double>::infinity()};
    for (const auto& p : v)
      if (p.second < f.second) f = p;
    return f;
  };
  const auto one = fastest(r.ns_per_item), side = fastest(r.ns_per_item_side_by_side);
  if (side.first && side.second < one.second * kSideBySideMargin) return {side.first, side_lanes};
  return {one.first, 1};
}

void BatchSplit::refuse(std::string why) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_ = std::move(why);
  states_.clear();
}

std::string BatchSplit::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

std::vector<BatchSplitReport> BatchSplit::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BatchSplitReport> out;
  for (const auto& [items, s] : states_) out.push_back(s.report);
  return out;
}

}  // namespace llga
