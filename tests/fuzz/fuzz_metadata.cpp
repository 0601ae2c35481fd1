// fuzz_metadata.cpp — the METADATA / PKG-INFO header parser
// (parse_metadata_headers), the strict UTF-8 check and name normalisation,
// on arbitrary bytes (a METADATA file, or a directory name, is any bytes).
//
// Invariants: the headers are views inside the text; find_invalid_utf8
// returns npos or an offset inside the text, and text before that offset is
// valid; normalize_name only appends, and is idempotent on ASCII.
#include <cstdint>
#include <string>
#include <string_view>

#include "epload/metadata.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace epload;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const MetadataHeaders h = parse_metadata_headers(text);
  fuzz::check(fuzz::inside(h.name, text) && fuzz::inside(h.version, text),
              "a header view lies outside the text");
  fuzz::check(h.has_name || h.name.empty(), "a name without has_name");
  unsigned sink = fuzz::touch(h.name) + fuzz::touch(h.version);

  const std::size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    fuzz::check(bad < text.size(), "find_invalid_utf8 past the end");
    fuzz::check(find_invalid_utf8(text.substr(0, bad)) == std::string_view::npos,
                "the text before the first invalid byte is invalid");
  }

  std::string out = "x";
  normalize_name(text, out);
  fuzz::check(!out.empty() && out[0] == 'x', "normalize_name changed what was there");
  std::string again;
  const std::string_view once = std::string_view(out).substr(1);
  normalize_name(once, again);
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) fuzz::check(again == once, "normalize_name is not idempotent on ASCII");
  sink += fuzz::touch(again);
  return static_cast<int>(sink & 0);
}
