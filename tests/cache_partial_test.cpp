// cache_partial_test.cpp — partial reads of the cache file (one group or a
// few, with or without the watched files or their digest), and corruption
// found where it is read.  The `full` check by digest started early:
// cache_early_check_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>  // sleep_for

#include "cache_format_util.hpp"
#include "cache_internal.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "epload/profile.hpp"
#include "epload/scanner.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "index_builder.hpp"

namespace epload {
namespace {

using test::TempDir;
using test::parse_bytes_with;
using test::reseal;
using test::edit_line;
using test::groups_only;
using test::sample_index;
using test::tiny_index;

// ---- partial reads (CacheOptions::groups) --------------------------------------

/// Checks that `partial` holds exactly `groups` of `whole`: the same entry
/// points in the same order, and exactly their distributions, in discovery
/// order, with every field; plus the global provenance and first error.
void expect_same_groups(const Index& whole, const Index& partial, std::vector<std::string_view> groups) {
  EXPECT_TRUE(whole.complete());
  EXPECT_FALSE(partial.complete());
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  ASSERT_EQ(std::vector<std::string_view>(partial.loaded_groups().begin(), partial.loaded_groups().end()), groups);
  std::vector<const Distribution*> dists;
  std::vector<const EntryPoint*> eps;
  for (std::string_view g : groups) {
    EXPECT_TRUE(partial.has_group(g)) << g;
    for (const EntryPoint& ep : whole.group(g)) {
      eps.push_back(&ep);
      dists.push_back(ep.dist);
    }
  }
  std::sort(dists.begin(), dists.end());
  dists.erase(std::unique(dists.begin(), dists.end()), dists.end());
  ASSERT_EQ(partial.distributions().size(), dists.size());
  for (std::size_t i = 0; i < dists.size(); ++i) {
    const Distribution &x = *dists[i], &y = partial.distributions()[i];
    EXPECT_TRUE(x.name == y.name && x.version == y.version && x.metadata_dir == y.metadata_dir &&
                x.search_path == y.search_path && y.error.empty())
        << "distribution " << i << ": " << x.metadata_dir << " vs " << y.metadata_dir;
  }
  ASSERT_EQ(partial.entry_points().size(), eps.size());
  for (std::size_t i = 0; i < eps.size(); ++i) {
    const EntryPoint &x = *eps[i], &y = partial.entry_points()[i];
    EXPECT_TRUE(x.group == y.group && x.name == y.name && x.value == y.value)
        << "entry point " << i << ": " << x.name << " vs " << y.name;
    EXPECT_EQ(std::find(dists.begin(), dists.end(), x.dist) - dists.begin(), y.dist - partial.distributions().data());
  }
  for (std::string_view g : groups) EXPECT_EQ(partial.group(g).size(), whole.group(g).size()) << g;
  ASSERT_EQ(partial.search_paths().size(), whole.search_paths().size());
  for (std::size_t i = 0; i < whole.search_paths().size(); ++i) {
    EXPECT_EQ(partial.search_paths()[i], whole.search_paths()[i]);
    EXPECT_EQ(search_path_stamps(partial)[i], search_path_stamps(whole)[i]);
  }
  EXPECT_EQ(scanned_at_ns(partial), scanned_at_ns(whole));
  ASSERT_EQ(partial.first_error() != nullptr, whole.first_error() != nullptr);
  if (whole.first_error() != nullptr) {
    const Distribution &x = *whole.first_error(), &y = *partial.first_error();
    EXPECT_TRUE(x.name == y.name && x.version == y.version && x.metadata_dir == y.metadata_dir &&
                x.search_path == y.search_path && x.error == y.error)
        << x.metadata_dir << " vs " << y.metadata_dir;
  }
}

/// Writes sample_index(40) to `t`/i.json and reads it back whole.
Result<Index> written_sample(const TempDir& t) {
  if (!write_index(sample_index(40), t / "i.json")) return Error{Errc::io, "cannot write " + t / "i.json"};
  return read_index(t / "i.json");
}

TEST(CachePartial, GroupReadEqualsThatGroupOfACompleteRead) {
  TempDir t;
  auto whole = written_sample(t);
  ASSERT_TRUE(whole) << whole.error().message;
  const std::vector<std::vector<std::string>> selections = {
      {"console_scripts"},
      {"torch.backends"},
      {"group3"},
      {"a group"},
      {"group3", "console_scripts", "group3"},           // several, repeated, unsorted
      {"group0", "group1", "group2", "group3", "group4", "group5", "group6", "torch.backends"},
      {"no-such-group"},
  };
  for (const auto& sel : selections) {
    auto partial = read_index(t / "i.json", sel);
    ASSERT_TRUE(partial) << partial.error().message;
    SCOPED_TRACE(sel.front());
    expect_same_groups(*whole, *partial, std::vector<std::string_view>(sel.begin(), sel.end()));
    EXPECT_TRUE(watched_files(*partial).empty());
    EXPECT_FALSE(watched_complete(*partial));
  }
  // A group that was not loaded is not "empty": has_group() tells them apart.
  auto one = read_index(t / "i.json", {"torch.backends"});
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->group("console_scripts").empty());
  EXPECT_FALSE(one->has_group("console_scripts"));
  EXPECT_TRUE(one->has_group("torch.backends"));
  auto none = read_index(t / "i.json", {"no-such-group"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->has_group("no-such-group"));
  EXPECT_TRUE(none->distributions().empty());
  EXPECT_TRUE(whole->has_group("console_scripts"));
  EXPECT_TRUE(watched_complete(*whole));
}

// A one-group read keeps its names and values as views into the section's
// buffer, which the Index owns: they outlive the reader, the file and any
// later read, escaped or not (escaped ones are copies).
TEST(CachePartial, GroupReadOwnsItsStringsWhateverHappensToTheFile) {
  TempDir t;
  auto whole = written_sample(t);
  ASSERT_TRUE(whole) << whole.error().message;
  std::vector<Result<Index>> parts;
  for (const char* g : {"console_scripts", "a group", "torch.backends"}) parts.push_back(read_index(t / "i.json", {g}));
  // The file is overwritten with another index, then removed; another read
  // of another file reuses the reader's memory.
  ASSERT_TRUE(write_index(sample_index(7), t / "i.json"));
  ASSERT_TRUE(read_index(t / "i.json", {"console_scripts"}));
  ASSERT_EQ(::unlink((t / "i.json").c_str()), 0);
  std::size_t k = 0;
  for (const char* g : {"console_scripts", "a group", "torch.backends"}) {
    SCOPED_TRACE(g);
    ASSERT_TRUE(parts[k]) << parts[k].error().message;
    expect_same_groups(*whole, *parts[k], {g});
    ++k;
  }
}

TEST(CachePartial, GroupReadReportsTheGlobalFirstError) {
  // importlib raises for the first broken distribution whatever the group
  // asked for, so a one-group read must know it even though that
  // distribution has no entry points in the group (or at all).
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(3), t / "i.json"));
  auto partial = read_index(t / "i.json", {"torch.backends"});
  ASSERT_TRUE(partial) << partial.error().message;
  ASSERT_NE(partial->first_error(), nullptr);
  EXPECT_EQ(partial->first_error()->name, "broken");
  EXPECT_EQ(partial->first_error()->metadata_dir, "broken.egg-info");
  EXPECT_EQ(partial->first_error()->search_path, 2u);
  EXPECT_EQ(partial->first_error()->error, "broken.egg-info/entry_points.txt:3: line without '='");
  for (const Distribution& d : partial->distributions()) EXPECT_NE(d.name, "broken");

