#include "driver/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include "driver/crc32c.h"
#include "frontend/parser.h"
#include "ir/printer.h"
#include "runtime/exec_context.h"
#include "runtime/layout_codec.h"
#include "runtime/threads.h"

static_assert(std::endian::native == std::endian::little, "model files are little-endian, as is this host's memory");

namespace llga {
namespace {

constexpr char kMagic[8] = {'\x89', 'L', 'L', 'G', 'A', '\r', '\n', '\x1a'};
constexpr size_t kHeaderBytes = 64, kEntryBytes = 48, kNameBytes = 16;
constexpr size_t kMaxSections = 64;
constexpr uint64_t kTensorAlign = 64, kWeightsAlign = 4096;
constexpr uint32_t kFlagUnchecked = 1;  // section flag: no section CRC (its tensors carry their own)
constexpr uint32_t kTensorApproximate = 1;
constexpr uint32_t kTensorPacked = 2;  // bytes in a backend's blocked layout (the layout codec's record follows)
constexpr uint32_t kMaxRank = 64;

const char* const kRequired[] = {"meta", "ir", "source", "tensors", "names", "passes", "python", "weights"};

// ---- little-endian encoding of the binary sections ----

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    out_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Every read is bounds-checked: a short or corrupted section is a
// FormatError naming the section, never a read past its end.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}
  uint8_t u8() { return *take(1); }
  uint32_t u32() { return load<uint32_t>(); }
  uint64_t u64() { return load<uint64_t>(); }
  int64_t i64() { return load<int64_t>(); }
  double f64() { return load<double>(); }
  std::string str() {
    uint64_t len = u64();
    if (len > n_ - at_) fail("a string of " + std::to_string(len) + " bytes runs past the end");
    const uint8_t* s = take(static_cast<size_t>(len));
    return std::string(reinterpret_cast<const char*>(s), static_cast<size_t>(len));
  }
  std::vector<std::string> strs() {
    uint32_t n = count(8);
    std::vector<std::string> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i) v.push_back(str());
    return v;
  }
  // A count of items at least `min_bytes` each: more than the rest could hold is corruption.
  uint32_t count(size_t min_bytes) {
    uint32_t n = u32();
    if (n > (n_ - at_) / std::max<size_t>(min_bytes, 1)) fail("a count of " + std::to_string(n) + " does not fit");
    return n;
  }
  void expectEnd() {
    if (at_ != n_) fail(std::to_string(n_ - at_) + " unread bytes at its end");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw FormatError("section '" + what_ + "' at byte " + std::to_string(at_) + ": " + why);
  }

 private:
  template <typename T> T load() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const uint8_t* take(size_t k) {
    if (k > n_ - at_) fail("ends early (" + std::to_string(n_ - at_) + " bytes left, " + std::to_string(k) + " needed)");
    const uint8_t* r = p_ + at_;
    at_ += k;
    return r;
  }
  const uint8_t* p_;
  size_t n_, at_ = 0;
  std::string what_;
};

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Elements a tensor's bytes span (highest addressed element + 1), or nullopt on overflow.
std::optional<uint64_t> spanElements(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  uint64_t span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) return std::nullopt;
    if (sizes[d] == 0) return 0;
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    uint64_t step;
    if (__builtin_mul_overflow(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &step) ||
        __builtin_add_overflow(span, step, &span))
      return std::nullopt;
  }
  return span;
}

// ---- pass records ----

void writeStats(Writer& w, const GraphStats& s) {
  w.u64(s.nodes);
  w.u64(s.fusion_groups);
  w.u32(static_cast<uint32_t>(s.kinds.size()));
  for (const auto& [k, n] : s.kinds) {
    w.str(k);
    w.u64(n);
  }
}

GraphStats readStats(Reader& r) {
  GraphStats s;
  s.nodes = r.u64();
  s.fusion_groups = r.u64();
  uint32_t n = r.count(16);
  for (uint32_t i = 0; i < n; ++i) {
    std::string k = r.str();
    s.kinds[k] = r.u64();
  }
  return s;
}

