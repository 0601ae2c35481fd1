// json_text.hpp — JSON text helpers (json_text.cpp): the integrity hash of
// the cache's files, hex digits, and JSON string escapes both ways.  Plain
// functions on bytes: the cache's files, the CLI's output and memo files,
// the trace writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace epload::detail {

/// The integrity hash of a file's body (see docs/cache-format.md and json_text.cpp).
std::uint64_t body_hash(std::string_view s);

/// Writes `v` as 16 lower-case hex digits to out[0..16).
void put_hex16(char* out, std::uint64_t v);

/// The inverse: `text` must be exactly 16 lower-case hex digits.
bool parse_hex16(std::string_view text, std::uint64_t& out);

/// Decodes the JSON string whose content starts at `p` (just past the
/// opening quote) and whose buffer ends at `end`: a view into the input when
/// it has no escape, else decoded into `scratch`.  False when malformed.
bool decode_json_string(const char* p, const char* end, std::string& scratch, std::string_view& out);

/// Appends `utf8` (valid UTF-8; the caller writes the quotes) to `out` as
/// the content of a JSON string: '"', '\\' and the control characters
/// escaped, \n \t \r \b \f as such, the others as \u00XX; every other byte
/// as it is.  Eight bytes at a time while none needs an escape.
void append_json_escaped(std::string& out, std::string_view utf8);

}  // namespace epload::detail
