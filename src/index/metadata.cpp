// metadata.cpp — entry_points.txt and METADATA headers, read the way
// CPython 3.11's importlib.metadata reads them.
//
// entry_points.txt (importlib.metadata.Sectioned.read + Pair.parse):
//
//   text = path.read_text(encoding='utf-8')       strict UTF-8, BOM kept
//   for line in map(str.strip, text.splitlines()): Unicode lines and spaces
//       skip '' and '#...'
//       '[...]'  -> section = line.strip('[]')    every [ and ] at the ends
//       no section yet -> dropped, never parsed
//       else name, value = map(str.strip, line.split('=', 1))
//
// Text mode also translates \r\n and \r to \n first; splitlines treats those
// as boundaries anyway, so splitting the raw bytes gives the same lines and
// every result can stay a view into the caller's buffer.  The parser
// therefore makes one validation pass and one splitting pass over the bytes
// and never allocates, except to grow `out` and to format an error.
//
// Python 3.12 and 3.13 parse identically.  They differ only in what
// entry_points() returns: with no selection, 3.12+ returns the entry points
// in discovery order instead of grouped by sorted group name (Index keeps the
// 3.11 order; the discovery order within each group is the same).
//
// METADATA / PKG-INFO: Distribution.metadata is
// email.message_from_string(text) with the compat32 policy; `msg['Name']`
// is the first header whose name equals "name" case-insensitively.  The
// header block follows email.feedparser: lines end at \n, \r or \r\n; it
// stops at the first line that is not `From `, `<printable-no-colon>*:` or a
// continuation (leading space or tab) — in particular at the first empty
// line; a value is the rest of its line after ':' with leading spaces and
// tabs removed (trailing spaces are kept, as Python keeps them; only the
// line ending is removed).
#include "epload/metadata.hpp"

#include <cstdint>  // std::uint64_t
#include <cstring>  // std::memcpy

#include "scan_text.hpp"

namespace epload {

namespace {

// The (1-based) splitlines line holding byte `offset` of `text`.
std::size_t line_of(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  const char* p = text.data();
  const char* const stop = p + offset;
  const char* const end = text.data() + text.size();
  while (p < stop) {
    const std::size_t n = detail::line_break_len(p, end);
    if (n != 0) {
      p += n;
      if (p <= stop) ++line;
      // a \r\n straddling `stop` still ends the line that holds it
    } else {
      ++p;
    }
  }
  return line;
}

std::string quote_excerpt(std::string_view line) {
  std::size_t cut = 80;
  if (line.size() > cut) {
    // Never split a UTF-8 sequence: the message must stay valid text.
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xc0) == 0x80) --cut;
  }
  std::string out = "\"";
  out.append(line.substr(0, cut));
  if (line.size() > cut) out.append("...");
  out.push_back('"');
  return out;
}

// A 256-entry table of the bytes that may begin a splitlines boundary, so the
// splitting loop tests one byte per character.
struct BreakStarts {
  bool v[256] = {};
  constexpr BreakStarts() {
    for (unsigned char c : {'\n', '\r', '\v', '\f', '\x1c', '\x1d', '\x1e'}) v[c] = true;
    v[0xc2] = true;  // U+0085
    v[0xe2] = true;  // U+2028, U+2029
  }
};
constexpr BreakStarts k_break_starts;

}  // namespace

std::size_t find_invalid_utf8(std::string_view text) {
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  const char* p = begin;
  while (p < end) {
    // ASCII fast path, eight bytes at a time.
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ull) != 0) break;
      p += 8;
    }
    if (p >= end) break;
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      continue;
    }
    char32_t cp;
    const std::size_t n = detail::decode_utf8(p, end, cp);
    // Python reports the start of the bad sequence (UnicodeDecodeError.start).
    if (n == 0) return static_cast<std::size_t>(p - begin);
    p += n;
  }
  return std::string_view::npos;
}

