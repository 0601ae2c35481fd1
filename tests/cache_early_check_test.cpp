// cache_early_check_test.cpp — `full` validation by digest with its check
// started early (ReadExpectations::early_check): the reader starts the stat
// calls on the other CPU as soon as the watched names are read, and
// still_valid() joins them.  Real trees, real files, real threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>  // sleep_for

#include "cache_format_util.hpp"
#include "cache_internal.hpp"
#include "cache_test_util.hpp"
#include "epload/cache.hpp"
#include "index_hooks.hpp"
#include "stamp.hpp"
#include "watch_digest.hpp"
#include "index_builder.hpp"

namespace epload {
namespace {

using test::TempDir;
using test::edit_line;
using test::groups_only;
using test::parse_bytes_with;
using test::reseal;
using Hooks = detail::IndexBuilderHooks;

/// `count` real dist-info directories under `site`, each with an
/// entry_points.txt holding "[g]\ne = m:f\n".
void write_watched_tree(const std::string& site, int count) {
  for (int i = 0; i < count; ++i) {
    test::write_file(site + "/d" + std::to_string(i) + ".dist-info/entry_points.txt", "[g]\ne = m:f\n");
  }
}

/// An index watching that tree's entry_points.txt files with their current
/// stamps, scanned an hour ahead so that no stamp is racy; with
/// `with_entry_points`, also each distribution and its entry point g/e.
Index watched_tree_index(const std::string& site, int count, bool with_entry_points) {
  IndexBuilder b;
  b.add_search_path(site, detail::stamp_at(AT_FDCWD, site.c_str()));
  for (int i = 0; i < count; ++i) {
    const std::string dir = "d" + std::to_string(i) + ".dist-info";
    if (with_entry_points) {
      const auto d = b.add_distribution("d" + std::to_string(i), "1", site + "/" + dir, 0);
      b.add_entry_point(d, "g", "e", "m:f");
    }
    b.add_watched_file(0, dir + "/entry_points.txt",
                       detail::stamp_at(AT_FDCWD, (site + "/" + dir + "/entry_points.txt").c_str()));
  }
  b.set_scanned_at(detail::coarse_now_ns() + 3600 * 1000000000LL);
  return b.build();
}

/// Reads group g of `text` for `full` validation, the check started in
/// `early`; copied, or through a mapping of the file (`map`).
Result<Index> read_with_early_check(const std::string& text, detail::EarlyFullCheck& early, bool map = false) {
  detail::ReadExpectations e = groups_only({"g"}, /*watched=*/true);
  e.early_check = &early;
  e.map_file = map;
  return parse_bytes_with(text, e);
}

/// Reads `text` (k_files names) with an early check, copied or mapped, and
/// expects still_valid() to join it with answer `valid` ("digest" in the
/// reason when not).
void expect_early_check_answer_read(const std::string& text, std::size_t k_files, bool valid, int changed, bool map) {
  SCOPED_TRACE(map ? "mapped" : "copied");
  detail::EarlyFullCheck early;
  auto r = read_with_early_check(text, early, map);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->group("g").size(), k_files);
  EXPECT_EQ(watched_names(*r).size(), k_files);
  EXPECT_EQ(early.running(), test::two_cpus_allowed()) << "started while the rest was read";
  std::string why;
  EXPECT_EQ(detail::still_valid(*r, Validation::full, &why, &early), valid) << changed << ": " << why;
  if (!valid) {
    EXPECT_NE(why.find("digest"), std::string::npos) << why;
  }
  EXPECT_FALSE(early.running());
}

/// expect_early_check_answer_read() both ways.
void expect_early_check_answer(const std::string& text, std::size_t k_files, bool valid, int changed = -1) {
  for (const bool map : {false, true}) expect_early_check_answer_read(text, k_files, valid, changed, map);
}

/// Rewrites file `i` of write_watched_tree()'s tree: a new ctime, a changed stamp.
void change_watched_file(const std::string& site, int i) {
  test::write_file(site + "/d" + std::to_string(i) + ".dist-info/entry_points.txt", "[g]\ne = m:changed\n");
}

TEST(CachePartial, DigestValidationFindsAChangeInEitherThreadsShare) {
  // Above 500 watched files two threads fold the fresh stamps into the
  // digest; a change anywhere must make the digest differ.
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 2000;
  write_watched_tree(site, k_files);
  auto build = [&] { return watched_tree_index(site, k_files, /*with_entry_points=*/false); };
  auto by_digest = [&](const Index& index) -> Index {
    EXPECT_TRUE(write_index(index, t / "i.json"));
    auto r = parse_bytes_with(test::read_file(t / "i.json"), groups_only({"g"}, /*watched=*/true));
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return Index();
    }
    EXPECT_NE(watched_digest(*r), nullptr);
    EXPECT_EQ(watched_names(*r).size(), static_cast<std::size_t>(k_files));
    return std::move(r.value());
  };
  std::string why;
  {
    const Index unchanged = by_digest(build());
    EXPECT_TRUE(still_valid(unchanged, Validation::full, &why)) << why;
  }
  for (int changed : {3, 1000, 1999}) {
    const Index before = by_digest(build());
    test::write_file(site + "/d" + std::to_string(changed) + ".dist-info/entry_points.txt", "[g]\ne = m:g\n");
    EXPECT_FALSE(still_valid(before, Validation::full, &why)) << changed;
    EXPECT_NE(why.find("digest"), std::string::npos) << why;
    EXPECT_TRUE(still_valid(before, Validation::paths)) << "paths validation does not look inside";
  }
}

