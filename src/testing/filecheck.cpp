#include "testing/filecheck.h"

#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace llga::testing {
namespace {

std::vector<std::string> splitLines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t e = s.find('\n', start);
    if (e == std::string_view::npos) e = s.size();
    out.emplace_back(s.substr(start, e - start));
    start = e + 1;
  }
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

std::string escapeRegex(std::string_view s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : s) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Compiled {
  std::regex re;
  std::vector<std::pair<std::string, size_t>> defs;  // name -> capture group
};

class Matcher {
 public:
  Compiled compile(const CheckLine& c) {
    std::string re;
    Compiled out;
    size_t group = 0;
    const std::string& p = c.pattern;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 2, "{{") == 0) {
        size_t e = p.find("}}", i + 2);
        if (e == std::string::npos) throw std::invalid_argument("unclosed {{ in check line " + std::to_string(c.line));
        std::string inner = p.substr(i + 2, e - i - 2);
        re += "(?:" + inner + ")";
        group += std::regex(inner).mark_count();
        i = e + 2;
      } else if (p.compare(i, 2, "[[") == 0) {
        size_t e = p.find("]]", i + 2);
        if (e == std::string::npos) throw std::invalid_argument("unclosed [[ in check line " + std::to_string(c.line));
        std::string inner = p.substr(i + 2, e - i - 2);
        size_t colon = inner.find(':');
        if (colon == std::string::npos) {
          auto it = vars_.find(inner);
          if (it == vars_.end())
            throw std::invalid_argument("check line " + std::to_string(c.line) + " uses undefined [[" + inner + "]]");
          re += escapeRegex(it->second);
        } else {
          std::string sub = inner.substr(colon + 1);
          re += "(" + sub + ")";
          out.defs.emplace_back(inner.substr(0, colon), ++group);
          group += std::regex(sub).mark_count();
        }
        i = e + 2;
      } else {
        re += escapeRegex(std::string_view(&p[i], 1));
        ++i;
      }
    }
    out.re = std::regex(re);
    return out;
  }

  // Matches check `c` in line text starting at column `from`; returns the end column.
  std::optional<size_t> match(const CheckLine& c, const std::string& line, size_t from, bool bind) {
    Compiled comp = compile(c);
    std::smatch m;
    std::string tail = line.substr(std::min(from, line.size()));
    if (!std::regex_search(tail, m, comp.re)) return std::nullopt;
    if (bind)
      for (const auto& [name, g] : comp.defs) vars_[name] = m[g].str();
    return from + static_cast<size_t>(m.position(0) + m.length(0));
  }

 private:
  std::map<std::string, std::string> vars_;
};

std::string near(const std::vector<std::string>& lines, size_t at) {
  std::ostringstream os;
  size_t lo = at > 2 ? at - 2 : 0, hi = std::min(lines.size(), at + 3);
  for (size_t i = lo; i < hi; ++i) os << (i == at ? "  >> " : "     ") << lines[i] << "\n";
  if (lines.empty()) os << "     (empty output)\n";
  return os.str();
}

const char* kindName(CheckLine::Kind k) {
  static const char* names[] = {"CHECK", "CHECK-NEXT", "CHECK-SAME", "CHECK-NOT", "CHECK-DAG", "CHECK-LABEL"};
  return names[k];
}

}  // namespace

std::vector<CheckLine> parseChecks(std::string_view text, std::string_view prefix) {
  static const std::vector<std::pair<std::string, CheckLine::Kind>> suffixes = {
      {"-NEXT:", CheckLine::Next}, {"-SAME:", CheckLine::Same}, {"-NOT:", CheckLine::Not},
      {"-DAG:", CheckLine::Dag},   {"-LABEL:", CheckLine::Label}, {":", CheckLine::Check}};
  std::vector<CheckLine> out;
  auto lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    size_t p = l.find(prefix);
    while (p != std::string::npos && p > 0 && (std::isalnum(static_cast<unsigned char>(l[p - 1])) || l[p - 1] == '-'))
      p = l.find(prefix, p + 1);
    if (p == std::string::npos) continue;
    size_t q = p + prefix.size();
    bool known = false;
    for (const auto& [suf, kind] : suffixes) {
      if (l.compare(q, suf.size(), suf) != 0) continue;
      std::string pat = l.substr(q + suf.size());
      size_t b = pat.find_first_not_of(' '), e = pat.find_last_not_of(" \r");
      pat = b == std::string::npos ? "" : pat.substr(b, e - b + 1);
      out.push_back({kind, pat, i + 1});
      known = true;
      break;
    }
    // A directive this checker does not have (CHECK-COUNT-2:, CHECK-EMPTY:)
    // would otherwise be skipped, and the test pass without checking it.
    const size_t colon = l.find(':', q);
    if (!known && q < l.size() && l[q] == '-' && colon != std::string::npos &&
        l.find_first_of(" \t", q) > colon)
      throw std::invalid_argument("line " + std::to_string(i + 1) + ": unknown directive " + l.substr(p, colon - p + 1));
  }
  return out;
}

