// epload/metadata.hpp — parse entry_points.txt and the METADATA/PKG-INFO
// headers exactly as CPython 3.11's importlib.metadata does.
//
// The rules (Sectioned.read / Pair.parse in importlib.metadata):
//   * text is decoded as strict UTF-8; invalid UTF-8 is an error;
//   * lines are split like str.splitlines (\n \r \r\n \v \f \x1c \x1d \x1e
//     \x85 U+2028 U+2029) and stripped like str.strip (Unicode whitespace);
//   * empty lines and lines starting with '#' are skipped;
//   * a line that starts with '[' and ends with ']' opens a section named
//     line.strip("[]") (case kept, inner spaces kept);
//   * lines before the first section are dropped unparsed;
//   * any other line is split on its first '=' and both sides stripped; a line
//     without '=' is an error; duplicate names are all kept in file order.
#pragma once

#include <cstddef>      // std::size_t
#include <string>       // normalize_name output
#include <string_view>  // input text and output views
#include <vector>       // parse output

#include "epload/result.hpp"

namespace epload {

/// One `name = value` pair of a section.  Views point into the parsed text.
struct ParsedEntry {
  std::string_view group;
  std::string_view name;
  std::string_view value;
};

/// Parses the text of an entry_points.txt.  `file` is used only to name the
/// file in error messages ("<file>:<line>: ...").  On success the entries are
/// appended to `out` in file order; on error `out` is left unchanged.
Result<void> parse_entry_points(std::string_view text, std::string_view file,
                                std::vector<ParsedEntry>& out);

/// The two headers epload needs from METADATA / PKG-INFO.
struct MetadataHeaders {
  std::string_view name;     ///< first `Name:` header, "" if absent
  std::string_view version;  ///< first `Version:` header, "" if absent
  bool has_name = false;
};

/// Reads the RFC 822 header block of a METADATA / PKG-INFO text the way
/// email.message_from_string does for these two fields (case-insensitive
/// header names, first occurrence wins, value stripped).  Views point into
/// `text`.
MetadataHeaders parse_metadata_headers(std::string_view text);

/// Validates strict UTF-8 as Python's "utf-8" codec does (no surrogates,
/// no overlongs, nothing above U+10FFFF).  Returns the byte offset of the
/// first invalid byte, or npos when the text is valid.
std::size_t find_invalid_utf8(std::string_view text);

/// importlib.metadata's Prepared.normalize: runs of [-_.] become '_' and the
/// result is lower-cased.  Appends to `out`.
void normalize_name(std::string_view name, std::string& out);

}  // namespace epload