std::string encodePasses(const std::vector<PassRecord>& records) {
  Writer w;
  w.u32(static_cast<uint32_t>(records.size()));
  for (const PassRecord& p : records) {
    w.str(p.name);
    w.u8(p.changed ? 1 : 0);
    w.f64(p.seconds);
    writeStats(w, p.before);
    writeStats(w, p.after);
    w.str(p.ir);
    w.strs(p.verify_errors);
    w.strs(p.notes);
    w.u32(static_cast<uint32_t>(p.unfused.size()));
    for (const Unfused& u : p.unfused) {
      w.str(u.kind);
      w.str(u.source);
      w.str(u.value);
      w.str(u.reason);
    }
    w.str(p.error);
  }
  return w.take();
}

std::vector<PassRecord> decodePasses(Reader r) {
  std::vector<PassRecord> out;
  uint32_t n = r.count(40);
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    PassRecord p;
    p.name = r.str();
    p.changed = r.u8() != 0;
    p.seconds = r.f64();
    p.before = readStats(r);
    p.after = readStats(r);
    p.ir = r.str();
    p.verify_errors = r.strs();
    p.notes = r.strs();
    uint32_t nu = r.count(32);
    for (uint32_t j = 0; j < nu; ++j) {
      Unfused u;
      u.kind = r.str();
      u.source = r.str();
      u.value = r.str();
      u.reason = r.str();
      p.unfused.push_back(std::move(u));
    }
    p.error = r.str();
    out.push_back(std::move(p));
  }
  r.expectEnd();
  return out;
}

// ---- saving ----

// One tensor to write: its bytes (the span its strides address) and how to
// read them back.
struct OutTensor {
  ScalarType dtype;
  std::vector<int64_t> sizes, strides;
  const uint8_t* bytes = nullptr;
  uint64_t nbytes = 0;
  bool approximate = false;
  std::shared_ptr<void> keep;  // a plain copy made for a compacted weight, or the packed one
  std::optional<std::vector<int64_t>> packed;  // pre-packed: the layout codec's record of its blocked layout
  uint64_t offset = 0;         // in "weights"
  uint32_t crc = 0;
};

std::string describe(ScalarType dt, const std::vector<int64_t>& sizes) {
  std::string s(scalarTypeName(dt));
  s += "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + ")";
}

class TensorTable {
 public:
  int64_t addConstant(const ConstantTensor& c) {
    if (!c.hasData())
      throw std::invalid_argument("cannot save a tensor attribute without data (" + describe(c.dtype, c.sizes) +
                                  "): the graph has a tensor constant no weight was bound to");
    std::vector<int64_t> strides = c.strides;
    if (strides.empty() || strides.size() != c.sizes.size()) strides = contiguousStrides(c.sizes);
    return add(c.dtype, c.sizes, strides, c.data, c.approximate, nullptr);
  }
  int64_t addTensor(const Tensor& held) {
    Tensor t = held;
    std::shared_ptr<void> keep;
    if (t.isBlocked()) {  // a weight compacted into its primitive's layout: kept pre-packed, or written back plain
      const LayoutCodec* codec = layoutCodec();
      if (auto rec = codec ? codec->encode(t) : std::nullopt) {
        auto key = std::make_tuple(t.data(), t.dtype(), t.sizes(), std::vector<int64_t>{-1});
        if (auto it = index_.find(key); it != index_.end()) return it->second;
        OutTensor o;
        o.dtype = t.dtype();
        o.sizes = t.sizes();
        o.strides = contiguousStrides(t.sizes());
        o.bytes = static_cast<const uint8_t*>(t.data());
        o.nbytes = rec->second;
        o.keep = t.storage();
        o.packed = std::move(rec->first);
        entries_.push_back(std::move(o));
        index_.emplace(std::move(key), static_cast<int64_t>(entries_.size() - 1));
        return static_cast<int64_t>(entries_.size() - 1);
      }
      ExecContext ctx;
      t = toPlain(ctx, held);
    }
    if (!t.defined()) throw std::invalid_argument("cannot save an undefined tensor constant");
    keep = t.storage();
    return add(t.dtype(), t.sizes(), t.strides(), t.data(), false, std::move(keep));
  }
  std::vector<OutTensor>& entries() { return entries_; }

