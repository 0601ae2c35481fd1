// entry_point.cpp — split an entry-point value the way importlib does.
//
// importlib.metadata.EntryPoint.pattern, used with re.match:
//
//   (?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$
//
// and ep.extras = re.findall(r'\w+', extras).  The regex never needs real
// backtracking: [\w.]+ is followed only by things that cannot start with a
// word character, so each run is maximal; the only choice is which ']' closes
// the extras, and greedy `.*` (which stops at '\n') takes the last ']' on the
// line after which only whitespace remains.  Python's `$` also matches just
// before a final "\n".
//
// Approximation: `\w` is ASCII [A-Za-z0-9_]
// plus every non-ASCII code point that is not whitespace.  Python's Unicode
// `\w` excludes non-ASCII punctuation and symbols (e.g. "é" is a word
// character, "€" is not), so values using such symbols may split differently;
// `\s` is exact (str.isspace).
#include "epload/entry_point.hpp"

#include "scan_text.hpp"

namespace epload {

namespace {

class Cursor {
 public:
  explicit Cursor(std::string_view s) : m_s(s) {}

  std::size_t size() const { return m_s.size(); }
  char at(std::size_t i) const { return m_s[i]; }

  // Byte length of a `\w` character at i, or 0.
  std::size_t word_len(std::size_t i) const {
    const auto b = static_cast<unsigned char>(m_s[i]);
    if (b < 0x80) {
      return ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
              b == '_')
                 ? 1
                 : 0;
    }
    const char* p = m_s.data() + i;
    const char* end = m_s.data() + m_s.size();
    if (detail::space_len(p, end) != 0) return 0;
    char32_t cp;
    const std::size_t n = detail::decode_utf8(p, end, cp);
    return n == 0 ? 1 : n;  // an undecodable byte counts as one word byte
  }

  // Byte length of the character at i (1 for an undecodable byte).
  std::size_t char_len(std::size_t i) const {
    char32_t cp;
    const std::size_t n = detail::decode_utf8(m_s.data() + i, m_s.data() + m_s.size(), cp);
    return n == 0 ? 1 : n;
  }

  // End of the maximal `[\w.]+` run starting at i (i when empty).
  std::size_t word_dot_run(std::size_t i) const {
    while (i < m_s.size()) {
      if (m_s[i] == '.') {
        ++i;
        continue;
      }
      const std::size_t n = word_len(i);
      if (n == 0) break;
      i += n;
    }
    return i;
  }

  std::size_t skip_space(std::size_t i) const {
    const char* end = m_s.data() + m_s.size();
    while (i < m_s.size()) {
      const std::size_t n = detail::space_len(m_s.data() + i, end);
      if (n == 0) break;
      i += n;
    }
    return i;
  }

  // Python's `$` (no MULTILINE): end of string, or just before a final "\n".
  bool at_dollar(std::size_t i) const {
    return i == m_s.size() || (i + 1 == m_s.size() && m_s[i] == '\n');
  }

  std::string_view slice(std::size_t b, std::size_t e) const { return m_s.substr(b, e - b); }

 private:
  std::string_view m_s;
};

// Matches `((?P<extras>\[.*\])\s*)?$` at i.  On success sets `extras`
// (empty when the optional group is absent).
bool match_tail(const Cursor& c, std::size_t i, std::string_view& extras) {
  if (i < c.size() && c.at(i) == '[') {
    std::size_t line_end = i + 1;
    while (line_end < c.size() && c.at(line_end) != '\n') ++line_end;
    // Greedy `.*`: try the last ']' first.
    for (std::size_t k = line_end; k > i + 1; --k) {
      if (c.at(k - 1) != ']') continue;
      if (c.at_dollar(c.skip_space(k))) {
        extras = c.slice(i, k);
        return true;
      }
    }
  }
  extras = {};
  return c.at_dollar(i);
}

}  // namespace

std::optional<EntryPointParts> split_value(std::string_view value) {
  const Cursor c(value);
  const std::size_t module_end = c.word_dot_run(0);
  if (module_end == 0) return std::nullopt;
  EntryPointParts parts;
  parts.module = c.slice(0, module_end);
  const std::size_t after_module = c.skip_space(module_end);
  std::string_view extras;
  bool matched = false;
  if (after_module < c.size() && c.at(after_module) == ':') {
    const std::size_t attr_begin = c.skip_space(after_module + 1);
    const std::size_t attr_end = c.word_dot_run(attr_begin);
    if (attr_end > attr_begin && match_tail(c, c.skip_space(attr_end), extras)) {
      parts.attr = c.slice(attr_begin, attr_end);
      matched = true;
    }
  }
  if (!matched && !match_tail(c, after_module, extras)) return std::nullopt;
  // re.findall(r'\w+', extras)
  const Cursor e(extras);
  for (std::size_t i = 0; i < e.size();) {
    std::size_t j = i;
    while (j < e.size()) {
      const std::size_t n = e.word_len(j);
      if (n == 0) break;
      j += n;
    }
    if (j > i) {
      parts.extras.push_back(e.slice(i, j));
      i = j;
    } else {
      i += e.char_len(i);
    }
  }
  return parts;
}

}  // namespace epload
