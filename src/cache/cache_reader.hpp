// cache_reader.hpp — the reader of an index file, shared by its two
// translation units: cache_read_head.cpp (JSON values and the head) and
// cache.cpp (the sections, the complete and partial loads).  Only these two
// include simdjson (its header costs ~2.5 s of CPU per translation unit).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <deque>
#include <functional>  // std::less_equal: pointer comparison across buffers
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache_internal.hpp"
#include "cache_sections.hpp"
#include "index_hooks.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "index_builder.hpp"

namespace epload::detail {

namespace od = simdjson::ondemand;
using Hooks = IndexBuilderHooks;  // the reader's access to IndexBuilder (index_hooks.hpp)

static_assert(k_pad == simdjson::SIMDJSON_PADDING);

/// A distribution row of a group section; views into a live buffer (or into
/// Reader::m_owned for strings that had escapes).
struct GroupDist {
  std::uint32_t global = 0;
  std::string_view name, version, dir;
  std::uint32_t path = 0;
};

struct GroupEntry {
  std::uint32_t dist = 0;  // position in the section's dists
  std::string_view name, value;
};

/// One parsed group section.
struct GroupData {
  const Section* section = nullptr;
  std::vector<GroupDist> dists;
  std::vector<GroupEntry> eps;
};

/// A field of a row read by Reader::fields(): a string (decoded into
/// `scratch` when it has escapes and is not kept), or a number below `bound`
/// (a position in something read before).
struct Field {
  std::string_view what;  // names the field in messages
  std::string_view* text = nullptr;
  std::string* scratch = nullptr;
  std::uint32_t* number = nullptr;
  std::uint64_t bound = 0;
};
inline Field text_field(std::string_view what, std::string_view& out, std::string& scratch) {
  return {what, &out, &scratch};
}
inline Field number_field(std::string_view what, std::uint64_t bound, std::uint32_t& out) {
  return {what, nullptr, nullptr, &out, bound};
}

/// What Reader::group() does with a group section's rows.
enum class GroupMode {
  complete,  // entry points into the builder, whose distributions are all of them
  direct,    // distributions and entry points into the builder (a one-group read)
  collect,   // into GroupData, merged afterwards (a several-group read)
};

/// Reads one index file; the first problem wins.
class Reader {
 public:
  /// `fd` is open on a regular file of `size` (> 0) bytes.
  Reader(int fd, std::uint64_t size, std::string_view file, const ReadExpectations& expect)
      : m_file(file), m_expect(expect), m_partial(!expect.groups.empty()), m_bytes(fd, size, m_problem) {}
  // A check started on names this reader holds must not outlive them: on
  // success they move into the Index (built in run()), else it is stopped.
  ~Reader() {
    if (m_expect.early_check != nullptr && !m_built) m_expect.early_check->abandon();
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Result<Index> run();

 private:
  bool fail(std::string what) { return m_problem.fail(std::move(what)); }
  /// The problem found, as the read's error.
  Error problem() const;
  bool fail(simdjson::error_code e, std::string_view where) {
    return fail("malformed " + std::string(where) + " (" + simdjson::error_message(e) + ")");
  }

  // ---- documents (cache.cpp) ----
  /// True when `v` lies in the bytes of the document being parsed.
  bool in_document(std::string_view v) const {
    return v.empty() || (std::less_equal<const char*>()(m_json.data(), v.data()) &&
                         std::less_equal<const char*>()(v.data() + v.size(), m_json.data() + m_json.size()));
  }
  template <class F>
  bool parse_doc(const char* data, std::size_t length, std::size_t capacity, F&& on_root);
  template <class F>
  bool parse_section(const Section& s, F&& on_root);
  void keep_buffer_of(const Section& s);

  // ---- values (cache_read_head.cpp) ----
  bool raw_string(od::raw_json_string raw, std::string_view where, std::string& scratch, std::string_view& out);
  bool string(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  bool bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  bool hex_bytes(od::value v, std::string_view where, std::string& scratch, std::string_view& out);
  /// bytes(), kept alive until the Index is built (escaped strings are copied).
  bool kept_bytes(od::value v, std::string_view where, std::string_view& out);
  /// kept_bytes() when `keep`, else bytes() into `scratch`.
  bool bytes_or_kept(bool keep, od::value v, std::string_view where, std::string& scratch, std::string_view& out) {
    return keep ? kept_bytes(v, where, out) : bytes(v, where, scratch, out);
  }
  bool u64(od::value v, std::string_view where, std::uint64_t& out);
  bool i64(od::value v, std::string_view where, std::int64_t& out);
  bool index(od::value v, std::string_view where, std::uint64_t limit, std::uint32_t& out);
  bool stamp_field(od::value v, std::size_t k, std::string_view where, FileStamp& s);
  /// An array of exactly `count` values, each handed to field(k, value);
  /// `what` names the row in messages.
  template <class V, class F>
  bool row(V&& v, std::string_view what, std::size_t count, F&& field);
  /// Each element of the array `v` handed to item(value); `what` names
  /// the array in messages.
  template <class V, class F>
  bool each(V&& v, std::string_view what, F&& item);
  bool join_dir(std::uint32_t path, std::string_view dir, std::string_view& out);

  // ---- the head (cache_read_head.cpp) ----
  bool head(od::document& doc);
  bool head_field(std::size_t k, od::value v);
  bool checksum(od::value v);
  bool key(od::value v);
  bool search_paths(od::value v);
  bool search_path(od::value v);
  bool add_search_path(std::string_view stored, const FileStamp& stamp);
  bool first_error(od::value v);
  bool sections(od::value v);
  bool section_row(od::value v);
  bool check_layout();

  // ---- sections (cache.cpp) ----
  /// An element of an array as the array's iteration gives it.
  using Element = simdjson::simdjson_result<od::value>;
  /// A row of `fields`, in order.  Its strings are kept until the Index is
  /// built when `keep`, else valid until their scratch strings are reused.
  bool fields(Element v, std::string_view what, bool keep, std::span<const Field> fields);
  bool dists(od::document& doc);
  bool group(od::document& doc, GroupData& out, GroupMode mode);
  bool group_dist(Element v, GroupData& out, GroupMode mode, std::size_t rows, std::uint32_t& last);
  bool group_entry(Element v, GroupData& out, GroupMode mode, std::size_t dist_rows);
  bool watched(od::document& doc, std::size_t count);
  bool watched_file(od::value v);
  bool listings(od::document& doc, std::size_t count);
  template <class OnPath, class OnName>
  bool path_run(od::value v, const char* what, const char* path_what, const char* name_what, OnPath&& on_path,
                OnName&& on_name);
  bool listing_run(od::value v, std::size_t& n, std::size_t count, std::uint32_t& last);
  bool watch_digest(od::document& doc, std::size_t count, bool add);
  bool watch_run(od::value v, std::size_t& n, std::size_t count, bool add);
  bool load_complete();
  bool load_partial();
  bool names_first(std::size_t names_total, std::vector<const Section*>& needed);
  bool load_groups(const std::vector<const Section*>& needed, std::vector<GroupData>& groups);
  bool merge_groups(const std::vector<GroupData>& groups);
  bool load_stamps(const std::vector<const Section*>& needed);
  void finish_partial(const std::vector<std::string_view>& wanted, std::size_t names_total,
                      const std::vector<GroupData>& groups);
  const Section* find(Kind kind, std::string_view group) const;

  bool m_built = false;  // the Index was built (and owns the watched names)
  std::string_view m_file;
  const ReadExpectations& m_expect;
  const bool m_partial;
  ReadProblem m_problem;
  FileBytes m_bytes;            // declared after m_problem, which it reports to
  std::string_view m_json;      // the document being parsed
  od::parser m_parser;
  IndexBuilder m_builder;
  bool m_relocatable = false;
  std::string m_interpreter, m_cwd;
  std::vector<std::string> m_paths;  // as they go into the Index
  std::vector<Section> m_sections;
  Layout m_layout;
  // Set while the names of an early check are parsed: each chunk of names
  // added is published to its helper as soon as it is written.
  EarlyFullCheck* m_publish_to = nullptr;
  WatchedDigest m_stamped_digest;  // of the stamped rows read ("watched")
  std::size_t m_stamped_rows = 0;
  // The head's first_error.
  bool m_has_error = false;
  std::uint64_t m_error_dist = 0;
  std::string m_error_name, m_error_version, m_error_dir, m_error_message;
  std::uint32_t m_error_path = 0;
  std::uint64_t m_first_error_seen = std::numeric_limits<std::uint64_t>::max();  // from "dists"
  std::uint64_t m_dist_count = 0;
  std::string m_s1, m_s2, m_s3, m_s4;  // scratch for decoded strings
  std::string m_join;                  // scratch: search path + dir
  std::vector<std::uint32_t> m_numbers;  // scratch: a group section's distribution numbers
  std::deque<std::string> m_owned;     // decoded strings that views must outlive
};

// ---- templates used by both translation units ---------------------------

template <class V, class F>
bool Reader::row(V&& v, std::string_view what, std::size_t count, F&& field) {
  od::array arr;
  if (auto e = std::forward<V>(v).get_array().get(arr)) return fail(e, what);
  std::size_t k = 0;
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, what);
    if (k == count) return fail(std::string(what) + " has more than " + std::to_string(count) + " fields");
    if (!field(k, xv)) return false;
    ++k;
  }
  if (k != count) {
    return fail(std::string(what) + " has " + std::to_string(k) + " fields, not " + std::to_string(count));
  }
  return true;
}

template <class V, class F>
bool Reader::each(V&& v, std::string_view what, F&& item) {
  od::array arr;
  if (auto e = std::forward<V>(v).get_array().get(arr)) return fail(e, what);
  for (auto x : arr) {
    od::value xv;
    if (auto e = x.get(xv)) return fail(e, what);
    if (!item(xv)) return false;
  }
  return true;
}

}  // namespace epload::detail
