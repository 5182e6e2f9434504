#include "frontend/lexer.h"

#include <cstdio>

namespace llga {
namespace {
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }
bool isNameChar(char c) { return isIdentChar(c) || c == '.'; }
// Value names come from Python names and module paths ("x.1", "block1-0", unicode).
bool isValueNameChar(char c) { return isNameChar(c) || c == '-' || static_cast<unsigned char>(c) >= 0x80; }
}  // namespace

const char* tokName(Tok t) {
  static const char* names[] = {"end of input", "identifier", "value", "integer", "number", "string",
                                "'('", "')'", "'['", "']'", "'{'", "'}'", "','", "':'", "'='", "'*'",
                                "'?'", "'<'", "'>'", "'->'"};
  return names[static_cast<int>(t)];
}

Lexer::Lexer(std::string_view text, std::string filename) : text_(text), filename_(std::move(filename)) {}

void Lexer::error(size_t pos, const std::string& message) const {
  pos = std::min(pos, text_.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < pos; ++i)
    if (text_[i] == '\n') { ++line; line_start = i + 1; }
  size_t line_end = text_.find('\n', line_start);
  if (line_end == std::string_view::npos) line_end = text_.size();
  std::string excerpt(text_.substr(line_start, std::min<size_t>(line_end - line_start, 200)));
  for (char& c : excerpt)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = '?';
  size_t column = pos - line_start + 1;
  std::string full = filename_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message + "\n  " +
                     excerpt + "\n  " + std::string(std::min<size_t>(column - 1, 200), ' ') + "^";
  throw ParseError(full, message, line, column, excerpt);
}

size_t Lexer::skipBlanks() {
  has_peek_ = false;
  while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  return pos_;
}

void Lexer::skipTrivia() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '#') {  // a comment line
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

const Token& Lexer::peek() {
  if (!has_peek_) {
    size_t saved = pos_;
    peeked_ = lex();
    pos_ = saved;
    has_peek_ = true;
  }
  return peeked_;
}

Token Lexer::next() {
  Token t = peek();
  has_peek_ = false;
  if (t.kind == Tok::End) {
    pos_ = text_.size();
  } else {
    pos_ = t.pos + t.text.size() + (t.kind == Tok::ValueRef ? 1 : 0);
  }
  return t;
}

bool Lexer::accept(Tok k) {
  if (peek().kind != k) return false;
  next();
  return true;
}

Token Lexer::expect(Tok k, const char* what) {
  const Token& t = peek();
  if (t.kind != k) {
    std::string got = t.kind == Tok::End ? "end of input" : "'" + std::string(t.text.substr(0, 40)) + "'";
    if (t.kind == Tok::ValueRef) got = "'%" + std::string(t.text.substr(0, 40)) + "'";
    error(t.pos, std::string("expected ") + what + ", got " + got);
  }
  return next();
}

bool Lexer::peekIdent(std::string_view word) {
  const Token& t = peek();
  return t.kind == Tok::Ident && t.text == word;
}

Token Lexer::lex() {
  skipTrivia();
  Token t;
  t.pos = pos_;
  if (pos_ >= text_.size()) return t;
  const size_t start = pos_;
  char c = text_[pos_];
  auto single = [&](Tok k) {
    t.kind = k;
    t.text = text_.substr(start, 1);
    return t;
  };
  switch (c) {
    case '(': return single(Tok::LParen);
    case ')': return single(Tok::RParen);
    case '[': return single(Tok::LBracket);
    case ']': return single(Tok::RBracket);
    case '{': return single(Tok::LBrace);
    case '}': return single(Tok::RBrace);
    case ',': return single(Tok::Comma);
    case ':': return single(Tok::Colon);
    case '=': return single(Tok::Equals);
    case '*': return single(Tok::Star);
    case '?': return single(Tok::Question);
    case '<': return single(Tok::Less);
    case '>': return single(Tok::Greater);
    default: break;
  }
  if (c == '%') {
    size_t p = pos_ + 1;
    while (p < text_.size() && isValueNameChar(text_[p])) ++p;
    if (p == pos_ + 1) error(pos_, "expected a value name after '%'");
    t.kind = Tok::ValueRef;
    t.text = text_.substr(pos_ + 1, p - pos_ - 1);
    return t;
  }
  if (c == '"') {
    size_t p = pos_ + 1;
    while (true) {
      if (p >= text_.size() || text_[p] == '\n') error(start, "unterminated string");
      if (text_[p] == '\\') { p += 2; continue; }
      if (text_[p] == '"') break;
      ++p;
    }
    t.kind = Tok::String;
    t.text = text_.substr(start, p + 1 - start);
    return t;
  }
  if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
    t.kind = Tok::Arrow;
    t.text = text_.substr(start, 2);
    return t;
  }
  if (isDigit(c) || c == '-' || c == '+' || (c == '.' && pos_ + 1 < text_.size() && isDigit(text_[pos_ + 1]))) {
    size_t p = pos_;
    if (text_[p] == '-' || text_[p] == '+') ++p;
    if (text_.substr(p, 3) == "inf" || text_.substr(p, 3) == "nan") {
      t.kind = Tok::Float;
      t.text = text_.substr(start, p + 3 - start);
      return t;
    }
    bool is_float = false;
    size_t digits = p;
    while (p < text_.size() && isDigit(text_[p])) ++p;
    if (p < text_.size() && text_[p] == '.') { is_float = true; ++p; while (p < text_.size() && isDigit(text_[p])) ++p; }
    if (p == digits || (p == digits + 1 && text_[digits] == '.')) error(start, std::string("unexpected character '") + c + "'");
    if (p < text_.size() && (text_[p] == 'e' || text_[p] == 'E')) {
      size_t q = p + 1;
      if (q < text_.size() && (text_[q] == '+' || text_[q] == '-')) ++q;
      if (q < text_.size() && isDigit(text_[q])) {
        is_float = true;
        p = q;
        while (p < text_.size() && isDigit(text_[p])) ++p;
      }
    }
    t.kind = is_float ? Tok::Float : Tok::Int;
    t.text = text_.substr(start, p - start);
    return t;
  }
  if (isIdentStart(c)) {
    size_t p = pos_;
    while (p < text_.size()) {
      if (isNameChar(text_[p])) ++p;
      else if (text_[p] == ':' && p + 2 < text_.size() && text_[p + 1] == ':' && isIdentStart(text_[p + 2])) p += 2;
      else break;
    }
    t.kind = Tok::Ident;
    t.text = text_.substr(start, p - start);
    return t;
  }
  char buf[64];
  auto uc = static_cast<unsigned char>(c);
  if (uc >= 0x20 && uc < 0x7f) std::snprintf(buf, sizeof buf, "unexpected character '%c'", c);
  else std::snprintf(buf, sizeof buf, "unexpected byte 0x%02x", uc);
  error(start, buf);
}

std::string Lexer::unquote(const Token& t) const {
  std::string out;
  std::string_view s = t.text.substr(1, t.text.size() - 2);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') { out += s[i]; continue; }
    if (++i >= s.size()) error(t.pos + i, "bad escape at end of string");
    char e = s[i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': case '"': case '\'': out += e; break;
      default:
        if (e >= '0' && e <= '7') {
          int v = 0, n = 0;
          while (n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7') { v = v * 8 + (s[i] - '0'); ++i; ++n; }
          --i;
          out += static_cast<char>(v & 0xff);
        } else {
          error(t.pos + 1 + i, std::string("unknown escape '\\") + e + "' in string");
        }
    }
  }
  return out;
}

}  // namespace llga
