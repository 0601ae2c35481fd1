// scan_text.cpp — str.lower() on UTF-8, exactly as CPython 3.11 does it.
//
// importlib.metadata lower-cases file names (Lookup) and distribution names
// (Prepared.normalize) with str.lower(), which is full Unicode lower-casing.
// Real distribution names are ASCII, and callers take an ASCII fast path;
// this is the exact slow path for the rest, so that two metadata directories
// de-duplicate or group together in epload exactly when they do in Python.
//
// Three rules make up str.lower():
//   * the simple one-to-one mapping (k_lower_runs: runs of code points that
//     share a delta, with stride 1 or 2 for the alternating Latin/Cyrillic
//     blocks; a binary search finds the run);
//   * one special full mapping: U+0130 (İ) -> "i" U+0307;
//   * Final_Sigma: U+03A3 (Σ) becomes ς when a cased letter precedes it and
//     none follows (skipping case-ignorable characters both ways), else σ.
// The tables come from the interpreter itself (see scan_text_tables.hpp).
#include "scan_text.hpp"

#include <algorithm>  // std::upper_bound
#include <span>       // in_ranges

#include "scan_text_tables.hpp"
#include "utf8.hpp"

namespace epload::detail {

namespace {

bool in_ranges(std::span<const tables::Range> table, char32_t c) {
  // The last range whose start is <= c.
  const auto it = std::upper_bound(table.begin(), table.end(), c, [](char32_t v, const tables::Range& r) {
    return v < r.first;
  });
  return it != table.begin() && c <= (it - 1)->last;
}

bool is_cased(char32_t c) { return in_ranges(tables::k_cased, c); }

bool is_case_ignorable(char32_t c) { return in_ranges(tables::k_case_ignorable, c); }

// One decoded unit of the input: a code point, or an undecodable byte
// (cp == k_raw) which, like a surrogate-escaped byte, is neither cased nor
// case-ignorable.
constexpr char32_t k_raw = 0xffffffff;

std::size_t next_unit(const char* p, const char* end, char32_t& cp) {
  const std::size_t n = decode_utf8(p, end, cp);
  if (n != 0) return n;
  cp = k_raw;
  return 1;
}

// Final_Sigma for the Σ occupying [at, at + 2) of [begin, end): CPython's
// handle_capital_sigma on UTF-8.
bool is_final_sigma(const char* begin, const char* at, const char* end) {
  // Before Σ: the last unit that is not case-ignorable must be cased.  A
  // forward walk decodes exactly as Python did (a backward one could split
  // undecodable bytes differently).
  bool cased_before = false;
  for (const char* p = begin; p < at;) {
    char32_t cp;
    p += next_unit(p, at, cp);
    if (cp == k_raw || !is_case_ignorable(cp)) cased_before = cp != k_raw && is_cased(cp);
  }
  if (!cased_before) return false;
  for (const char* p = at + 2; p < end;) {
    char32_t cp;
    p += next_unit(p, end, cp);
    if (cp == k_raw || !is_case_ignorable(cp)) return cp == k_raw || !is_cased(cp);
  }
  return true;
}

}  // namespace

char32_t py_lower_simple(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  const auto* first = tables::k_lower_runs.data();
  const auto* last = first + tables::k_lower_runs.size();
  const auto* it = std::upper_bound(first, last, c, [](char32_t v, const tables::LowerRun& r) {
    return v < r.first;
  });
  if (it == first) return c;
  const tables::LowerRun& r = *(it - 1);
  if (c > r.last) return c;
  if (r.stride == 2 && ((c - r.first) & 1) != 0) return c;
  return static_cast<char32_t>(static_cast<int>(c) + r.delta);
}

void py_lower(std::string_view s, std::string& out) {
  const char* const begin = s.data();
  const char* const end = begin + s.size();
  for (const char* p = begin; p < end;) {
    const auto b = static_cast<unsigned char>(*p);
    if (b < 0x80) {
      out.push_back(static_cast<char>((b >= 'A' && b <= 'Z') ? b + 32 : b));
      ++p;
      continue;
    }
    char32_t cp;
    const std::size_t n = next_unit(p, end, cp);
    if (cp == k_raw) {
      out.push_back(*p);
    } else if (cp == 0x130) {
      out.append("i\xcc\x87");  // U+0130 -> U+0069 U+0307
    } else if (cp == 0x3a3) {
      append_utf8(is_final_sigma(begin, p, end) ? 0x3c2 : 0x3c3, out);
    } else {
      append_utf8(py_lower_simple(cp), out);
    }
    p += n;
  }
}

}  // namespace epload::detail
