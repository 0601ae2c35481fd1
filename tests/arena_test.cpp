// arena_test.cpp — the Arena: strings kept byte for byte where they were
// put, however many blocks they take, and a block backed in one call once
// it is used past its first page.
#include "arena.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace epload::detail {
namespace {

TEST(Arena, KeepsEveryStringWhereItWasPut) {
  Arena arena;
  std::mt19937 rng(3);
  std::vector<std::string> want;
  std::vector<std::string_view> got;
  // Short strings across many blocks, oversized ones (their own block)
  // among them, and empty ones.
  for (int i = 0; i < 5000; ++i) {
    const std::size_t n = i % 97 == 0 ? 20000 + rng() % 50000 : rng() % 120;
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    want.push_back(s);
    got.push_back(arena.copy(s));
  }
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

#ifdef MADV_POPULATE_WRITE
/// {resident, whole pages} of [p, p + len).
std::pair<int, int> resident_pages(const char* p, std::size_t len) {
  const auto first = (reinterpret_cast<std::uintptr_t>(p) + 4095) & ~std::uintptr_t{4095};
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~std::uintptr_t{4095};
  std::vector<unsigned char> vec((end - first) / 4096);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(first), end - first, vec.data()), 0);
  int count = 0;
  for (unsigned char v : vec) count += v & 1;
  return {count, static_cast<int>(vec.size())};
}

TEST(Arena, BacksABlockOnceItIsUsedPastItsFirstPage) {
  char probe[2 * 4096];
  void* page = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(probe) + 4095) &
                                       ~std::uintptr_t{4095});
  if (::madvise(page, 4096, MADV_POPULATE_WRITE) != 0)
    GTEST_SKIP() << "kernel before 5.14: prefault() is a no-op";
  constexpr std::size_t k_block = 64 * 1024;
  constexpr std::size_t k_first_part = 4096;
  // Blocks at several offsets into a page: each arena (and its block) is
  // kept, so the next block comes after it and a pad.  (Run alone, glibc's
  // allocator puts the five anywhere from 80 to 3088 bytes into a page;
  // AddressSanitizer's puts them all at one offset.)
  std::vector<std::unique_ptr<char[]>> pads;
  std::deque<Arena> arenas;
  for (const std::size_t pad : {0, 1000, 2000, 3000, 4000}) {
    if (pad) pads.emplace_back(new char[pad]);
    SCOPED_TRACE("after a pad of " + std::to_string(pad));
    Arena& arena = arenas.emplace_back();
    // Written as copy() writes them.
    char* start = arena.allocate(100);  // opens a block
    std::memset(start, 'a', 100);
    char* next = arena.allocate(3000);  // still inside its first part
    std::memset(next, 'b', 3000);
    // The block's whole pages past its first part: the ones backed in one
    // call.  (The heap places a block anywhere: the page holding the end of
    // the first part is the writer's to fault.)  The heap may also hand out
    // pages an earlier test left resident: they are dropped (nothing is
    // written there yet), so that only the arena can bring them back.
    const auto rest = reinterpret_cast<char*>(
        (reinterpret_cast<std::uintptr_t>(start) + k_first_part + 4095) & ~std::uintptr_t{4095});
    const std::size_t rest_len = static_cast<std::size_t>(start + k_block - rest);
    ASSERT_EQ(::madvise(rest, rest_len & ~std::size_t{4095}, MADV_DONTNEED), 0);
    ASSERT_EQ(resident_pages(rest, rest_len).first, 0);
    arena.allocate(2000);  // past the first part: the rest is backed at once, before it is written
    const auto [resident, whole] = resident_pages(rest, rest_len);
    EXPECT_GE(whole, 14);
    EXPECT_EQ(resident, whole)
        << "every page past the first part resident after its first use there; block at "
        << reinterpret_cast<std::uintptr_t>(start) % 4096 << " into a page";
  }
}
#endif

}  // namespace
}  // namespace epload::detail
