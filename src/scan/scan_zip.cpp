// scan_zip.cpp — the central directory of a zip archive, read exactly as far
// as CPython 3.11's zipfile.ZipFile(path).namelist() reads it.
//
// The verdict must be exact in one direction only: "this archive contributes
// nothing" must be true, since the scan then answers without importlib.  So
// every condition under which zipfile raises (and importlib, suppressing the
// exception, lists nothing) is mirrored: no end-of-central-directory record
// in the last 64 KiB, a multi-disk zip64 locator, a negative central
// directory offset, a truncated entry, a bad entry signature, an unsupported
// extract version, a name flagged UTF-8 that does not decode, a corrupt extra
// field.  Anything that zipfile accepts is matched by top-level name; a match
// means "has distributions" and the caller defers to importlib, which is
// always safe.  Only the end of the file and the central directory are read
// (two pread calls); nothing is decompressed.
#include "scan_zip.hpp"

#include <unistd.h>  // pread

#include <cstdint>  // fixed-width fields
#include <string_view>
#include <vector>  // read buffers

#include "epload/metadata.hpp"  // find_invalid_utf8
#include "scan_lookup.hpp"

namespace epload::detail {

namespace {

constexpr std::size_t k_end_size = 22;      // sizeEndCentDir
constexpr std::size_t k_end64_size = 56;    // sizeEndCentDir64
constexpr std::size_t k_locator_size = 20;  // sizeEndCentDir64Locator
constexpr std::size_t k_entry_size = 46;    // sizeCentralDir
constexpr unsigned k_max_extract_version = 63;

std::uint32_t u16(const unsigned char* p) { return p[0] | (p[1] << 8); }
std::uint32_t u32(const unsigned char* p) {
  return u16(p) | (static_cast<std::uint32_t>(u16(p + 2)) << 16);
}
std::uint64_t u64(const unsigned char* p) {
  return u32(p) | (static_cast<std::uint64_t>(u32(p + 4)) << 32);
}

// Reads up to n bytes at offset; a short read is not an error (file.read()).
bool read_at(int fd, std::uint64_t offset, std::size_t n, std::vector<unsigned char>& buf) {
  buf.resize(n);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  buf.resize(got);
  return true;
}

bool has_sig(const unsigned char* p, unsigned char a, unsigned char b) {
  return p[0] == 'P' && p[1] == 'K' && p[2] == a && p[3] == b;
}

/// What the start of the central directory is computed from (zipfile's
/// concat = location - size_cd - offset_cd and start = offset_cd + concat:
/// the offset cancels out, so it is not kept).
struct EndRecord {
  std::uint64_t cd_size = 0;
  std::int64_t location = 0;  // file offset of the end record
  bool zip64 = false;
};

enum class Step { ok, not_zip };

// _EndRecData64: a zip64 locator right before the end record overrides it.
Step read_end64(int fd, std::int64_t end_offset, EndRecord& rec) {
  if (end_offset < static_cast<std::int64_t>(k_locator_size)) return Step::ok;  // seek fails
  std::vector<unsigned char> buf;
  if (!read_at(fd, static_cast<std::uint64_t>(end_offset) - k_locator_size, k_locator_size, buf) ||
      buf.size() != k_locator_size || !has_sig(buf.data(), 6, 7)) {
    return Step::ok;
  }
  const std::uint32_t disk = u32(buf.data() + 4);
  const std::uint32_t disks = u32(buf.data() + 16);
  if (disk != 0 || disks > 1) return Step::not_zip;  // "span multiple disks"
  const std::int64_t at64 = end_offset - static_cast<std::int64_t>(k_locator_size + k_end64_size);
  if (at64 < 0) return Step::not_zip;  // this seek is not guarded: OSError
  if (!read_at(fd, static_cast<std::uint64_t>(at64), k_end64_size, buf) ||
      buf.size() != k_end64_size || !has_sig(buf.data(), 6, 6)) {
    return Step::ok;
  }
  rec.cd_size = u64(buf.data() + 40);
  rec.zip64 = true;
  return Step::ok;
}

// _EndRecData: the record at the very end (no comment), else the last
// signature in the final 64 KiB + 22 bytes.
Step read_end(int fd, std::uint64_t size, EndRecord& rec) {
  if (size < k_end_size) return Step::not_zip;
  std::vector<unsigned char> buf;
  if (!read_at(fd, size - k_end_size, k_end_size, buf)) return Step::not_zip;
  if (buf.size() == k_end_size && has_sig(buf.data(), 5, 6) && buf[20] == 0 && buf[21] == 0) {
    rec.cd_size = u32(buf.data() + 12);
    rec.location = static_cast<std::int64_t>(size - k_end_size);
    return read_end64(fd, rec.location, rec);
  }
  const std::uint64_t start = size > (1u << 16) + k_end_size ? size - (1u << 16) - k_end_size : 0;
  if (!read_at(fd, start, static_cast<std::size_t>(size - start), buf)) return Step::not_zip;
  if (buf.size() < 4) return Step::not_zip;
  for (std::size_t i = buf.size() - 4 + 1; i-- > 0;) {
    if (!has_sig(buf.data() + i, 5, 6)) continue;
    if (buf.size() - i < k_end_size) return Step::not_zip;  // "corrupted"
    rec.cd_size = u32(buf.data() + i + 12);
    rec.location = static_cast<std::int64_t>(start + i);
    return read_end64(fd, rec.location, rec);
  }
  return Step::not_zip;
}

// ZipInfo._decodeExtra: raises on a field longer than what remains, and on a
// zip64 field too short for the sizes it must supply.
bool extra_ok(std::string_view extra, std::uint64_t file_size, std::uint64_t compress_size,
              std::uint64_t header_offset) {
  auto p = reinterpret_cast<const unsigned char*>(extra.data());
  std::size_t left = extra.size();
  while (left >= 4) {
    const std::uint32_t tp = u16(p), ln = u16(p + 2);
    if (ln + 4 > left) return false;
    if (tp == 0x0001) {
      const unsigned char* d = p + 4;
      std::size_t dl = ln;
      auto take = [&](std::uint64_t& field) {
        if (dl < 8) return false;
        field = u64(d);
        d += 8, dl -= 8;
        return true;
      };
      if ((file_size == 0xffffffffffffffffull || file_size == 0xffffffffull) && !take(file_size)) {
        return false;
      }
      if (compress_size == 0xffffffffull && !take(compress_size)) return false;
      if (header_offset == 0xffffffffull && !take(header_offset)) return false;
    }
    p += ln + 4;
    left -= ln + 4;
  }
  return true;
}

}  // namespace

ZipVerdict probe_zip(int fd, bool base_is_egg, std::string& match) {
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) return ZipVerdict::not_a_zip;
  EndRecord rec;
  if (read_end(fd, static_cast<std::uint64_t>(end), rec) != Step::ok) return ZipVerdict::not_a_zip;
  // zipfile: concat = location - size_cd - offset_cd (less the zip64
  // records' size), start_dir = offset_cd + concat, "Bad offset for central
  // directory" when negative.  offset_cd cancels out; computed unsigned, as
  // Python's unbounded integers do (a zip64 size_cd of 2^63 or more
  // overflowed the signed arithmetic).
  const auto location = static_cast<std::uint64_t>(rec.location);
  const std::uint64_t records = rec.zip64 ? k_end64_size + k_locator_size : 0;
  if (rec.cd_size > location || location - rec.cd_size < records) return ZipVerdict::not_a_zip;
  const std::uint64_t from = location - rec.cd_size - records;  // start_dir
  std::vector<unsigned char> cd;
  // fp.read(size_cd) returns what there is; never allocate more than that.
  const auto file_size = static_cast<std::uint64_t>(end);
  const std::uint64_t avail = from < file_size ? file_size - from : 0;
  const std::uint64_t want = rec.cd_size < avail ? rec.cd_size : avail;
  if (!read_at(fd, from, static_cast<std::size_t>(want), cd)) return ZipVerdict::not_a_zip;
  // Walk the entries as zipfile does: reads from the buffer may come up short
  // (names, extras) without error; only a short fixed-size header raises.
  std::size_t pos = 0;
  auto take = [&](std::size_t n) {
    const std::size_t avail = pos < cd.size() ? cd.size() - pos : 0;
    const std::size_t got = n < avail ? n : avail;
    std::string_view v(reinterpret_cast<const char*>(cd.data()) + (pos < cd.size() ? pos : 0), got);
    pos += got;
    return v;
  };
  bool found = false;
  std::uint64_t total = 0;
  while (total < rec.cd_size) {
    const std::string_view head = take(k_entry_size);
    if (head.size() != k_entry_size) return ZipVerdict::not_a_zip;  // truncated
    const auto* h = reinterpret_cast<const unsigned char*>(head.data());
    if (!has_sig(h, 1, 2)) return ZipVerdict::not_a_zip;  // bad magic number
    const std::uint32_t flags = u16(h + 8);
    const std::uint64_t compress_size = u32(h + 20), file_size = u32(h + 24);
    const std::uint32_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    const std::uint64_t header_offset = u32(h + 42);
    if (h[6] > k_max_extract_version) return ZipVerdict::not_a_zip;  // NotImplementedError
    std::string_view name = take(name_len);
    if ((flags & 0x800) != 0 && find_invalid_utf8(name) != std::string_view::npos) {
      return ZipVerdict::not_a_zip;  // UnicodeDecodeError
    }
    // Otherwise cp437, which maps every byte; ASCII stays ASCII, and no
    // other cp437 character lower-cases into ASCII, so matching raw bytes is
    // exact.
    const std::string_view extra = take(extra_len);
    take(comment_len);
    if (!extra_ok(extra, file_size, compress_size, header_offset)) return ZipVerdict::not_a_zip;
    if (!found) {
      name = name.substr(0, name.find('\0'));  // ZipInfo truncates at NUL
      const std::string_view top = name.substr(0, name.find('/'));
      if (classify_child(top, base_is_egg) != ChildKind::none) {
        found = true;
        match.assign(top);
      }
    }
    total += k_entry_size + name_len + extra_len + comment_len;
  }
  return found ? ZipVerdict::has_distributions : ZipVerdict::no_distributions;
}

}  // namespace epload::detail
