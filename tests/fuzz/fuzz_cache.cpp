// fuzz_cache.cpp — the index cache reader (read_index_fd, cache.cpp) on the
// input as an open file, with each set of expectations the library reads
// with: a complete read (read_index(), `epload index`), the shipped
// relocatable index (EPLOAD_INDEX, open_shipped()), a cache file's key and
// the partial reads of open_index() under `paths` and `full` validation
// (one group, several groups, the groups' stamps, the watched names with
// their early check, the stamped "watched" section).
//
// Every section of a real file is hash-checked and the head checksummed, so
// almost every mutation would stop at the first check.  Each input is
// therefore read twice: as it is (the integrity and layout checks), and
// "repaired": every line after the head becomes the next section of the
// head's table (offsets and lengths rewritten), its hash recomputed, and
// the head's checksum last, so that mutations reach the JSON of each
// section.  The repair only rewrites numbers and hex digits it finds; it
// never makes an input valid that the reader should refuse.
//
// Invariants of a successful read: every view of the Index lies in
// readable memory and every entry point's distribution is one of the
// Index's; a complete Index serialised again reads back to the same answer.
#include <cstdint>
#include <cstdlib>  // getenv
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cache_internal.hpp"
#include "epload/cache.hpp"
#include "epload/index.hpp"
#include "fuzz_util.hpp"
#include "index_provenance.hpp"