 private:
  static std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
    std::vector<int64_t> s(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * std::max<int64_t>(sizes[d], 1);
    return s;
  }
  int64_t add(ScalarType dt, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, const void* data,
              bool approximate, std::shared_ptr<void> keep) {
    auto key = std::make_tuple(data, dt, sizes, strides);
    if (auto it = index_.find(key); it != index_.end()) return it->second;
    auto span = spanElements(sizes, strides);
    if (!span) throw std::invalid_argument("cannot save a tensor with negative strides (" + describe(dt, sizes) + ")");
    OutTensor o;
    o.dtype = dt;
    o.sizes = sizes;
    o.strides = strides;
    o.bytes = static_cast<const uint8_t*>(data);
    o.nbytes = *span * scalarTypeSize(dt);
    o.approximate = approximate;
    o.keep = std::move(keep);
    entries_.push_back(std::move(o));
    index_.emplace(std::move(key), static_cast<int64_t>(entries_.size() - 1));
    return static_cast<int64_t>(entries_.size() - 1);
  }
  using Key = std::tuple<const void*, ScalarType, std::vector<int64_t>, std::vector<int64_t>>;
  std::map<Key, int64_t> index_;
  std::vector<OutTensor> entries_;
};

std::string metaText() {
  const LayoutCodec* codec = layoutCodec();
  std::ostringstream os;
  os << "format: " << kModelFormatVersion << "\n"
     << "llga_version: " << LLGA_VERSION << "\n"
     << "onednn_version: " << (codec ? codec->version() : "none") << "\n"
     << "cpu_isa: " << cpuFingerprint() << "\n";
  return os.str();
}

struct Section {
  std::string name;
  std::string bytes;  // empty for "weights", written from the tensors
  uint64_t offset = 0, size = 0;
  uint32_t crc = 0, flags = 0;
};

class File {
 public:
  explicit File(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw std::system_error(errno, std::generic_category(), "cannot write " + path);
  }
  ~File() {
    if (f_) std::fclose(f_);
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail();
  }
  void zeros(size_t n) {
    static const char z[4096] = {};
    while (n) {
      size_t k = std::min(n, sizeof z);
      write(z, k);
      n -= k;
    }
  }
  void close() {
    if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) fail();
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) fail();
  }

 private:
  [[noreturn]] void fail() { throw std::system_error(errno, std::generic_category(), "cannot write " + path_); }
  std::string path_;
  FILE* f_;
};

void putU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void putU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

void writeFile(const std::string& path, std::vector<Section>& sections, std::vector<OutTensor>& tensors) {
  // Offsets: header, table, the text/binary sections, then weights at a page boundary.
  uint64_t at = kHeaderBytes + kEntryBytes * sections.size();
  for (Section& s : sections) {
    if (s.name == "weights") continue;
    s.offset = at;
    s.size = s.bytes.size();
    s.crc = crc32c(s.bytes.data(), s.bytes.size());
    at += s.size;
  }
  Section& w = sections.back();
  w.offset = alignUp(at, kWeightsAlign);
  w.flags = kFlagUnchecked;
  const uint64_t file_size = w.offset + w.size;

  std::string table(kEntryBytes * sections.size(), '\0');
  for (size_t i = 0; i < sections.size(); ++i) {
    char* e = table.data() + i * kEntryBytes;
    std::memcpy(e, sections[i].name.data(), std::min(sections[i].name.size(), kNameBytes));
    putU64(e + 16, sections[i].offset);
    putU64(e + 24, sections[i].size);
    putU32(e + 32, sections[i].crc);
    putU32(e + 36, sections[i].flags);
  }
  char header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  putU32(header + 8, kModelFormatVersion);
  putU32(header + 12, static_cast<uint32_t>(sections.size()));
  putU64(header + 16, file_size);
  putU64(header + 24, kHeaderBytes);
  putU32(header + 32, crc32c(table.data(), table.size()));
  putU32(header + 36, crc32c(header, 36));

  File f(path);
  f.write(header, sizeof header);
  f.write(table.data(), table.size());
  for (const Section& s : sections)
    if (s.name != "weights") f.write(s.bytes.data(), s.bytes.size());
  f.zeros(w.offset - at);
  uint64_t wat = 0;
  for (const OutTensor& t : tensors) {
    f.zeros(t.offset - wat);
    f.write(t.bytes, t.nbytes);
    wat = t.offset + t.nbytes;
  }
  f.zeros(w.size - wat);
  f.close();
}