  ASSERT_TRUE(write_index(tiny_index(), t / "clean.json"));
  auto no_error = read_index(t / "clean.json", {"g"});
  ASSERT_TRUE(no_error);
  EXPECT_EQ(no_error->first_error(), nullptr);
}

TEST(CachePartial, ReadsTheWatchedFilesOnlyWhenAsked) {
  TempDir t;
  IndexBuilder b;
  b.add_search_path("/tmp/site", test::fake_stamp(1));
  b.add_search_path("/tmp/other", test::fake_stamp(2));
  for (int i = 0; i < 10; ++i) {
    const std::string n = "noise" + std::to_string(i);
    const auto d = b.add_distribution(n, "1", "/tmp/site/" + n + ".dist-info", 0);
    b.add_entry_point(d, "group" + std::to_string(i % 7), "ep", n + ":x");
    b.add_watched_file(0, n + ".dist-info", test::fake_stamp(50 + i));  // the directory: no distribution's
    b.add_watched_file(0, n + ".dist-info/entry_points.txt", test::fake_stamp(100 + i));
    b.add_watched_file(1, n + ".dist-info/entry_points.txt", test::fake_stamp(150 + i));  // another path's
  }
  // Names the reader must decode (escapes, bytes that are not UTF-8) rather
  // than point into its buffer: both kinds must come back exactly.
  b.add_watched_file(0, std::string("odd\"quote\\back\nline-\xff\x01.dist-info/entry_points.txt"), test::fake_stamp(7));
  const Index original = b.build();
  ASSERT_TRUE(write_index(original, t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  auto with_watched = parse_bytes_with(text, groups_only({"group3"}, /*watched=*/true));
  ASSERT_TRUE(with_watched) << with_watched.error().message;
  EXPECT_TRUE(watched_complete(*with_watched));
  // For `full` validation: the names (no stamps), and the digest of the stamps.
  EXPECT_TRUE(watched_files(*with_watched).empty());
  ASSERT_EQ(watched_names(*with_watched).size(), watched_files(original).size());
  ASSERT_NE(watched_digest(*with_watched), nullptr);
  EXPECT_EQ(*watched_digest(*with_watched), detail::digest_of(watched_files(original)));
  for (std::size_t i = 0; i < watched_files(original).size(); ++i) {
    EXPECT_EQ(watched_names(*with_watched)[i].search_path, watched_files(original)[i].search_path);
    EXPECT_EQ(watched_names(*with_watched)[i].rel_path, watched_files(original)[i].rel_path);
  }
  // Asked for the stamps themselves: every stamp, no digest.
  detail::ReadExpectations stamped = groups_only({"group3"}, /*watched=*/true);
  stamped.watched_stamps = true;
  auto with_stamps = parse_bytes_with(text, stamped);
  ASSERT_TRUE(with_stamps) << with_stamps.error().message;
  EXPECT_EQ(watched_digest(*with_stamps), nullptr);
  ASSERT_EQ(watched_files(*with_stamps).size(), watched_files(original).size());
  for (std::size_t i = 0; i < watched_files(original).size(); ++i) {
    EXPECT_EQ(watched_files(*with_stamps)[i].rel_path, watched_files(original)[i].rel_path);
    EXPECT_EQ(watched_files(*with_stamps)[i].stamp, watched_files(original)[i].stamp);
  }
  auto names_only = parse_bytes_with(text, groups_only({"group3"}));
  ASSERT_TRUE(names_only) << names_only.error().message;
  EXPECT_TRUE(watched_files(*names_only).empty());
  EXPECT_FALSE(watched_complete(*names_only));

  // still_valid() refuses to vouch for `full` without the watched list.
  std::string why;
  EXPECT_FALSE(still_valid(*names_only, Validation::full, &why));
  EXPECT_NE(why.find("without its watched files"), std::string::npos) << why;
}

TEST(Cache, ReadRejectsABadWatchDigest) {
  TempDir t;
  ASSERT_TRUE(write_index(tiny_index(), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  detail::ReadExpectations full;
  full.groups = {"g"};
  full.watched = true;
  // Malformed digests and file lists: every read that parses the section fails.
  const std::pair<std::string, std::string> malformed[] = {
      {"{\"digest\":\"", "{\"digest\":\"zz"},                 // not hex
      {"{\"digest\":\"", "{\"digest\":\"0"},                  // 33 digits
      {"\",\"files\":[[", "\",\"other\":[["},                   // unknown field
      {"\",\"files\":[[0,", "\",\"files\":[[9,"},               // search path out of range
      {"\",\"files\":[[0,", "\",\"files\":[[0],[0,"},           // an empty run
  };
  const std::string expected[] = {"32 hex digits", "32 hex digits", "unexpected field", "out of range",
                                  "empty watched run"};
  for (std::size_t i = 0; i < std::size(malformed); ++i) {
    reseal(t / "bad.json", edit_line(good, 5, malformed[i].first, malformed[i].second));
    const std::string text = test::read_file(t / "bad.json");
    auto partial = parse_bytes_with(text, full);
    ASSERT_FALSE(partial) << malformed[i].second;
    EXPECT_EQ(partial.error().code, Errc::cache);
    EXPECT_NE(partial.error().message.find("section \"watch_digest\""), std::string::npos)
        << partial.error().message;
    EXPECT_NE(partial.error().message.find(expected[i]), std::string::npos) << partial.error().message;
    EXPECT_FALSE(read_index(t / "bad.json")) << "a complete read parses it too";
  }
  // A well-formed digest that is not the stamps': a complete read (which has
  // both) refuses it; a `full` read cannot know, and validation then fails.
  const std::size_t at = good.find("{\"digest\":\"", good.rfind('\n', good.size() - 2)) + 11;
  std::string wrong = good;
  wrong[at] = wrong[at] == '0' ? '1' : '0';
  reseal(t / "bad.json", wrong);
  auto complete = read_index(t / "bad.json");
  ASSERT_FALSE(complete);
  EXPECT_NE(complete.error().message.find("disagrees with the stamps"), std::string::npos)
      << complete.error().message;
  auto partial = parse_bytes_with(test::read_file(t / "bad.json"), full);
  ASSERT_TRUE(partial) << partial.error().message;
  ASSERT_NE(watched_digest(*partial), nullptr);
  std::string why;
  EXPECT_FALSE(still_valid(*partial, Validation::full, &why));
}

TEST(CachePartial, MalformedGroupRowsAreRejectedByEveryRead) {
  IndexBuilder b;
  const auto sp = b.add_search_path("/s", test::fake_stamp(1));
  const auto d = b.add_distribution("n", "1", "/s/n.dist-info", sp);
  b.add_entry_point(d, "g", "e", "v");
  b.add_entry_point(d, "h", "f", "w");
  TempDir t;
  ASSERT_TRUE(write_index(b.build(), t / "good.json"));
  const std::string good = test::read_file(t / "good.json");
  const int line = 1;  // group:g
  ASSERT_EQ(good.find("\"group:g\""), good.find("\"group:"));
  // Each edit of group:g's rows, and what the message says.
  struct Edit {
    std::string from, to, says;
  };
  const Edit edits[] = {
      {"[[0,\"n\"", "[[5,\"n\"", "group distribution number 5 is out of range"},
      {",0]],\"entry", "]],\"entry", "group distribution has 4 fields, not 5"},
      {",0]],\"entry", ",0,0]],\"entry", "group distribution has more than 5 fields"},
      {",0]],\"entry", ",9]],\"entry", "distribution search path 9 is out of range"},
      {"[[0,\"e\"", "[[1,\"e\"", "entry point distribution 1 is out of range"},
      {"\"e\",\"v\"]", "\"e\"]", "entry point has 2 fields, not 3"},
      {"[[0,\"e\"", "[[0,7", "entry point name"},
  };
  const detail::ReadExpectations reads[] = {detail::ReadExpectations{},  // complete
                                            groups_only({"g"}),          // one group: direct
                                            groups_only({"g", "h"})};    // several: collected
  for (const Edit& edit : edits) {
    reseal(t / "bad.json", edit_line(good, line, edit.from, edit.to));
    const std::string text = test::read_file(t / "bad.json");
    for (const auto& read : reads) {
      auto r = parse_bytes_with(text, read);
      ASSERT_FALSE(r) << edit.to << " (" << read.groups.size() << " groups)";
      EXPECT_EQ(r.error().code, Errc::cache);
      EXPECT_NE(r.error().message.find("section \"group:g\""), std::string::npos) << r.error().message;
      EXPECT_NE(r.error().message.find(edit.says), std::string::npos) << r.error().message;
    }
    EXPECT_TRUE(parse_bytes_with(text, groups_only({"h"}))) << "a read of another group does not parse it";
  }
}

TEST(CachePartial, CorruptSectionIsFoundWhenItIsRead) {
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(10), t / "i.json"));
  const std::string good = test::read_file(t / "i.json");
  // Flip one byte of a value "noiseN:x", which only a groupK section holds.
  std::string bad = good;
  const std::size_t at = good.find(":x\"", good.find('\n'));
  ASSERT_NE(at, std::string::npos);
  bad[at + 1] = 'y';
  // Find the group whose read now fails; every other group still reads.
  int failed = 0;
  for (int k = 0; k < 7; ++k) {
    const std::string g = "group" + std::to_string(k);
    auto r = parse_bytes_with(bad, groups_only({g}));
    if (!r) {
      ++failed;
      EXPECT_EQ(r.error().code, Errc::cache);
      EXPECT_NE(r.error().message.find("section \"group:" + g + "\": hash mismatch"), std::string::npos)
          << r.error().message;
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_TRUE(parse_bytes_with(bad, groups_only({"console_scripts"})));
  EXPECT_FALSE(parse_bytes_with(bad, detail::ReadExpectations{})) << "a complete read reads every section";

  // The same for the watched sections: only reads that need one see it.
  std::string bad_digest = good;
  bad_digest[good.size() - 3] ^= 1;  // inside the last line ("watch_digest")
  EXPECT_TRUE(parse_bytes_with(bad_digest, groups_only({"console_scripts"})));
  auto full = parse_bytes_with(bad_digest, groups_only({"console_scripts"}, /*watched=*/true));
  ASSERT_FALSE(full);
  EXPECT_NE(full.error().message.find("section \"watch_digest\""), std::string::npos) << full.error().message;
  const std::size_t last_line = good.rfind('\n', good.size() - 2);
  std::string bad_watched = good;
  bad_watched[last_line - 3] ^= 1;  // inside the line before ("watched", the stamps)
  auto by_digest = parse_bytes_with(bad_watched, groups_only({"console_scripts"}, /*watched=*/true));
  EXPECT_TRUE(by_digest) << "`full` validation reads the digest, not the stamps";
  detail::ReadExpectations stamped = groups_only({"console_scripts"}, /*watched=*/true);
  stamped.watched_stamps = true;
  auto with_stamps = parse_bytes_with(bad_watched, stamped);
  ASSERT_FALSE(with_stamps);
  EXPECT_NE(with_stamps.error().message.find("section \"watched\""), std::string::npos)
      << with_stamps.error().message;
}

TEST(CachePartial, CorruptOrTruncatedHeadIsRejected) {
  TempDir t;
  ASSERT_TRUE(write_index(sample_index(10), t / "i.json"));
  const std::string good = test::read_file(t / "i.json");
  const std::size_t head_end = good.find('\n') + 1;
  for (std::size_t n = 0; n < good.size(); n += (n < head_end + 64 ? 1 : 97)) {
    auto r = parse_bytes_with(good.substr(0, n), groups_only({"torch.backends"}));
    ASSERT_FALSE(r) << "truncated at " << n << " of " << good.size();
    EXPECT_EQ(r.error().code, Errc::cache);
  }
  for (unsigned seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(seed);
    std::string bad = good;
    bad[rng() % head_end] ^= static_cast<char>(1 + rng() % 255);
    auto r = parse_bytes_with(bad, groups_only({"torch.backends"}));
    ASSERT_FALSE(r) << "seed " << seed;
    EXPECT_EQ(r.error().code, Errc::cache);
  }
}

// A mapped read (ReadExpectations::map_file, what the CLI does) parses a
// section in place only when simdjson's padding after it still lies in the
// mapping, whose length is the file's in whole pages; a file that ends less
// than the padding before a page boundary has its last section read into a
// buffer.  Files ending at every byte around a page boundary, read every
// way, give the copied read's answer (parse_bytes_with compares them), and
// the mapped read makes no read() call but for such a tail.
TEST(CachePartial, MappedReadsAgreeWithCopiedOnesWhereverTheFileEnds) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto text_with = [](std::size_t n) {
    IndexBuilder b;
    b.add_search_path("/tmp/site", test::fake_stamp(1));
    const std::uint32_t d = b.add_distribution("alpha", "1.0", "/tmp/site/alpha-1.0.dist-info", 0);
    b.add_entry_point(d, "g", "e", "m:" + std::string(n, 'v'));  // one byte of the file per n
    b.add_entry_point(d, "other", "o", "m:o");
    b.add_watched_file(0, "alpha-1.0.dist-info/entry_points.txt", test::fake_stamp(2));
    b.set_scanned_at(1700000000999999999LL);
    TempDir t;
    if (!write_index(b.build(), t / "i.json")) std::abort();
    return test::read_file(t / "i.json");
  };
  // From ~100 bytes before the second page boundary to past it.
  const std::size_t n0 = 2 * page - 100 - text_with(0).size();
  std::size_t tails = 0, in_place = 0;
  for (std::size_t n = n0; n < n0 + 120; ++n) {
    const std::string text = text_with(n);
    SCOPED_TRACE("file size " + std::to_string(text.size()));
    const std::size_t room = (text.size() + page - 1) / page * page - text.size();  // zeros after the end
    for (const detail::ReadExpectations& e : {detail::ReadExpectations{}, groups_only({"g"}), groups_only({"g"}, true),
                                              groups_only({"other"}, true)}) {
      ASSERT_TRUE(parse_bytes_with(text, e));
      profile::enable();
      const std::uint64_t reads = profile::counter(profile::Counter::read);
      detail::ReadExpectations mapped = e;
      mapped.map_file = true;
      const int fd = ::memfd_create("epload-cache-test", MFD_CLOEXEC);
      ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
      ASSERT_TRUE(detail::read_index_fd(fd, "memfd", mapped));
      ::close(fd);
      const std::uint64_t made = profile::counter(profile::Counter::read) - reads;
      profile::reset();
      // The last section (the names) is read by a complete read, and by
      // a read of the names.
      const bool reads_last = e.groups.empty() || e.watched;
      EXPECT_EQ(made != 0, reads_last && room < detail::k_json_padding) << "room " << room;
      (made != 0 ? tails : in_place) += 1;
    }
  }
  EXPECT_GT(tails, 0u);
  EXPECT_GT(in_place, 0u);
}

TEST(CachePartial, LongHeadIsReadWhole) {
  // A head longer than the first read (many groups): read in more chunks.
  IndexBuilder b;
  const auto sp = b.add_search_path("/s", FileStamp{});
  for (int i = 0; i < 3000; ++i) {
    const auto d = b.add_distribution("d" + std::to_string(i), "1", "/s/d" + std::to_string(i) + ".dist-info", sp);
    b.add_entry_point(d, "plugins.of.package" + std::to_string(i), "x", "m:x");
    if (i % 3 == 0) b.add_entry_point(d, "torch.backends", "b" + std::to_string(i), "m:b");
  }
  const Index original = b.build();
  TempDir t;
  ASSERT_TRUE(write_index(original, t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  ASSERT_GT(text.find('\n'), 4 * 32768u) << "the head must exceed several first chunks";
  auto whole = read_index(t / "i.json");
  ASSERT_TRUE(whole) << whole.error().message;
  for (const auto& sel : {std::vector<std::string>{"torch.backends"}, std::vector<std::string>{"plugins.of.package2999"},
                          std::vector<std::string>{"plugins.of.package0", "torch.backends"}}) {
    auto partial = read_index(t / "i.json", sel);
    ASSERT_TRUE(partial) << partial.error().message;
    expect_same_groups(*whole, *partial, std::vector<std::string_view>(sel.begin(), sel.end()));
  }
}

TEST(CachePartial, VersionOneFileIsRejected) {
  // What version 1 wrote (one document over many lines): never trusted,
  // whatever is asked of it.
  const std::string v1 =
      "{\"format\":\"epload-index\",\"version\":1,\"checksum\":\"0123456789abcdef\",\n"
      "\"key\":{\"interpreter\":\"\",\"cwd\":\"\"},\n\"relocatable\":false,\n\"scanned_at_ns\":1,\n"
      "\"search_paths\":[\n{\"path\":\"/s\",\"stamp\":[1,2,3,4,5,16877]}],\n"
      "\"dists\":[\n[\"n\",\"1\",\"n.dist-info\",0,\"\"]],\n\"entry_points\":[\n[0,\"g\",\"e\",\"v\"]],\n"
      "\"watched\":[]}\n";
  for (const auto& expect : {detail::ReadExpectations{}, groups_only({"g"})}) {
    auto r = parse_bytes_with(v1, expect);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("format version 1, this build reads 7"), std::string::npos)
        << r.error().message;
  }
}

}  // namespace
}  // namespace epload

