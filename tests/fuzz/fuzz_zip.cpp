// fuzz_zip.cpp — the zip probe for archives on the search path (probe_zip:
// end record, zip64 locator, central directory, extra fields) on the input
// as a file, both as a plain archive and as an *.egg.
//
// Invariant: has_distributions names a top-level match (`match` means
// nothing after the other verdicts, and the scanner ignores it then).
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "scan_zip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace epload;
  fuzz::MemFile file(data, size);
  for (const bool egg : {false, true}) {
    std::string match;
    const detail::ZipVerdict v = detail::probe_zip(file.fd(), egg, match);
    if (v == detail::ZipVerdict::has_distributions) {
      fuzz::check(!match.empty() && match.find('/') == std::string::npos, "a match that is not a top-level name");
    }
  }
  return 0;
}