namespace {

using namespace epload;

// The fixed names the seeds were made for: corpus/cache/cache-file.json by
// `epload index build --path /tmp/epload-fuzz-seed/site-packages`, and
// shipped-index.json by the same with `--output /tmp/epload-fuzz-seed/index.json`
// (its search path is stored as "site-packages"; read here from "/fuzz").
// EPLOAD_FUZZ_VERBOSE=1 prints what each read gave.
const std::vector<std::string> k_shipped_paths = {"/fuzz/site-packages"};
constexpr std::string_view k_shipped_base = "/fuzz";

bool is_hex16(std::string_view s) {
  if (s.size() != 16) return false;
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

/// A table row's numbers in line 1: `,<offset>,<length>,"<hash>",`.
struct Row {
  std::size_t offset_at, offset_len;  // the digits of the offset
  std::size_t length_at, length_len;  // the digits of the length
  std::size_t hash_at;                // the 16 hex digits
};

std::vector<Row> find_rows(std::string_view head) {
  std::vector<Row> rows;
  for (std::size_t q = 0; q + 18 <= head.size(); ++q) {
    // q: the opening quote of a 16-hex-digit string, preceded by ",D,D,".
    if (head[q] != '"' || head[q + 17] != '"' || !is_hex16(head.substr(q + 1, 16))) continue;
    if (q < 4 || head[q - 1] != ',') continue;
    std::size_t e = q - 1, b = e;
    while (b > 0 && head[b - 1] >= '0' && head[b - 1] <= '9') --b;
    if (b == e || b == 0 || head[b - 1] != ',') continue;
    Row r{};
    r.length_at = b;
    r.length_len = e - b;
    e = b - 1;
    b = e;
    while (b > 0 && head[b - 1] >= '0' && head[b - 1] <= '9') --b;
    if (b == e || b == 0 || head[b - 1] != ',') continue;
    r.offset_at = b;
    r.offset_len = e - b;
    r.hash_at = q + 1;
    rows.push_back(r);
  }
  return rows;
}

/// Rewrites the section table, the hashes and the checksum (see the top).
std::string repair(std::string_view input) {
  std::string file(input);
  const std::size_t nl = file.find('\n');
  if (nl == std::string::npos) return file;
  // The lines after the head: the sections' extents, in order.
  std::vector<std::pair<std::size_t, std::size_t>> lines;  // (offset from the body's start, length)
  for (std::size_t at = nl + 1; at < file.size();) {
    const std::size_t end = file.find('\n', at);
    const std::size_t stop = end == std::string::npos ? file.size() : end + 1;
    lines.emplace_back(at - (nl + 1), stop - at);
    at = stop;
  }
  std::string head = file.substr(0, nl + 1);
  const std::string body = file.substr(nl + 1);
  // Offsets depend on the head's length, which the new digits change: a
  // few rounds reach the fixed point.
  for (int round = 0; round < 4; ++round) {
    const std::vector<Row> rows = find_rows(head);
    std::string out;
    std::size_t from = 0;
    for (std::size_t i = 0; i < rows.size() && i < lines.size(); ++i) {
      const Row& r = rows[i];
      out.append(head, from, r.offset_at - from);
      out += std::to_string(head.size() + lines[i].first);
      out += ',';
      out += std::to_string(lines[i].second);
      from = r.length_at + r.length_len;
    }
    out.append(head, from, std::string::npos);
    if (out == head) break;
    head = std::move(out);
  }
  // The hashes, then the checksum (which covers them).
  const std::vector<Row> rows = find_rows(head);
  for (std::size_t i = 0; i < rows.size() && i < lines.size(); ++i) {
    const std::string_view bytes(body.data() + lines[i].first, lines[i].second);
    detail::put_hex16(&head[rows[i].hash_at], detail::body_hash(bytes));
  }
  constexpr std::string_view k_checksum = "\"checksum\":\"";
  const std::size_t c = head.find(k_checksum);
  if (c != std::string::npos) {
    const std::size_t p = c + k_checksum.size();
    if (p + 17 <= head.size() && head[p + 16] == '"') {
      detail::put_hex16(&head[p], detail::body_hash(std::string_view(head).substr(p + 17)));
    }
  }
  return head + body;
}

/// Up to two group names from the head's table (raw, unescaped), for the
/// partial reads.
std::vector<std::string> groups_of(std::string_view file) {
  std::vector<std::string> out;
  const std::string_view head = file.substr(0, file.find('\n'));
  constexpr std::string_view k_tag = "[\"group:";
  for (std::size_t at = head.find(k_tag); at != std::string_view::npos && out.size() < 2;
       at = head.find(k_tag, at + 1)) {
    const std::size_t b = at + k_tag.size();
    const std::size_t e = head.find('"', b);
    if (e == std::string_view::npos) break;
    out.emplace_back(head.substr(b, e - b));
  }
  if (out.empty()) out.emplace_back("console_scripts");
  return out;
}

unsigned touch_index(const Index& index) {
  using fuzz::touch;
  unsigned sum = 0;
  for (std::string_view p : index.search_paths()) sum += touch(p);
  const auto dists = index.distributions();
  for (const Distribution& d : dists) {
    sum += touch(d.name) + touch(d.version) + touch(d.metadata_dir) + touch(d.error);
    fuzz::check(d.search_path < index.search_paths().size(), "a distribution's search path is out of range");
  }
  for (const EntryPoint& ep : index.entry_points()) {
    sum += touch(ep.group) + touch(ep.name) + touch(ep.value);
    fuzz::check(ep.dist != nullptr && ep.dist >= dists.data() && ep.dist < dists.data() + dists.size(),
                "an entry point's distribution is not one of the index's");
  }
  for (std::string_view g : index.groups()) {
    sum += touch(g);
    for (const EntryPoint& ep : index.group(g)) fuzz::check(ep.group == g, "group() returned another group");
  }
  for (std::string_view g : index.loaded_groups()) sum += touch(g);
  for (const WatchedFile& w : watched_files(index)) {
    sum += touch(w.rel_path);
    fuzz::check(w.search_path < index.search_paths().size(), "a watched file's search path is out of range");
  }
  for (const WatchedName& w : watched_names(index)) {
    sum += touch(w.rel_path);
    fuzz::check(w.search_path < index.search_paths().size(), "a watched name's search path is out of range");
  }
  if (const Distribution* e = index.first_error()) sum += touch(e->name) + touch(e->error);
  return sum;
}

/// A complete Index, written and read again, gives the same answer.
void round_trip(const Index& index) {
  detail::WriteOptions wo;
  auto text = detail::serialize_index(index, wo);
  if (!text) return;  // (only for indexes a scan cannot make: a dir outside its path)
  const std::string bytes = text->head + text->body;
  fuzz::MemFile again(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  detail::ReadExpectations expect;
  expect.base_dir = std::string(k_shipped_base);
  auto read = detail::read_index_fd(again.fd(), "fuzz/again.json", expect);
  if (!read) {
    std::fprintf(stderr, "reading back: %s\n", read.error().message.c_str());
    fuzz::fail("an index read from a file does not read back after writing it");
  }
  std::string why;
  if (!same_answer(index, *read, &why)) {
    std::fprintf(stderr, "round trip: %s\n", why.c_str());
    fuzz::fail("an index read from a file reads back differently after writing it");
  }
}

void read_all_ways(const std::string& bytes) {
  fuzz::MemFile file(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  const std::vector<std::string> groups = groups_of(bytes);
  constexpr std::string_view k_name = "fuzz/index.json";
  static const bool verbose = std::getenv("EPLOAD_FUZZ_VERBOSE") != nullptr;
  auto check = [&](const Result<Index>& r) -> const Index* {
    if (verbose) std::fprintf(stderr, "%s\n", r ? "read" : r.error().message.c_str());
    if (!r) {
      fuzz::check(!r.error().message.empty(), "an error without a message");
      fuzz::touch(r.error().message);
      return nullptr;
    }
    touch_index(r.value());
    return &r.value();
  };

  {  // complete: read_index(), `epload index show`
    detail::ReadExpectations e;
    e.base_dir = std::string(k_shipped_base);
    auto r = detail::read_index_fd(file.fd(), k_name, e);
    if (const Index* index = check(r)) {
      fuzz::check(index->complete(), "a complete read gave a partial index");
      round_trip(*index);
    }
  }
  {  // the shipped index (open_shipped()), complete and one group
    for (int partial = 0; partial < 2; ++partial) {
      detail::ReadExpectations e;
      e.search_paths = &k_shipped_paths;
      e.base_dir = std::string(k_shipped_base);
      if (partial) e.groups = {groups[0]};
      check(detail::read_index_fd(file.fd(), k_name, e));
    }
  }
  // open_index()'s partial reads (look_up()): no key here, so that every
  // seed gets past the head; the key itself is compared as a whole.
  for (int how = 0; how < 4; ++how) {
    detail::ReadExpectations e;
    e.base_dir = std::string(k_shipped_base);  // (only a relocatable file uses it)
    e.groups = how == 1 ? std::vector<std::string>{groups.back(), groups[0], "no.such.group"}
                        : std::vector<std::string>{groups[0]};
    e.watched = how >= 2;                 // `full` validation
    e.watched_stamps = how == 3;          // naming the file that changed
    detail::EarlyFullCheck early;
    if (how == 2) e.early_check = &early;
    auto r = detail::read_index_fd(file.fd(), k_name, e);
    if (check(r) != nullptr && how == 2) {
      // As look_up() does: the check (stats relative to the stored search
      // paths) joins the helper the read started.
      std::string why;
      detail::still_valid(r.value(), Validation::full, &why, &early);
    }
    early.abandon();  // before `r` goes: the helper reads its names
  }
  {  // a cache file with a key: must be refused unless the key is the one stored
    detail::CacheKey key;
    key.search_paths = {"/tmp/epload-fuzz-seed/site-packages"};
    detail::ReadExpectations e;
    e.key = &key;
    e.groups = {groups[0]};
    check(detail::read_index_fd(file.fd(), k_name, e));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  read_all_ways(input);
  const std::string repaired = repair(input);
  if (repaired != input) read_all_ways(repaired);
  return 0;
}