// ---- loading ----

struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) ::munmap(base, size);
  }
};

std::map<std::string, std::string> parseMeta(const std::string& text) {
  std::map<std::string, std::string> meta;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    meta[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return meta;
}

}  // namespace

std::string cpuFingerprint() {
  const LayoutCodec* codec = layoutCodec();
  return codec ? codec->fingerprint() : "none";
}

void saveModel(const std::string& path, const CompiledGraph& compiled, const ModelExtras& extras) {
  TensorTable table;
  // What the plan bound: the truth for top-level constants (a weight bound by
  // name, or compacted after the first call, has no data on the IR any more).
  std::unordered_map<const ConstantTensor*, int64_t> from_plan;
  std::vector<std::pair<std::string, int64_t>> names;
  std::vector<TensorRef> keep_alive;
  for (const Plan::BoundConstant& b : compiled.boundConstants()) {
    if (!b.held.isTensor()) continue;
    const Node* n = b.value->node();
    if (n->kind() == prim::GetAttr) {
      names.emplace_back(b.weight_name, table.addTensor(b.held.tensor()));
      continue;
    }
    const AttrValue* a = n->kind() == prim::Constant ? n->attributes().find(attr::value) : nullptr;
    if (!a || !a->is<TensorRef>()) continue;
    keep_alive.push_back(a->get<TensorRef>());
    from_plan[a->get<TensorRef>().get()] = table.addTensor(b.held.tensor());
  }
  std::ostringstream ir;
  printWithTensorIndices(ir, *compiled.graph(), [&](const TensorRef& t) -> int64_t {
    if (auto it = from_plan.find(t.get()); it != from_plan.end()) return it->second;
    return table.addConstant(*t);
  });

  Writer tw;
  std::vector<OutTensor>& tensors = table.entries();
  uint64_t wat = 0;
  tw.u32(static_cast<uint32_t>(tensors.size()));
  for (OutTensor& t : tensors) {
    t.offset = alignUp(wat, kTensorAlign);
    wat = t.offset + t.nbytes;
    t.crc = crc32c(t.bytes, t.nbytes);
    tw.u32(static_cast<uint32_t>(scalarTypeCode(t.dtype)));
    tw.u32((t.approximate ? kTensorApproximate : 0) | (t.packed ? kTensorPacked : 0));
    tw.u32(static_cast<uint32_t>(t.sizes.size()));
    tw.u32(t.crc);
    tw.u64(t.offset);
    tw.u64(t.nbytes);
    for (int64_t s : t.sizes) tw.i64(s);
    for (int64_t s : t.strides) tw.i64(s);
    if (t.packed) {
      tw.u32(static_cast<uint32_t>(t.packed->size()));
      for (int64_t x : *t.packed) tw.i64(x);
    }
  }
  Writer nw;
  nw.u32(static_cast<uint32_t>(names.size()));
  for (const auto& [name, i] : names) {
    nw.u32(static_cast<uint32_t>(i));
    nw.str(name);
  }
  std::vector<Section> sections;
  sections.push_back({"meta", metaText()});
  sections.push_back({"ir", ir.str()});
  sections.push_back({"source", extras.source_ir});
  sections.push_back({"tensors", tw.take()});
  sections.push_back({"names", nw.take()});
  sections.push_back({"passes", encodePasses(extras.passes)});
  sections.push_back({"python", extras.python});
  sections.push_back({"weights", ""});
  sections.back().size = alignUp(wat, kTensorAlign);

  // Written beside the target, then renamed over it: a reader never sees half a
  // file. The temporary name is this process's and this call's own, so that
  // two saves to one path (threads, processes) never write one temporary file.
  static std::atomic<uint64_t> saves{0};
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(saves.fetch_add(1));
  try {
    writeFile(tmp, sections, tensors);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "cannot write " + path);
  }
}