Result<void> parse_entry_points(std::string_view text, std::string_view file,
                                std::vector<ParsedEntry>& out) {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    char byte[8];
    static const char k_hex[] = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(text[bad]);
    byte[0] = '0', byte[1] = 'x', byte[2] = k_hex[b >> 4], byte[3] = k_hex[b & 15], byte[4] = 0;
    return Error{Errc::encoding,
                 std::string(file) + ":" + std::to_string(line_of(text, bad)) +
                     ": invalid UTF-8 (byte " + byte + " at offset " + std::to_string(bad) +
                     "); importlib.metadata raises UnicodeDecodeError for this file. "
                     "Re-save it as UTF-8 or reinstall the distribution."};
  }
  const std::size_t mark = out.size();
  const char* p = text.data();
  const char* const end = p + text.size();
  std::string_view group;
  bool in_section = false;
  std::size_t line_no = 0;
  while (p < end) {
    // Find the end of this line and the boundary's length.
    const char* q = p;
    std::size_t brk = 0;
    for (; q < end; ++q) {
      if (k_break_starts.v[static_cast<unsigned char>(*q)] &&
          (brk = detail::line_break_len(q, end)) != 0) {
        break;
      }
    }
    ++line_no;
    const std::string_view line = detail::py_strip({p, static_cast<std::size_t>(q - p)});
    p = q + brk;
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '[' && line.back() == ']') {
      // line.strip('[]'): every leading and trailing bracket goes.
      const std::size_t b = line.find_first_not_of("[]");
      group = b == std::string_view::npos
                  ? std::string_view(line.data(), 0)
                  : line.substr(b, line.find_last_not_of("[]") - b + 1);
      in_section = true;
      continue;
    }
    if (!in_section) continue;  // Sectioned.section_pairs drops it unparsed
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      out.resize(mark);
      return Error{Errc::parse,
                   std::string(file) + ":" + std::to_string(line_no) + ": entry point line " +
                       quote_excerpt(line) + " in section [" + std::string(group) +
                       "] has no '=' (expected 'name = value'); importlib.metadata fails on "
                       "this file (TypeError from Pair.parse). Fix or remove the line."};
    }
    out.push_back({group, detail::py_strip(line.substr(0, eq)), detail::py_strip(line.substr(eq + 1))});
  }
  return {};
}

MetadataHeaders parse_metadata_headers(std::string_view text) {
  MetadataHeaders h;
  bool has_version = false;
  const char* p = text.data();
  const char* const end = p + text.size();
  // The header being collected: which field, and where its value starts.
  enum class Field { none, other, name, version } current = Field::none;
  const char* value_begin = nullptr;
  const char* value_end = nullptr;
  auto finish = [&] {
    if (current == Field::name && !h.has_name) {
      h.name = {value_begin, static_cast<std::size_t>(value_end - value_begin)};
      h.has_name = true;
    } else if (current == Field::version && !has_version) {
      h.version = {value_begin, static_cast<std::size_t>(value_end - value_begin)};
      has_version = true;
    }
    current = Field::none;
  };
  while (p < end) {
    const char* q = p;
    while (q < end && *q != '\n' && *q != '\r') ++q;
    const char* next = q;
    if (next < end) next += (*next == '\r' && next + 1 < end && next[1] == '\n') ? 2 : 1;
    const std::string_view line(p, static_cast<std::size_t>(q - p));
    p = next;
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      // Folded continuation: Python joins it (with its newline) to the value.
      // The view spans the raw lines, so it differs from Python's string in
      // the one case of a folded Name/Version: Python turns \r\n into \n
      // and re-indents the value (textwrap.dedent); no real metadata folds
      // these two fields.
      if (current != Field::none) value_end = q;
      continue;
    }
    if (line.starts_with("From ")) {
      finish();
      continue;  // a Unix "From " envelope line, not a header
    }
    // `[\041-\071\073-\176]*:` — printable ASCII without space or ':', then ':'.
    std::size_t colon = 0;
    while (colon < line.size()) {
      const auto c = static_cast<unsigned char>(line[colon]);
      if (c == ':' || c < 0x21 || c > 0x7e) break;
      ++colon;
    }
    if (colon == line.size() || line[colon] != ':') break;  // end of the header block
    finish();
    if (colon == 0) continue;  // ":value": a defect Python skips
    const std::string_view key = line.substr(0, colon);
    auto iequals = [](std::string_view a, std::string_view b) {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
        if (c != b[i]) return false;
      }
      return true;
    };
    current = iequals(key, "name") ? Field::name : iequals(key, "version") ? Field::version
                                                                           : Field::other;
    const char* v = line.data() + colon + 1;
    while (v < q && (*v == ' ' || *v == '\t')) ++v;
    value_begin = v;
    value_end = q;
  }
  finish();
  return h;
}

namespace {

// Appends `name` with each run of '-', '_' and '.' as one `sep`
// (re.sub(r"[-_.]+", sep, name)), and ASCII capitals lowered when `lower`.
inline void collapse_separators(std::string_view name, char sep, bool lower, std::string& out) {
  bool in_run = false;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out.push_back(sep);
      in_run = true;
    } else {
      out.push_back(lower && c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
      in_run = false;
    }
  }
}

}  // namespace

void normalize_name(std::string_view name, std::string& out) {
  // re.sub(r"[-_.]+", "-", name).lower().replace('-', '_')
  if (detail::is_ascii(name)) {
    collapse_separators(name, '_', true, out);
    return;
  }
  // Full Unicode: lower-casing must see '-' where the separators were, as
  // Final_Sigma looks at neighbours.  No non-ASCII letter lower-cases to '-'.
  std::string dashed;
  dashed.reserve(name.size());
  collapse_separators(name, '-', false, dashed);
  const std::size_t from = out.size();
  detail::py_lower(dashed, out);
  for (std::size_t i = from; i < out.size(); ++i) {
    if (out[i] == '-') out[i] = '_';
  }
}

}  // namespace epload
