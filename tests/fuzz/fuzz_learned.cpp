// fuzz_learned.cpp — the learned-devices store reader (LearnedFile::read:
// open, fstat, mmap, in-place parse) on the input written to a 0600 file in
// a private temporary directory.
//
// Invariants: every record's views lie in readable memory; open() + next()
// yields the records read() accepts, and reports damage exactly where read()
// gives none; an accepted file written back with write_learned() reads back
// to the same records.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "learned.hpp"

namespace {

using epload::detail::LearnedRecord;

unsigned touch_record(const LearnedRecord& r) {
  using epload::fuzz::touch;
  unsigned sum = touch(r.metadata_dir) + touch(r.name) + touch(r.value) + touch(r.library) + touch(r.devices);
  epload::detail::for_each_device(r.devices, [&](std::string_view name, bool declared) {
    sum += touch(name) + (declared ? 1u : 0u);
  });
  return sum;
}

bool same(const LearnedRecord& a, const LearnedRecord& b) {
  return a.search_path == b.search_path && a.metadata_dir == b.metadata_dir && a.name == b.name &&
         a.value == b.value && a.kind == b.kind && a.library == b.library && a.stamp == b.stamp &&
         a.abi == b.abi && a.learned == b.learned && a.devices == b.devices;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace epload;
  fuzz::TempDir& dir = fuzz::TempDir::get();
  const std::string path = dir.write("learned.txt", data, size);
  std::string why;
  const detail::LearnedFile file = detail::LearnedFile::read(path, &why);
  unsigned sink = fuzz::touch(why);
  // The loader's way, a record at a time: the same records, and damage
  // exactly when read() refused a file it could open.
  {
    detail::LearnedFile stream = detail::LearnedFile::open(path);
    std::size_t n = 0;
    for (LearnedRecord r; stream.next(r);) {
      sink += touch_record(r);
      if (!stream.damaged() && n < file.records().size()) {
        fuzz::check(same(r, file.records()[n]), "next() and read() disagree on a record");
      }
      ++n;
    }
    fuzz::check(!(stream.ended() && stream.damaged()), "next() ended and found damage");
    if (stream.ended()) {
      fuzz::check(n == file.records().size(), "next() and read() disagree on the count");
    } else {
      fuzz::check(file.records().empty(), "read() accepted a file next() did not read to its trailer");
    }
  }
  if (file.records().empty()) return static_cast<int>(sink & 0);
  for (const LearnedRecord& r : file.records()) sink += touch_record(r);

  const std::string again_path = dir.file("learned-again.txt");
  const auto written = detail::write_learned(again_path, file.records());
  fuzz::check(static_cast<bool>(written), "write_learned failed on records read from a file");
  std::string why_again;
  const detail::LearnedFile again = detail::LearnedFile::read(again_path, &why_again);
  if (again.records().size() != file.records().size()) {
    std::fprintf(stderr, "reading back: %s\n", why_again.c_str());
    fuzz::fail("a store written from accepted records does not read back");
  }
  for (std::size_t i = 0; i < again.records().size(); ++i) {
    fuzz::check(same(again.records()[i], file.records()[i]), "a record changed in a write/read round trip");
  }
  return static_cast<int>(sink & 0);
}