LoadedModel loadModel(const std::string& path, const LoadOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw std::system_error(err, std::generic_category(), "cannot read " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) throw std::system_error(EISDIR, std::generic_category(), "cannot load " + path);
    throw FormatError(path + ": not a regular file");
  }
  auto m = std::make_shared<Mapping>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size) {
    // Private and writable: pages stay shared with the page cache (and other
    // processes) until written, and nothing can write into the file.
    void* p = ::mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "cannot map " + path);
    }
    m->base = p;
  }
  ::close(fd);
  const auto* data = static_cast<const uint8_t*>(m->base);
  return loadModel(std::shared_ptr<const void>(m, m->base), data, m->size, path, options);
}

LoadedModel loadModel(std::shared_ptr<const void> owner, const uint8_t* data, size_t size, const std::string& name,
                      const LoadOptions& options) {
  auto fail = [&](const std::string& why) -> FormatError { return FormatError(name + ": " + why); };
  if (size < 8 || std::memcmp(data, kMagic, 8) != 0)
    throw fail("not an llga model file (its first bytes are not the .llga magic number)");
  if (size < kHeaderBytes) throw fail("truncated: " + std::to_string(size) + " bytes, less than the 64-byte header");
  uint32_t version, count, table_crc, header_crc;
  uint64_t file_size, table_at;
  std::memcpy(&version, data + 8, 4);
  std::memcpy(&count, data + 12, 4);
  std::memcpy(&file_size, data + 16, 8);
  std::memcpy(&table_at, data + 24, 8);
  std::memcpy(&table_crc, data + 32, 4);
  std::memcpy(&header_crc, data + 36, 4);
  if (version > kModelFormatVersion)
    throw fail("format version " + std::to_string(version) + " is newer than this llga reads (up to " +
               std::to_string(kModelFormatVersion) + "): load it with a newer llga, or save it again with this one");
  if (version == 0) throw fail("format version 0 does not exist (a damaged header)");
  if (options.check_sections && crc32c(data, 36) != header_crc) throw fail("the header's checksum does not match");
  if (file_size != size)
    throw fail(file_size > size ? "truncated: " + std::to_string(size) + " bytes of the " + std::to_string(file_size) +
                                      " the header announces"
                                : std::to_string(size - file_size) + " bytes after the end the header announces");
  if (count == 0 || count > kMaxSections) throw fail("a section count of " + std::to_string(count));
  if (table_at < kHeaderBytes || table_at > size || count * kEntryBytes > size - table_at)
    throw fail("the section table lies outside the file");
  if (options.check_sections && crc32c(data + table_at, count * kEntryBytes) != table_crc)
    throw fail("the section table's checksum does not match");

  std::map<std::string, std::pair<const uint8_t*, uint64_t>> sections;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = data + table_at + i * kEntryBytes;
    std::string sname(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kNameBytes));
    uint64_t off, len;
    uint32_t crc, flags;
    std::memcpy(&off, e + 16, 8);
    std::memcpy(&len, e + 24, 8);
    std::memcpy(&crc, e + 32, 4);
    std::memcpy(&flags, e + 36, 4);
    if (off > size || len > size - off) throw fail("section '" + sname + "' lies outside the file");
    if (sections.count(sname)) throw fail("section '" + sname + "' appears twice");
    if (options.check_sections && !(flags & kFlagUnchecked) && crc32c(data + off, len) != crc)
      throw fail("section '" + sname + "' is corrupted (its checksum does not match)");
    sections[sname] = {data + off, len};
  }
  for (const char* req : kRequired)
    if (!sections.count(req)) throw fail("section '" + std::string(req) + "' is missing");
  auto text = [&](const char* s) {
    return std::string(reinterpret_cast<const char*>(sections[s].first), static_cast<size_t>(sections[s].second));
  };

  LoadedModel out;
  out.format_version = version;
  out.file_bytes = size;
  out.meta = parseMeta(text("meta"));
  out.extras.source_ir = text("source");
  out.extras.python = text("python");
  try {
    out.extras.passes = decodePasses(Reader(sections["passes"].first, sections["passes"].second, "passes"));
  } catch (const FormatError& e) {
    throw fail(e.what());
  }

  // The tensor table, each entry over the mapped weights.
  const auto [wdata, wsize] = sections["weights"];
  out.weight_bytes = wsize;
  if (reinterpret_cast<uintptr_t>(wdata) % kTensorAlign != 0) throw fail("the weights section is not aligned");
  std::vector<TensorRef> tensors;
  std::vector<uint32_t> crcs;
  std::vector<std::pair<const uint8_t*, uint64_t>> bytes;  // each tensor's bytes in the mapping
  struct Packed {
    std::vector<int64_t> layout;  // the layout codec's record
    size_t index;
  };
  std::unordered_map<const ConstantTensor*, Packed> packed;  // the IR's shell of each pre-packed weight
  try {
    Reader r(sections["tensors"].first, sections["tensors"].second, "tensors");
    uint32_t n = r.count(32);
    tensors.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      const std::string which = "tensor " + std::to_string(i);
      auto dt = scalarTypeFromCode(r.u32());
      uint32_t flags = r.u32(), rank = r.u32(), crc = r.u32();
      uint64_t off = r.u64(), nbytes = r.u64();
      if (!dt) r.fail(which + ": unknown dtype");
      if (rank > kMaxRank) r.fail(which + ": rank " + std::to_string(rank));
      auto t = std::make_shared<ConstantTensor>();
      t->dtype = *dt;
      for (uint32_t d = 0; d < rank; ++d) t->sizes.push_back(r.i64());
      for (uint32_t d = 0; d < rank; ++d) t->strides.push_back(r.i64());
      auto span = spanElements(t->sizes, t->strides);
      uint64_t expect = 0;
      if (!span || __builtin_mul_overflow(*span, scalarTypeSize(*dt), &expect))
        r.fail(which + ": its sizes or strides are out of range");
      int64_t numel = 1;
      for (int64_t s : t->sizes)
        if (__builtin_mul_overflow(numel, s, &numel)) r.fail(which + ": too many elements");
      if (off % kTensorAlign != 0 || off > wsize || nbytes > wsize - off)
        r.fail(which + ": its bytes lie outside the weights section");
      if (flags & kTensorPacked) {
        uint32_t len = r.count(8);
        if (len > 8 * kMaxRank) r.fail(which + ": a layout record of " + std::to_string(len) + " fields");
        std::vector<int64_t> rec(len);
        for (auto& x : rec) x = r.i64();
        packed[t.get()] = Packed{std::move(rec), i};  // data stays null: the plan binds the packed tensor by name
      } else {
        if (expect != nbytes) r.fail(which + ": its sizes and strides do not match its " + std::to_string(nbytes) + " bytes");
        t->data = const_cast<uint8_t*>(wdata + off);
        t->owner = std::const_pointer_cast<void>(owner);
      }
      t->approximate = flags & kTensorApproximate;
      tensors.push_back(std::move(t));
      crcs.push_back(crc);
      bytes.emplace_back(wdata + off, nbytes);
    }
    r.expectEnd();
  } catch (const FormatError& e) {
    throw fail(e.what());
  }
  out.tensors = tensors.size();
  out.packed = packed.size();
  if (options.verify_weights) {
    std::vector<char> bad(tensors.size(), 0);
    const int threads = getNumThreads();  // llga's setting, not whatever OpenMP was last told (torch sets it too)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < tensors.size(); ++i) bad[i] = crc32c(bytes[i].first, bytes[i].second) != crcs[i];
    for (size_t i = 0; i < bad.size(); ++i)
      if (bad[i])
        throw fail("the bytes of tensor " + std::to_string(i) + " (" + describe(tensors[i]->dtype, tensors[i]->sizes) +
                   ") are corrupted (their checksum does not match)");
  }
  WeightMap weights;
  try {
    Reader r(sections["names"].first, sections["names"].second, "names");
    uint32_t n = r.count(12);
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t index = r.u32();
      std::string wname = r.str();
      if (index >= tensors.size()) r.fail("weight '" + wname + "' names tensor " + std::to_string(index) + " of " +
                                          std::to_string(tensors.size()));
      if (!tensors[index]->hasData()) r.fail("weight '" + wname + "' names a pre-packed tensor");
      weights[wname] = tensorFromConstant(*tensors[index]);
    }
    r.expectEnd();
  } catch (const FormatError& e) {
    throw fail(e.what());
  }

  ParseOptions po;
  po.filename = name + " (section 'ir')";
  po.tensors = &tensors;
  try {
    out.graph = parseGraph(text("ir"), po);
  } catch (const ParseError& e) {
    throw fail(std::string("its graph does not parse: ") + e.what());
  }
  // Pre-packed weights: each the value of a top-level constant, bound by its
  // name in the primitive's layout from the mapped bytes (zero copy) where
  // this process's oneDNN and ISA are the writer's; written back plain (the
  // kernels pack them again) where not.
  const LayoutCodec* codec = layoutCodec();
  out.packed_used = codec && out.meta["cpu_isa"] == codec->fingerprint() && out.meta["onednn_version"] == codec->version();
  if (!packed.empty() && !codec) throw fail("it holds pre-packed weights and this build has no backend to read them");
  if (!packed.empty()) {
    size_t bound = 0;
    std::string misuse;
    out.graph->forEachNode([&](Node* n) {
      const bool top = n->owningBlock() == out.graph->block() && n->kind() == prim::Constant;
      for (const auto& item : n->attributes()) {
        const Symbol attr_name = item.first;
        auto visit = [&](const AttrValue& a, auto& self) -> void {
          if (a.is<AttrList>()) {
            for (const AttrValue& item : a.get<AttrList>()) self(item, self);
            return;
          }
          if (!a.is<TensorRef>()) return;
          auto it = packed.find(a.get<TensorRef>().get());
          if (it == packed.end()) return;
          if (!top || attr_name != attr::value) {
            if (misuse.empty()) misuse = n->kind().toQualString();
            return;
          }
          const ConstantTensor& shell = *a.get<TensorRef>();
          const auto [p, nbytes] = bytes[it->second.index];
          auto storage = Storage::borrow(const_cast<uint8_t*>(p), nbytes, std::const_pointer_cast<void>(owner), false);
          Tensor t;
          try {
            t = codec->decode(it->second.layout, shell.sizes, std::move(storage), nbytes);
          } catch (const std::invalid_argument& e) {
            throw fail("tensor " + std::to_string(it->second.index) + ": " + e.what());
          }
          if (!out.packed_used) {
            ExecContext ctx;
            t = toPlain(ctx, t);
          }
          weights[n->output()->debugName()] = std::move(t);
          ++bound;
        };
        visit(item.second, visit);
      }
    });
    if (!misuse.empty()) throw fail("a pre-packed tensor is read by " + misuse + ", not by a top-level constant");
    if (bound < packed.size()) throw fail(std::to_string(packed.size() - bound) + " pre-packed tensor(s) no constant reads");
  }
  if (options.build) {
    try {
      out.compiled = std::make_shared<CompiledGraph>(out.graph, std::move(weights));
    } catch (const UnsupportedOps& e) {
      throw fail(std::string("it was written by llga ") + out.meta["llga_version"] + ", and " + e.what());
    } catch (const std::invalid_argument& e) {
      throw fail(std::string("its graph does not bind: ") + e.what());
    }
  }
  return out;
}

}  // namespace llga
