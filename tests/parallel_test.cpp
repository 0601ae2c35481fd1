// parallel_test.cpp — run_on_two_cpus: both calls run, on two CPUs when the
// process may use two, and on the caller alone when it may use one.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "parallel.hpp"

namespace epload {
namespace {

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

struct Seen {
  std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> calls{0};
};

void record(void* p) {
  auto* seen = static_cast<Seen*>(p);
  ++seen->calls;
  std::lock_guard<std::mutex> lock(seen->mutex);
  seen->threads.insert(std::this_thread::get_id());
}

TEST(Parallel, RunsOnTwoThreadsOnTwoCpusWhenTwoAreAllowed) {
  const int before = allowed_cpus();
  Seen seen;
  const bool two = detail::run_on_two_cpus(record, &seen);
  if (allowed_cpus() < 2) {
    EXPECT_FALSE(two);
    EXPECT_EQ(seen.calls.load(), 1);
    GTEST_SKIP() << "one CPU allowed: only the single-CPU path can be checked here";
  }
  ASSERT_TRUE(two);
  EXPECT_EQ(seen.calls.load(), 2);
  EXPECT_EQ(seen.threads.size(), 2u);
  EXPECT_TRUE(seen.threads.count(std::this_thread::get_id())) << "the caller runs it too";
  EXPECT_EQ(allowed_cpus(), before) << "the caller's own affinity is left alone";
}

TEST(Parallel, RunsOnceOnTheCallerWhenOneCpuIsAllowed) {
  // In a child: restricting the affinity must not leak into other tests.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(::sched_getcpu(), &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0) ::_exit(10);
    Seen seen;
    const bool two = detail::run_on_two_cpus(record, &seen);
    ::_exit(two ? 11 : seen.calls.load() == 1 && seen.threads.size() == 1 ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setaffinity failed, 11: two threads ran, 12: not exactly one call";
}

TEST(Parallel, SharedCounterWorkIsDoneExactlyOnce) {
  // How scanning and validation use it: both threads take chunks from one
  // counter until none are left.
  constexpr int k_items = 100000;
  std::atomic<int> next{0};
  std::vector<std::atomic<int>> done(k_items);
  auto work = [&] {
    for (int i; (i = next.fetch_add(1, std::memory_order_relaxed)) < k_items;) ++done[i];
  };
  detail::run_on_two_cpus(work);
  for (int i = 0; i < k_items; ++i) ASSERT_EQ(done[i].load(), 1) << i;
}

}  // namespace
}  // namespace epload
