// Shape: the sizes or strides of a tensor, held inline up to kInline dims.
//
// A tensor's sizes and strides are two of these; with std::vector each view,
// copy or temporary tensor cost two heap allocations and two frees, a fifth
// of a small model's call (transformer blocks at batch 1, scripted loops).
// Shape keeps up to kInline int64s in the object and goes to the heap only
// beyond that. It has std::vector<int64_t>'s interface where llga uses it,
// converts implicitly to and from std::vector<int64_t> (oneDNN's dims, IR
// sizes) and compares with one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace llga {

class Shape {
 public:
  static constexpr uint32_t kInline = 6;
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Shape() = default;
  explicit Shape(size_t n) { resize(n); }
  Shape(size_t n, int64_t v) { assign(n, v); }
  Shape(std::initializer_list<int64_t> l) { assign(l.begin(), l.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit by design
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { take(o); }
  ~Shape() { delete[] heap_; }

  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      delete[] heap_;
      heap_ = nullptr;
      size_ = 0;
      cap_ = kInline;
      take(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  Shape& operator=(const std::vector<int64_t>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT: implicit by design

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& at(size_t i) { return data()[check(i)]; }
  const int64_t& at(size_t i) const { return data()[check(i)]; }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= cap_) return;
    if (n > UINT32_MAX) throw std::length_error("llga::Shape of more than 2^32 dims");
    const auto c = static_cast<uint32_t>(std::max<size_t>(n, 2 * static_cast<size_t>(cap_)));
    auto* h = new int64_t[c];
    std::copy(begin(), end(), h);
    delete[] heap_;
    heap_ = h;
    cap_ = c;
  }
  void clear() { size_ = 0; }
  void resize(size_t n) { resize(n, 0); }
  void resize(size_t n, int64_t v) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, v);
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    if (size_ == cap_) reserve(size_ + 1);
    data()[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  void assign(size_t n, int64_t v) {
    size_ = 0;
    resize(n, v);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    const auto n = static_cast<size_t>(std::distance(first, last));
    if (n > cap_) {  // a fresh buffer (the range cannot be this shape's own: it is longer)
      if (n > UINT32_MAX) throw std::length_error("llga::Shape of more than 2^32 dims");
      auto* h = new int64_t[n];
      std::copy(first, last, h);
      delete[] heap_;
      heap_ = h;
      cap_ = static_cast<uint32_t>(n);
      size_ = static_cast<uint32_t>(n);
      return;
    }
    std::copy(first, last, data());  // within capacity: overlapping ranges copy forward safely from a prefix
    size_ = static_cast<uint32_t>(n);
  }
  void assign(std::initializer_list<int64_t> l) { assign(l.begin(), l.end()); }

  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    const size_t at = gap(pos, n);
    std::fill(data() + at, data() + at + n, v);
    return data() + at;
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape items(first, last);  // the range may be this shape's own
    const size_t at = gap(pos, items.size());
    std::copy(items.begin(), items.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> l) { return insert(pos, l.begin(), l.end()); }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_t>(first - begin()), n = static_cast<size_t>(last - first);
    std::copy(data() + at + n, end(), data() + at);
    size_ -= static_cast<uint32_t>(n);
    return data() + at;
  }
  void swap(Shape& o) noexcept {
    Shape t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const Shape& a, const Shape& b) { return equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Shape& a, const std::vector<int64_t>& b) {
    return equal(a.begin(), a.end(), b.data(), b.data() + b.size());
  }
  friend bool operator==(const std::vector<int64_t>& a, const Shape& b) { return b == a; }
  friend bool operator!=(const Shape& a, const std::vector<int64_t>& b) { return !(a == b); }
  friend bool operator!=(const std::vector<int64_t>& a, const Shape& b) { return !(b == a); }

 private:
  static bool equal(const int64_t* a, const int64_t* ae, const int64_t* b, const int64_t* be) {
    return ae - a == be - b && std::equal(a, ae, b);
  }
  size_t check(size_t i) const {
    if (i >= size_) throw std::out_of_range("llga::Shape index " + std::to_string(i) + " of " + std::to_string(size_));
    return i;
  }
  // Opens n slots at pos; returns its index.
  size_t gap(const_iterator pos, size_t n) {
    const auto at = static_cast<size_t>(pos - begin());
    reserve(size_ + n);
    std::copy_backward(data() + at, end(), end() + n);
    size_ += static_cast<uint32_t>(n);
    return at;
  }
  void take(Shape& o) noexcept {
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.heap_ = nullptr;
      o.cap_ = kInline;
    } else {
      std::copy_n(o.inline_, std::min(o.size_, kInline), inline_);  // size_ <= kInline here
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  int64_t* heap_ = nullptr;  // beyond kInline dims
  uint32_t size_ = 0, cap_ = kInline;
  int64_t inline_[kInline];
};

// "(2, 3, 4)": sizes or strides in a message.
inline std::string shapeString(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

}  // namespace llga
