// fuzz_entry_points.cpp — the entry_points.txt parser (parse_entry_points)
// and importlib's value pattern (split_value) on arbitrary bytes.
//
// Invariants: on success every parsed view lies inside the input text, and
// a failure leaves `out` as it was (the parser promises both); split_value's
// parts lie inside the value.
#include <cstdint>
#include <string_view>
#include <vector>

#include "epload/entry_point.hpp"
#include "epload/metadata.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace epload;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<ParsedEntry> out;
  out.push_back({"pre", "existing", "entry"});  // must survive an error
  auto r = parse_entry_points(text, "fuzz/entry_points.txt", out);
  fuzz::check(!out.empty() && out[0].name == "existing", "parse_entry_points lost earlier entries");
  if (!r) {
    fuzz::check(out.size() == 1, "parse_entry_points kept entries of a failed parse");
    fuzz::check(!r.error().message.empty(), "an error without a message");
    fuzz::touch(r.error().message);
    return 0;
  }
  unsigned sink = 0;
  for (std::size_t i = 1; i < out.size(); ++i) {
    const ParsedEntry& e = out[i];
    fuzz::check(
        fuzz::inside(e.group, text) && fuzz::inside(e.name, text) && fuzz::inside(e.value, text),
        "a parsed view lies outside the text");
    sink += fuzz::touch(e.group) + fuzz::touch(e.name) + fuzz::touch(e.value);
    if (auto parts = split_value(e.value)) {
      fuzz::check(fuzz::inside(parts->module, e.value) && fuzz::inside(parts->attr, e.value),
                  "split_value part outside");
      fuzz::check(!parts->module.empty(), "split_value matched an empty module");
      for (std::string_view x : parts->extras)
        fuzz::check(fuzz::inside(x, e.value), "split_value extra outside");
    }
  }
  // The whole input as one value too: split_value sees any bytes there.
  if (auto parts = split_value(text)) {
    fuzz::check(fuzz::inside(parts->module, text) && fuzz::inside(parts->attr, text),
                "split_value part outside");
    for (std::string_view x : parts->extras)
      fuzz::check(fuzz::inside(x, text), "split_value extra outside");
  }
  return static_cast<int>(sink & 0);
}