TEST(CachePartial, EarlyCheckStartsWithTheNamesAndStillValidJoinsIt) {
  // The reader starts the `full` check as soon as it has the watched names
  // (ReadExpectations::early_check), before it parses the groups; still_valid
  // joins it.  Its answer must be the same as a check started afterwards, and
  // a read that fails after the start must stop it (sanitizer builds would
  // see a thread left reading the freed names).
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 1500;
  write_watched_tree(site, k_files);
  auto build = [&] { return watched_tree_index(site, k_files, /*with_entry_points=*/true); };
  ASSERT_TRUE(write_index(build(), t / "i.json"));
  std::string text = test::read_file(t / "i.json");
  expect_early_check_answer(text, k_files, /*valid=*/true);
  // A change in the first or the last file: found by the early check too.
  for (int changed : {0, k_files - 1}) {
    change_watched_file(site, changed);
    expect_early_check_answer(text, k_files, /*valid=*/false, changed);
    ASSERT_TRUE(write_index(build(), t / "i.json"));  // the new stamps, for the next round
    text = test::read_file(t / "i.json");
  }
  // A group section that fails its hash after the check started: the read
  // fails and the check is stopped.
  const std::size_t value = text.find("\"m:f\"", text.find("\n"));
  ASSERT_NE(value, std::string::npos);
  text[value + 3] = 'x';
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(text, early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("section \"group:g\": hash mismatch"), std::string::npos) << r.error().message;
    EXPECT_FALSE(early.running());
  }
}

