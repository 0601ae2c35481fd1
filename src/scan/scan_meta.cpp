// scan_meta.cpp — Distribution.metadata's read chain, and the small string
// helpers of the scanner.  See scan_meta.hpp.
#include "scan_meta.hpp"

#include <cstring>  // strerror

#include "epload/metadata.hpp"  // find_invalid_utf8, parse_metadata_headers
#include "epload/profile.hpp"   // read spans
#include "stamp.hpp"             // stamp_at

namespace epload::detail {

void join(std::string& out, std::string_view path, std::string_view child) {
  out.assign(path);
  if (!out.empty() && out.back() != '/') out.push_back('/');
  out.append(child);
}

FileRead read_in(FileReader& reader, int dirfd, std::string_view search_path, const std::string& rel,
                 std::string& scratch) {
  if (dirfd >= 0) return reader.read(dirfd, rel.c_str());
  join(scratch, search_path, rel);
  return reader.read(AT_FDCWD, scratch.c_str());
}

FileStamp stamp_in(int dirfd, std::string_view search_path, const std::string& rel, std::string& scratch) {
  if (dirfd >= 0) return stamp_at(dirfd, rel.c_str());
  join(scratch, search_path, rel);
  return stamp_at(AT_FDCWD, scratch.c_str());
}

std::string io_message(std::string_view path, int err) {
  // Permission errors never get here: read_text() suppresses them.
  return std::string(path) + ": cannot read: " + std::strerror(err) +
         " (importlib.metadata raises OSError here); check the file and its file system, or "
         "remove the distribution.";
}

std::string exhausted_message(std::string_view path, int err) {
  return std::string(path) + ": cannot read: " + std::strerror(err) +
         "; the answer cannot be known without reading it (nothing was cached): " + exhausted_advice(err) + ".";
}

void read_metadata(int dirfd, std::uint32_t path, std::string_view search_path,
                   std::string_view child, MetaInfo& meta, FileReader& reader, std::string& pool,
                   std::vector<Watch>& watches, std::string& rel) {
  meta.read = true;
  static constexpr std::string_view k_files[] = {"/METADATA", "/PKG-INFO", ""};
  std::string scratch;
  for (const std::string_view file : k_files) {
    rel.assign(child).append(file);
    const FileRead r = [&] {
      profile::Span span(profile::Phase::read, rel);
      return read_in(reader, dirfd, search_path, rel, scratch);
    }();
    watches.push_back({path, append(pool, rel), r.stamp});
    if (r.status == ReadStatus::absent) continue;
    if (r.status == ReadStatus::failed) {
      std::string where;
      join(where, search_path, rel);
      if (exhausted(r.error)) {
        meta.exhausted = r.error;
        meta.error = append(pool, exhausted_message(where, r.error));
      } else {
        meta.io_failed = true;
        meta.error = append(pool, io_message(where, r.error));
      }
      return;
    }
    if (const std::size_t bad = find_invalid_utf8(r.text); bad != std::string_view::npos) {
      std::string where;
      join(where, search_path, rel);
      meta.error = append(pool, where + ": invalid UTF-8 at byte offset " + std::to_string(bad) +
                                    " (importlib.metadata raises UnicodeDecodeError reading "
                                    "it); re-save it as UTF-8 or reinstall the distribution.");
      return;
    }
    if (r.text.empty()) continue;  // '' is falsy: try the next file
    const MetadataHeaders h = parse_metadata_headers(r.text);
    meta.has_name = h.has_name;
    meta.name = append(pool, h.name);
    meta.version = append(pool, h.version);
    return;
  }
}

std::string dist_name_error(std::string_view metadata_dir) {
  // Split as importlib's pathlib.Path(search_path, child): the messages
  // then name the file as a scan names it.
  const std::size_t slash = metadata_dir.rfind('/');
  const std::string_view parent =
      slash == std::string_view::npos ? std::string_view() : metadata_dir.substr(0, slash == 0 ? 1 : slash);
  const std::string_view child = slash == std::string_view::npos ? metadata_dir : metadata_dir.substr(slash + 1);
  MetaInfo meta;
  FileReader reader;
  std::string pool, rel;
  std::vector<Watch> watches;
  read_metadata(-1, 0, parent, child, meta, reader, pool, watches, rel);
  return std::string(meta.error.in(pool));
}

}  // namespace epload::detail
