// arena_test.cpp — the Arena: strings kept byte for byte where they were
// put, however many blocks they take, and a block backed in one call once
// it is used past its first page.
#include "arena.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
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
  void* page = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(probe) + 4095) & ~std::uintptr_t{4095});
  if (::madvise(page, 4096, MADV_POPULATE_WRITE) != 0) GTEST_SKIP() << "kernel before 5.14: prefault() is a no-op";
  constexpr std::size_t k_block = 64 * 1024;
  Arena arena;
  // Written as copy() writes them.
  char* start = arena.allocate(100);  // opens a block
  std::memset(start, 'a', 100);
  char* next = arena.allocate(3000);  // still inside its first page
  std::memset(next, 'b', 3000);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(start) % 4096, 0u) << "a block starts a page";
  // The heap may hand out pages an earlier test left resident: drop the
  // unwritten ones, so that only the arena can bring them back.
  ASSERT_EQ(::madvise(start + 4096, k_block - 4096, MADV_DONTNEED), 0);
  EXPECT_EQ(resident_pages(start, k_block).first, 1) << "only the first page touched so far";
  arena.allocate(2000);  // past it: the rest is backed at once, before it is written
  const auto [resident, whole] = resident_pages(start, k_block);
  EXPECT_EQ(whole, 16);
  EXPECT_EQ(resident, whole) << "every page of the block resident after its first use past its first page";
}
#endif

}  // namespace
}  // namespace epload::detail
