// scan_text.hpp — Python's str rules on UTF-8 bytes: line breaks
// (str.splitlines), whitespace (str.strip, re's \s) and lower-casing
// (str.lower), shared by the metadata parser and the scanner.
//
// The inline helpers work on text that is already known to be valid UTF-8
// (the parser validates first), so they only ever look at whole sequences and
// never allocate.
#pragma once

#include <cstddef>      // std::size_t
#include <string>       // py_lower output
#include <string_view>  // text in

namespace epload::detail {

/// Decodes one strict UTF-8 sequence at p (Python's "utf-8" codec: no
/// overlongs, no surrogates, nothing above U+10FFFF).  Returns its length and
/// sets `cp`, or returns 0 when the bytes at p do not start a valid sequence.
inline std::size_t decode_utf8(const char* p, const char* end, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(p[0]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  const std::ptrdiff_t left = end - p;
  auto cont = [&](std::ptrdiff_t i, unsigned lo, unsigned hi) {
    if (i >= left) return false;
    const auto b = static_cast<unsigned char>(p[i]);
    return b >= lo && b <= hi;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    if (!cont(1, 0x80, 0xbf)) return 0;
    cp = (char32_t(b0 & 0x1f) << 6) | (static_cast<unsigned char>(p[1]) & 0x3f);
    return 2;
  }
  if (b0 >= 0xe0 && b0 <= 0xef) {
    // E0 needs A0.. (no overlong), ED needs ..9F (no surrogates).
    const unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80;
    const unsigned hi = b0 == 0xed ? 0x9f : 0xbf;
    if (!cont(1, lo, hi) || !cont(2, 0x80, 0xbf)) return 0;
    cp = (char32_t(b0 & 0x0f) << 12) | (char32_t(static_cast<unsigned char>(p[1]) & 0x3f) << 6) |
         (static_cast<unsigned char>(p[2]) & 0x3f);
    return 3;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    // F0 needs 90.. (no overlong), F4 needs ..8F (nothing above U+10FFFF).
    const unsigned lo = b0 == 0xf0 ? 0x90 : 0x80;
    const unsigned hi = b0 == 0xf4 ? 0x8f : 0xbf;
    if (!cont(1, lo, hi) || !cont(2, 0x80, 0xbf) || !cont(3, 0x80, 0xbf)) return 0;
    cp = (char32_t(b0 & 0x07) << 18) | (char32_t(static_cast<unsigned char>(p[1]) & 0x3f) << 12) |
         (char32_t(static_cast<unsigned char>(p[2]) & 0x3f) << 6) |
         (static_cast<unsigned char>(p[3]) & 0x3f);
    return 4;
  }
  return 0;  // 80-C1 (continuation or overlong lead), F5-FF
}

/// Byte length of the str.splitlines() boundary starting at p, or 0.
/// Boundaries: \n \r \r\n \v \f \x1c \x1d \x1e U+0085 U+2028 U+2029.
inline std::size_t line_break_len(const char* p, const char* end) {
  const auto b = static_cast<unsigned char>(*p);
  switch (b) {
    case '\n': case '\v': case '\f': case 0x1c: case 0x1d: case 0x1e:
      return 1;
    case '\r':
      return (end - p >= 2 && p[1] == '\n') ? 2 : 1;
    case 0xc2:  // U+0085 NEL is C2 85
      return (end - p >= 2 && static_cast<unsigned char>(p[1]) == 0x85) ? 2 : 0;
    case 0xe2: {  // U+2028 / U+2029 are E2 80 A8 / E2 80 A9
      if (end - p < 3 || static_cast<unsigned char>(p[1]) != 0x80) return 0;
      const auto c = static_cast<unsigned char>(p[2]);
      return (c == 0xa8 || c == 0xa9) ? 3 : 0;
    }
    default:
      return 0;
  }
}

/// Byte length of the Python whitespace character (str.isspace) starting at
/// p, or 0.  The set, checked against CPython 3.11: \t \n \v \f \r \x1c-\x1f
/// space U+0085 U+00A0 U+1680 U+2000-U+200A U+2028 U+2029 U+202F U+205F U+3000.
inline std::size_t space_len(const char* p, const char* end) {
  const auto b = static_cast<unsigned char>(*p);
  if (b < 0x80) return ((b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x20)) ? 1 : 0;
  const std::ptrdiff_t left = end - p;
  if (b == 0xc2) {
    if (left < 2) return 0;
    const auto c = static_cast<unsigned char>(p[1]);
    return (c == 0x85 || c == 0xa0) ? 2 : 0;
  }
  if (left < 3) return 0;
  const auto c1 = static_cast<unsigned char>(p[1]);
  const auto c2 = static_cast<unsigned char>(p[2]);
  switch (b) {
    case 0xe1:
      return (c1 == 0x9a && c2 == 0x80) ? 3 : 0;  // U+1680
    case 0xe2:
      if (c1 == 0x80) {  // U+2000-200A, U+2028, U+2029, U+202F
        return ((c2 >= 0x80 && c2 <= 0x8a) || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf) ? 3 : 0;
      }
      return (c1 == 0x81 && c2 == 0x9f) ? 3 : 0;  // U+205F
    case 0xe3:
      return (c1 == 0x80 && c2 == 0x80) ? 3 : 0;  // U+3000
    default:
      return 0;
  }
}

/// Byte length of the Python whitespace character that ENDS at `end`, or 0.
/// Valid UTF-8 makes the backward match unambiguous: a lead byte never
/// appears inside another sequence.
inline std::size_t space_len_before(const char* begin, const char* end) {
  const std::ptrdiff_t n = end - begin;
  if (n <= 0) return 0;
  const auto last = static_cast<unsigned char>(end[-1]);
  if (last < 0x80) return ((last >= 0x09 && last <= 0x0d) || (last >= 0x1c && last <= 0x20)) ? 1 : 0;
  if (n >= 2 && static_cast<unsigned char>(end[-2]) == 0xc2) return space_len(end - 2, end) ? 2 : 0;
  if (n >= 3) return space_len(end - 3, end) == 3 ? 3 : 0;
  return 0;
}

/// str.strip(): removes Python whitespace from both ends.  `s` must be valid
/// UTF-8.  The result is a view into `s`.
inline std::string_view py_strip(std::string_view s) {
  const char* b = s.data();
  const char* e = b + s.size();
  while (b < e) {
    const std::size_t n = space_len(b, e);
    if (n == 0) break;
    b += n;
  }
  while (e > b) {
    const std::size_t n = space_len_before(b, e);
    if (n == 0) break;
    e -= n;
  }
  return {b, static_cast<std::size_t>(e - b)};
}

/// True when every byte is ASCII (the fast path of every Unicode rule).
inline bool is_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

/// Appends str.lower() of `s` to `out`: full Unicode lower-casing with
/// CPython 3.11's tables, including U+0130 -> "i\u0307" and the Final_Sigma
/// rule for U+03A3.  Bytes that are not valid UTF-8 (file names decoded with
/// surrogateescape in Python) are copied unchanged, as lower() leaves lone
/// surrogates alone.
void py_lower(std::string_view s, std::string& out);

/// Lower-cases one code point with the simple (one to one) mapping;
/// exposed for the exhaustive unit test.
char32_t py_lower_simple(char32_t c);

}  // namespace epload::detail
