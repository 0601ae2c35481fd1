// big_buffer_test.cpp — big_alloc() with and without the huge-page pool:
// every byte usable and kept, buffers cut from 2 MiB chunks when the pool is
// on (and transparent huge pages are not off), a chunk reused or unmapped
// once all its buffers are freed, big requests served from the heap, and
// many threads at once.  Each test runs in a process of its own (ctest), so
// the pool's state is the test's own; the pooled tests fork once more so
// that no earlier allocation of the same process shares their chunk.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "big_buffer.hpp"
#include "prefault.hpp"

namespace epload::detail {
namespace {

constexpr std::uintptr_t k_chunk = std::uintptr_t{2} << 20;

std::uintptr_t chunk_of(const char* p) { return reinterpret_cast<std::uintptr_t>(p) & ~(k_chunk - 1); }

bool mapped(std::uintptr_t page) {
  unsigned char vec = 0;
  return ::mincore(reinterpret_cast<void*>(page), 4096, &vec) == 0;
}

void fill(char* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>((i * 131 + seed) & 0xff);
}

bool holds(const char* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<char>((i * 131 + seed) & 0xff)) return false;
  }
  return true;
}

/// Turns the pool on whatever this machine's page-fault cost (the pool's
/// own behaviour is under test; whether it pays is huge_pages_pay()'s).
void force_pool() {
  ::setenv("EPLOAD_HUGE_PAGES", "1", 1);
  use_huge_page_pool();
}

/// Runs `body` in a child process; its gtest failures become the exit status.
void in_child(const std::function<void()>& body) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    body();
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's messages above";
}

TEST(BigBuffer, WithoutThePoolEveryByteIsUsableAndKept) {
  std::vector<BigBuffer> bufs;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{70000}, std::size_t{3} << 20}) {
    bufs.push_back(big_alloc(n));
    ASSERT_NE(bufs.back().get(), nullptr);
    fill(bufs.back().get(), n, static_cast<unsigned>(n));
  }
  std::size_t k = 0;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{70000}, std::size_t{3} << 20}) {
    EXPECT_TRUE(holds(bufs[k++].get(), n, static_cast<unsigned>(n))) << n;
  }
}

TEST(HugePages, PayOnlyWhereAFreshPageIsDear) {
  // THP off: never, whatever the setting or the cost.
  EXPECT_FALSE(huge_pages_pay(nullptr, false, true));
  EXPECT_FALSE(huge_pages_pay("1", false, true));
  // Told: as told.
  EXPECT_TRUE(huge_pages_pay("1", true, false));
  EXPECT_FALSE(huge_pages_pay("0", true, true));
  // Unset, or not 0/1: where they would pay (a big run, dear faults).
  EXPECT_FALSE(huge_pages_pay(nullptr, true, false));
  EXPECT_TRUE(huge_pages_pay(nullptr, true, true));
  EXPECT_TRUE(huge_pages_pay("auto", true, true));
  EXPECT_FALSE(huge_pages_pay("yes", true, false));
}

TEST(HugePages, MeasuresAFault) {
  const std::uint64_t ns = fresh_page_cost_ns();
  EXPECT_GT(ns, 0u);
  EXPECT_LT(ns, 100000000u) << "a fault measured at 100 ms or more is not a measurement";
  // Remembered: the same answer at every call of a process.
  const bool dear = faults_are_dear();
  EXPECT_EQ(faults_are_dear(), dear);
}

TEST(Prefault, BacksEveryPageOfABigBufferAndLeavesSmallOnesAlone) {
  constexpr std::size_t n = 64 * 4096;
  auto resident = [](void* p, std::size_t len) {
    unsigned char vec[64];
    EXPECT_EQ(::mincore(p, len, vec), 0);
    int count = 0;
    for (std::size_t i = 0; i < len / 4096; ++i) count += vec[i] & 1;
    return count;
  };
  void* big = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* small = ::mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(big, MAP_FAILED);
  ASSERT_NE(small, MAP_FAILED);
  prefault(small, 3 * 4096);
  EXPECT_EQ(resident(small, 3 * 4096), 0) << "under k_prefault_min: left to fault";
  prefault(big, n);
#ifdef MADV_POPULATE_WRITE
  // Kernels before 5.14 refuse the call: nothing to check there.
  char probe[2 * 4096];
  void* page = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(probe) + 4095) & ~std::uintptr_t{4095});
  if (::madvise(page, 4096, MADV_POPULATE_WRITE) == 0) {
    EXPECT_EQ(resident(big, n), 64) << "every page backed";
  }