CheckResult runChecks(const std::vector<CheckLine>& checks, std::string_view output) {
  auto lines = splitLines(output);
  Matcher m;
  CheckResult res;
  auto failure = [&](const CheckLine& c, const std::string& why, size_t at) {
    res.ok = false;
    res.message = std::string(kindName(c.kind)) + " on line " + std::to_string(c.line) + " (" + c.pattern + "): " +
                  why + "\noutput near there:\n" + near(lines, at);
    return res;
  };
  if (checks.empty()) return failure(CheckLine{CheckLine::Check, "", 0}, "no CHECK lines", 0);

  size_t cursor = 0;  // first line a CHECK may match
  std::optional<size_t> last_line;
  size_t last_col = 0;
  std::vector<const CheckLine*> pending_not;
  // CHECK-NOT lines must not match in lines [from, to).
  auto checkNots = [&](size_t from, size_t to) -> bool {
    for (const CheckLine* n : pending_not)
      for (size_t i = from; i < to && i < lines.size(); ++i)
        if (m.match(*n, lines[i], 0, false)) { failure(*n, "matched where it must not", i); return false; }
    pending_not.clear();
    return true;
  };

  for (size_t ci = 0; ci < checks.size(); ++ci) {
    const CheckLine& c = checks[ci];
    switch (c.kind) {
      case CheckLine::Not:
        pending_not.push_back(&c);
        break;
      case CheckLine::Check:
      case CheckLine::Label: {
        size_t i = cursor;
        std::optional<size_t> end;
        for (; i < lines.size(); ++i)
          if ((end = m.match(c, lines[i], 0, true))) break;
        if (!end) return failure(c, "no match", cursor);
        if (!checkNots(cursor, i)) return res;
        last_line = i; last_col = *end; cursor = i + 1;
        break;
      }
      case CheckLine::Next: {
        size_t i = last_line ? *last_line + 1 : 0;
        if (i >= lines.size()) return failure(c, "no next line", lines.size() ? lines.size() - 1 : 0);
        auto end = m.match(c, lines[i], 0, true);
        if (!end) return failure(c, "the next line does not match", i);
        if (!checkNots(cursor, i)) return res;
        last_line = i; last_col = *end; cursor = i + 1;
        break;
      }
      case CheckLine::Same: {
        if (!last_line) return failure(c, "CHECK-SAME with no previous match", 0);
        auto end = m.match(c, lines[*last_line], last_col, true);
        if (!end) return failure(c, "no match on the same line", *last_line);
        last_col = *end;
        break;
      }
      case CheckLine::Dag: {
        std::vector<size_t> claimed;
        size_t group_end = ci;
        while (group_end < checks.size() && checks[group_end].kind == CheckLine::Dag) ++group_end;
        size_t max_line = cursor;
        for (size_t d = ci; d < group_end; ++d) {
          bool found = false;
          for (size_t i = cursor; i < lines.size(); ++i) {
            if (std::find(claimed.begin(), claimed.end(), i) != claimed.end()) continue;
            if (m.match(checks[d], lines[i], 0, true)) {
              claimed.push_back(i);
              max_line = std::max(max_line, i);
              found = true;
              break;
            }
          }
          if (!found) return failure(checks[d], "no match (in any order)", cursor);
        }
        size_t first = *std::min_element(claimed.begin(), claimed.end());
        if (!checkNots(cursor, first)) return res;
        last_line = max_line; last_col = lines[max_line].size(); cursor = max_line + 1;
        ci = group_end - 1;
        break;
      }
    }
  }
  if (!checkNots(cursor, lines.size())) return res;
  return res;
}

}  // namespace llga::testing
