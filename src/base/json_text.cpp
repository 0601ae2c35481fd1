// json_text.cpp — JSON text helpers shared by the cache writer and reader,
// the CLI's output and memos, and the trace writer: the integrity hash, hex
// digits, and JSON string escapes both ways (one table of the two-character
// escapes serves both).
//
// The checksum (see docs/cache-format.md) is a word-at-a-time hash whose every step —
// xor in an 8-byte word, multiply by an odd constant, xorshift — is a
// bijection of the 64-bit state, so a change confined to one aligned word
// always changes its lane, and the final fold (a chain of the same steps,
// a bijection of each lane given the others) always changes the result.
// Four lanes run at ~4 bytes per cycle.
//
// decode_json_string() is the reader's string path: the common string has
// no escape and is returned as a view into the input buffer, so nothing is
// copied and simdjson's string buffer (as large as the file) is never
// touched; a string with escapes is decoded exactly as JSON defines them.
#include "json_text.hpp"

#include <cstring>

#include "utf8.hpp"

namespace epload::detail {

namespace {

constexpr char k_hex[] = "0123456789abcdef";

/// JSON's two-character escapes: the character, and the letter after the
/// backslash that stands for it ('/' is only ever decoded: it needs none).
constexpr char k_short_escapes[][2] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},  {'\n', 'n'},
                                       {'\t', 't'}, {'\r', 'r'},   {'\b', 'b'}, {'\f', 'f'}};

/// The letter of `c`'s two-character escape (k_short_escapes), or 0.
char short_escape(char c) {
  for (const auto& e : k_short_escapes) {
    if (e[0] == c) return e[1];
  }
  return 0;
}

/// The character a two-character escape's `letter` stands for, or 0.
char unescape(char letter) {
  for (const auto& e : k_short_escapes) {
    if (e[1] == letter) return e[0];
  }
  return 0;
}

/// True when one of the 8 bytes at `p` is a control character, '"' or '\\'
/// (the classic "has a byte less than n" / "has a zero byte" word tricks).
inline bool needs_escape(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  constexpr std::uint64_t k_ones = 0x0101010101010101ULL, k_highs = 0x8080808080808080ULL;
  const std::uint64_t quote = w ^ (k_ones * '"'), backslash = w ^ (k_ones * '\\');
  const std::uint64_t below_space = (w - k_ones * 0x20) & ~w;
  const std::uint64_t zero_quote = (quote - k_ones) & ~quote;
  const std::uint64_t zero_backslash = (backslash - k_ones) & ~backslash;
  return ((below_space | zero_quote | zero_backslash) & k_highs) != 0;
}

bool hex4(const char* p, const char* end, std::uint32_t& out) {
  if (end - p < 4) return false;
  out = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    out <<= 4;
    if (c >= '0' && c <= '9') out |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') out |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') out |= static_cast<std::uint32_t>(c - 'A' + 10);
    else return false;
  }
  return true;
}

}  // namespace

namespace {

constexpr std::uint64_t k_mul = 0xff51afd7ed558ccdULL;

/// One step: xor in a word, multiply by an odd constant, xorshift.  Each
/// part is a bijection of the state for a fixed word, and of the word for a
/// fixed state.
inline std::uint64_t mix(std::uint64_t h, std::uint64_t w) {
  h = (h ^ w) * k_mul;
  return h ^ (h >> 32);
}

inline std::uint64_t load64(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

}  // namespace

std::uint64_t body_hash(std::string_view s) {
  // Four independent lanes (words 0, 1, 2, 3 of each 32-byte block), so the
  // multiplications overlap: ~4x the speed of one chain.  The remaining
  // whole words go to lanes 0, 1, 2 in turn, the final partial word
  // (zero-padded, possibly empty) to the next lane; then the lanes are
  // folded in a chain of the same steps.
  const char* p = s.data();
  const std::size_t n = s.size();
  std::uint64_t h0 = 0x9e3779b97f4a7c15ULL ^ n, h1 = 0xc2b2ae3d27d4eb4fULL, h2 = 0x165667b19e3779f9ULL,
                h3 = 0x27d4eb2f165667c5ULL;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    h0 = mix(h0, load64(p + i));
    h1 = mix(h1, load64(p + i + 8));
    h2 = mix(h2, load64(p + i + 16));
    h3 = mix(h3, load64(p + i + 24));
  }
  std::uint64_t* lanes[4] = {&h0, &h1, &h2, &h3};
  std::size_t lane = 0;
  for (; i + 8 <= n; i += 8) {
    *lanes[lane] = mix(*lanes[lane], load64(p + i));
    ++lane;
  }
  std::uint64_t w = 0;
  std::memcpy(&w, p + i, n - i);
  *lanes[lane] = mix(*lanes[lane], w);
  return mix(mix(mix(h0, h1), h2), h3);
}

void put_hex16(char* out, std::uint64_t v) {
  for (int k = 15; k >= 0; --k, v >>= 4) out[k] = k_hex[v & 0xf];
}

bool parse_hex16(std::string_view text, std::uint64_t& out) {
  if (text.size() != 16) return false;
  std::uint64_t v = 0;
  for (const char c : text) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  out = v;
  return true;
}

/// Decodes the JSON string whose content starts at `p` (just past the
/// opening quote) in the input buffer ending at `end`.  The common case, no
/// escape, is a view into the input: no copy, and simdjson's string buffer
/// (as large as the file) is never touched.  Escapes decode into `scratch`.
/// Returns false for a malformed string (simdjson's stage 1 already checked
/// that quotes balance; this also bounds every access by `end`).
bool decode_json_string(const char* p, const char* end, std::string& scratch, std::string_view& out) {
  const auto* quote = static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
  if (quote == nullptr) return false;
  if (std::memchr(p, '\\', static_cast<std::size_t>(quote - p)) == nullptr) {
    out = std::string_view(p, static_cast<std::size_t>(quote - p));
    return true;
  }
  scratch.clear();
  while (p < end) {
    const char c = *p++;
    if (c == '"') {
      out = scratch;
      return true;
    }
    if (c != '\\') {
      scratch += c;
      continue;
    }
    if (p >= end) return false;
    const char letter = *p++;
    if (const char plain = unescape(letter); plain != 0) {
      scratch += plain;
      continue;
    }
    if (letter != 'u') return false;
    std::uint32_t cp = 0, low = 0;
    if (!hex4(p, end, cp)) return false;
    p += 4;
    if (cp >= 0xd800 && cp < 0xdc00) {  // a high surrogate needs its low half
      if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, low) || low < 0xdc00 || low > 0xdfff) {
        return false;
      }
      p += 6;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return false;  // a lone low surrogate is not a character
    }
    append_utf8(static_cast<char32_t>(cp), scratch);
  }
  return false;
}

void append_json_escaped(std::string& out, std::string_view s) {
  std::size_t run = 0;  // start of the pending run of bytes that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    // Eight bytes at a time while none needs an escape (the common case).
    while (i + 8 <= s.size() && !needs_escape(s.data() + i)) i += 8;
    if (i >= s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    if (const char letter = short_escape(static_cast<char>(c)); letter != 0) {
      const char e[2] = {'\\', letter};
      out.append(e, 2);
    } else {
      const char u[6] = {'\\', 'u', '0', '0', k_hex[c >> 4], k_hex[c & 0xf]};
      out.append(u, sizeof u);
    }
  }
  out.append(s.data() + run, s.size() - run);
}

}  // namespace epload::detail