#endif
  ::munmap(big, n);
  ::munmap(small, 3 * 4096);
}

TEST(HugePages, SettingDecidesOverTheMeasurement) {
  in_child([] {
    ::setenv("EPLOAD_HUGE_PAGES", "0", 1);
    EXPECT_FALSE(huge_pages_pay());
    use_huge_page_pool();
    BigBuffer a = big_alloc(100000);
    EXPECT_FALSE(in_pool(a.get())) << "EPLOAD_HUGE_PAGES=0: no pool";
    EXPECT_FALSE(huge_pages_pay(/*big_run=*/true)) << "0 refuses even a big run";
    ::unsetenv("EPLOAD_HUGE_PAGES");
    EXPECT_EQ(huge_pages_pay(/*big_run=*/true), huge_pages_allowed()) << "a big run pays untold";
    ::setenv("EPLOAD_HUGE_PAGES", "1", 1);
    EXPECT_EQ(huge_pages_pay(), huge_pages_allowed());
  });
}

TEST(BigBuffer, PoolCutsBuffersFromOneChunkAndReusesIt) {
  in_child([] {
    force_pool();
    BigBuffer a = big_alloc(100000);
    BigBuffer b = big_alloc(300000);
    fill(a.get(), 100000, 1);
    fill(b.get(), 300000, 2);
    EXPECT_TRUE(holds(a.get(), 100000, 1));
    if (!huge_pages_allowed()) {
      // Transparent huge pages off: plain heap buffers, nothing pooled.
      EXPECT_FALSE(in_pool(a.get()));
      return;
    }
    EXPECT_TRUE(in_pool(a.get()));
    EXPECT_EQ(chunk_of(a.get()), reinterpret_cast<std::uintptr_t>(a.get())) << "the first buffer starts the chunk";
    EXPECT_EQ(chunk_of(b.get()), chunk_of(a.get()));
    EXPECT_GE(b.get(), a.get() + 100000);  // no overlap
    const char* first = a.get();
    a.reset();
    b.reset();
    // All of the current chunk freed: cut from its start again.
    BigBuffer c = big_alloc(5000);
    EXPECT_EQ(c.get(), first);
    // Too big for the pool: from the heap.
    BigBuffer big = big_alloc(std::size_t{3} << 20);
    fill(big.get(), std::size_t{3} << 20, 3);
    EXPECT_FALSE(in_pool(big.get()));
    EXPECT_NE(chunk_of(big.get()), chunk_of(c.get()));
    EXPECT_TRUE(holds(big.get(), std::size_t{3} << 20, 3));
  });
}

TEST(BigBuffer, PoolUnmapsAFullChunkOnceItsBuffersAreFreed) {
  in_child([] {
    force_pool();
    if (!huge_pages_allowed()) return;  // nothing pooled (see the test above)
    BigBuffer a = big_alloc(900000);
    BigBuffer b = big_alloc(900000);
    const std::uintptr_t old = chunk_of(a.get());
    EXPECT_EQ(chunk_of(b.get()), old);
    BigBuffer c = big_alloc(900000);  // does not fit: a new chunk
    EXPECT_NE(chunk_of(c.get()), old);
    EXPECT_TRUE(mapped(old));
    a.reset();
    EXPECT_TRUE(mapped(old)) << "b still lives there";
    b.reset();
    EXPECT_FALSE(mapped(old)) << "an old chunk whose buffers are all freed is unmapped";
    fill(c.get(), 900000, 4);
    EXPECT_TRUE(holds(c.get(), 900000, 4));
  });
}

TEST(BigBuffer, ManyThreadsAllocateAndFreeAtOnce) {
  in_child([] {
    force_pool();
    std::vector<std::thread> threads;
    std::vector<int> bad(4, 0);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t, &bad] {
        std::mt19937 rng(static_cast<unsigned>(t));
        std::vector<std::pair<BigBuffer, std::size_t>> live;
        for (int i = 0; i < 400; ++i) {
          if (!live.empty() && rng() % 3 == 0) {
            const std::size_t k = rng() % live.size();
            if (!holds(live[k].first.get(), live[k].second, static_cast<unsigned>(live[k].second))) ++bad[t];
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          }
          const std::size_t n = 1 + rng() % 200000;
          live.emplace_back(big_alloc(n), n);
          fill(live.back().first.get(), n, static_cast<unsigned>(n));
        }
        for (auto& [buf, n] : live) {
          if (!holds(buf.get(), n, static_cast<unsigned>(n))) ++bad[t];
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
  });
}

}  // namespace
}  // namespace epload::detail