TEST(CachePartial, EarlyCheckWaitsForASlowReader) {
  // The reader may take long to hand names over (a slow file system under
  // it): the prepared helper spins, then yields, then sleeps between looks,
  // and must still check every name published, in chunks with pauses
  // between, with the full check's answer.
  TempDir t;
  const std::string site = t / "site";
  constexpr std::size_t k_files = 1200;
  write_watched_tree(site, static_cast<int>(k_files));
  std::vector<std::string> names;
  WatchedDigest digest;
  for (std::size_t i = 0; i < k_files; ++i) {
    names.push_back("d" + std::to_string(i) + ".dist-info/entry_points.txt");
    detail::digest_add(digest, i, detail::stamp_at(AT_FDCWD, (site + "/" + names.back()).c_str()));
  }
  auto check = [&](bool want_valid) {
    IndexBuilder b;
    const auto sp = b.add_search_path(site, detail::stamp_at(AT_FDCWD, site.c_str()));
    b.set_scanned_at(detail::coarse_now_ns() + 3600 * 1000000000LL);  // no stamp is racy
    b.reserve(0, 0, 0, k_files);
    const Index& so_far = Hooks::in_progress(b);
    detail::EarlyFullCheck early;
    early.prepare();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past its spinning and yielding
    early.start({watched_names(so_far).data(), k_files}, so_far.search_paths(), scanned_at_ns(so_far),
                /*ready=*/0);
    EXPECT_EQ(early.running(), test::two_cpus_allowed());
    for (std::size_t i = 0; i < k_files; ++i) {
      Hooks::add_watched_name(b, sp, names[i]);
      if ((i + 1) % 100 == 0) {
        early.publish(i + 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    early.publish(k_files);
    Hooks::set_watched_digest(b, digest);
    Hooks::set_watched_complete(b, true);
    const Index index = b.build();
    std::string why;
    EXPECT_EQ(detail::still_valid(index, Validation::full, &why, &early), want_valid) << why;
    EXPECT_FALSE(early.running());
  };
  check(/*want_valid=*/true);
  change_watched_file(site, 1150);  // in the last chunk
  check(/*want_valid=*/false);
}

TEST(CachePartial, EarlyCheckPreparedAheadWaitsForTheNamesAndStopsWhenTheirParseFails) {
  // A file big enough (over 128 KB) has the check's helper created before
  // the head is parsed; it then stats each chunk of names as soon as the
  // reader has written it (EarlyFullCheck::publish).  Its answer must be
  // the full check's, and a read that fails while the helper waits for
  // names must stop it (a hang here, or a sanitizer report of a thread
  // reading freed names, is the failure).
  TempDir t;
  const std::string site = t / "site";
  constexpr int k_files = 3000;
  write_watched_tree(site, k_files);
  ASSERT_TRUE(write_index(watched_tree_index(site, k_files, /*with_entry_points=*/true), t / "i.json"));
  const std::string text = test::read_file(t / "i.json");
  ASSERT_GT(text.size(), 128u * 1024) << "too small for the helper to be prepared ahead";
  expect_early_check_answer(text, k_files, /*valid=*/true);
  // A change in a file in the middle of the names, then in the last one.
  for (int changed : {k_files / 2, k_files - 1}) {
    change_watched_file(site, changed);
    expect_early_check_answer(text, k_files, /*valid=*/false, changed);
  }
  // The last line is "watch_digest".  A name in its middle that is not a
  // string (re-sealed, so the hashes hold): the parse fails after the helper
  // was started and while it waits for the rest of the names.
  const int digest_line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) - 1;
  const std::string middle = "\"d" + std::to_string(k_files / 2) + ".dist-info/entry_points.txt\"";
  reseal(t / "bad.json", edit_line(text, digest_line, middle, "17"));
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(test::read_file(t / "bad.json"), early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("watched file path"), std::string::npos) << r.error().message;
    EXPECT_FALSE(early.running());
  }
  // More names than the head announces: refused before the one too many is
  // written where the helper reads (the room for the names is exactly the
  // head's count).
  reseal(t / "bad.json", text, "for r in rows:\n  r[4] = r[4] - 1 if r[0] in (\"watched\", \"watch_digest\") else r[4]");
  for (const bool map : {false, true}) {
    detail::EarlyFullCheck early;
    auto r = read_with_early_check(test::read_file(t / "bad.json"), early, map);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("more watched files than the head says"), std::string::npos)
        << r.error().message;
    EXPECT_FALSE(early.running());
  }
}

}  // namespace
}  // namespace epload
