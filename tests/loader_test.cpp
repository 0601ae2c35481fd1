// loader_test.cpp — the lazy loader against real libraries: what is loaded,
// how many inits run, every error, and the allocation-free hot path.  Modes
// and switches: loader_modes_test.cpp; the learned store, identity and
// Python backends: loader_store_test.cpp.  Behaviour only; timings live in
// bench/bench_loader.cpp.
#include "elf.hpp"  // device_name_problem
#include "epload/loader.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <latch>
#include <new>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backend_env.hpp"
#include "loader_test_util.hpp"
#include "epload/backend.h"
#include "epload/profile.hpp"
#include "backends/test_backend.h"

// Counting allocator for the whole test binary: a pass-through that lets a
// test prove a code path allocates nothing.  (GCC, seeing the replaced
// delete inlined next to a `new`, warns that free() does not match operator
// new; here it does, by construction.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<long> g_allocations{0};
}
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace epload {
namespace {

using testing::BackendEnv;
using testing::device_of;
using testing::error_of;
using testing::make_loader;
using testing::mapped;
using testing::options_for;
using testing::order;


TEST(Loader, CreateAndStartLoadNothing) {
  BackendEnv env;
  const std::string a = env.add("alpha", "alpha", "tb_npu");
  const std::string b = env.add("beta", "beta", "tb_undeclared");
  auto loader = make_loader(env, options_for(env));
  loader->start();
  EXPECT_TRUE(loader->load_order().empty());
  EXPECT_FALSE(mapped(a));
  EXPECT_FALSE(mapped(b));
  auto backends = loader->backends();
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_EQ(backends[0].state, BackendState::unloaded);
  EXPECT_EQ(backends[0].kind, BackendKind::native);
  EXPECT_TRUE(backends[0].devices_known);
  EXPECT_EQ(backends[0].devices, (std::vector<std::string>{"tnpu", "tnpu2"}));
  EXPECT_FALSE(backends[1].devices_known);
  EXPECT_EQ(loader->find("tnpu"), nullptr);
}

TEST(Loader, LookupLoadsOnlyTheProvider) {
  BackendEnv env;
  const std::string a = env.add("alpha", "alpha", "tb_undeclared");
  const std::string b = env.add("beta", "beta", "tb_npu");
  const std::string c = env.add("gamma", "gamma", "tb_slow");
  auto loader = make_loader(env, options_for(env));
  loader->start();
  const TbDevice* d = device_of(*loader, "tnpu2");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ping(), TB_PING);  // a function of the library, callable
  EXPECT_EQ(d->init_count(), 1);
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1}));
  EXPECT_TRUE(mapped(b));
  EXPECT_FALSE(mapped(a));
  EXPECT_FALSE(mapped(c));
  // Same table again, from the hot path, without another init.
  EXPECT_EQ(device_of(*loader, "tnpu2"), d);
  EXPECT_EQ(loader->find("tnpu2"), d);
  EXPECT_NE(loader->find("tnpu"), nullptr);
  EXPECT_EQ(d->init_count(), 1);
  auto backends = loader->backends();
  EXPECT_EQ(backends[1].state, BackendState::ready);
  EXPECT_EQ(backends[1].load_seq, 0);
  EXPECT_EQ(loader->backend(1).name, "beta");
  EXPECT_EQ(loader->provider("tnpu2"), std::optional<std::size_t>(1));
  EXPECT_EQ(loader->provider("tslow"), std::optional<std::size_t>(2));  // declared, not loaded
  EXPECT_FALSE(loader->provider("nosuch").has_value());
  EXPECT_GT(backends[1].dlopen_ns, 0);
}

TEST(Loader, ConcurrentLookupsRunInitOnce) {
  BackendEnv env;
  env.add("slow", "slow", "tb_slow");  // init sleeps 50 ms: every thread piles up
  auto loader = make_loader(env, options_for(env));
  std::vector<std::thread> threads;
  std::vector<const void*> got(24, nullptr);
  std::latch go(static_cast<std::ptrdiff_t>(got.size()));  // all start together (blocking, not spinning)
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      auto r = loader->lookup("tslow");
      got[t] = r.ok() ? r.value() : nullptr;
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NE(got[0], nullptr);
  for (const void* p : got) EXPECT_EQ(p, got[0]);
  EXPECT_EQ(static_cast<const TbDevice*>(got[0])->init_count(), 1);
  EXPECT_EQ(loader->load_order().size(), 1u);
}

TEST(Loader, ConcurrentLookupsOfUnknownDevicesRunEachInitOnce) {
  BackendEnv env;
  env.add("one", "one", "tb_undeclared");
  env.add("two", "two", "tb_undeclared2");
  auto loader = make_loader(env, options_for(env));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::mutex first_error_mutex;
  std::string first_error;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto r = loader->lookup(t % 2 ? "tundecl" : "tundecl2");
      if (!r.ok()) {
        failures.fetch_add(1);
        std::lock_guard lock(first_error_mutex);
        if (first_error.empty()) first_error = r.error().message;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(device_of(*loader, "tundecl")->init_count(), 1);
  EXPECT_EQ(device_of(*loader, "tundecl2")->init_count(), 1);
  EXPECT_EQ(loader->load_order().size(), 2u);
}

TEST(Loader, InitLookingUpAnotherDeviceDoesNotDeadlock) {
  BackendEnv env;
  env.add("chain", "chain", "tb_chain");  // its init looks up tnpu
  env.add("npu", "npu", "tb_npu");
  auto loader = make_loader(env, options_for(env));
  const TbDevice* chain = device_of(*loader, "tchain");
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->looked_up, loader->find("tnpu"));
  EXPECT_NE(chain->looked_up, nullptr);
  // Loaded in this order: chain started first, npu finished inside it.
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1, 0}));
}

TEST(Loader, SelfLookupDuringInitFailsClearly) {
  BackendEnv env;
  env.add("selfish", "selfish", "tb_self");
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "tself");
  EXPECT_NE(e.find("backend 'selfish'"), std::string::npos) << e;
  EXPECT_NE(e.find("self-lookup"), std::string::npos) << e;
  EXPECT_NE(e.find("EPLOAD_DISABLE=selfish"), std::string::npos) << e;
}

TEST(Loader, CycleOfBackendsInOneThreadDoesNotHang) {
  BackendEnv env;
  env.add("cyca", "cyca", "tb_cycle_a");  // needs tcycb
  env.add("cycb", "cycb", "tb_cycle_b");  // tries tcyca, copes without
  auto loader = make_loader(env, options_for(env));
  const TbDevice* a = device_of(*loader, "tcyca");
  ASSERT_NE(a, nullptr);
  const TbDevice* b = device_of(*loader, "tcycb");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->looked_up, b);
  EXPECT_EQ(b->looked_up, nullptr);  // its lookup of tcyca failed instead of waiting
}

TEST(Loader, UnknownDeviceLoadsUndeclaredBackendsInIndexOrder) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  env.add("u1", "u1", "tb_undeclared");
  env.add("u2", "u2", "tb_undeclared2");
  env.add("u3", "u3", "tb_chain");  // declared: never searched
  auto loader = make_loader(env, options_for(env));
  ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1, 2}));
  // Now learned: no further loading for tundecl.
  ASSERT_NE(device_of(*loader, "tundecl"), nullptr);
  EXPECT_EQ(order(*loader).size(), 2u);
}

TEST(Loader, UnknownDeviceErrorListsKnownDevicesAndFailures) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  env.add("broken", "broken", "tb_reject_abi");
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "nosuch");
  EXPECT_NE(e.find("no backend provides device 'nosuch'"), std::string::npos) << e;
  EXPECT_NE(e.find("tnpu"), std::string::npos) << e;
  EXPECT_NE(e.find("tnpu2"), std::string::npos) << e;
  EXPECT_NE(e.find("backend 'broken'"), std::string::npos) << e;
  EXPECT_NE(e.find("ABI version mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("needs ABI 7"), std::string::npos) << e;
  // The declared backend was not loaded for the search.
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1}));
}

TEST(Loader, InvalidDeviceNameIsAnError) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  auto loader = make_loader(env, options_for(env));
  auto r = loader->lookup("bad name\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_EQ(r.error().message, "'bad name?' is not a device name (1-63 characters of A-Z a-z 0-9 _ . : -)");
  EXPECT_TRUE(loader->load_order().empty());
  EXPECT_EQ(detail::device_name_problem("npu"), "");
  EXPECT_EQ(detail::device_name_problem(std::string(64, 'a')).find("is not a device name"), 67u);
}

// ---- errors ------------------------------------------------------------------

void expect_backend_error(const std::string& e, const std::string& backend, const std::string& cause) {
  EXPECT_NE(e.find("backend '" + backend + "'"), std::string::npos) << e;
  EXPECT_NE(e.find(cause), std::string::npos) << e;
  EXPECT_NE(e.find("EPLOAD_DISABLE=" + backend), std::string::npos) << e;
}

TEST(LoaderErrors, LibraryMissing) {
  BackendEnv env;
  env.add_entry_point("ghost", "ghost", "ghost._native:tb_init");
  env.add("npu", "npu", "tb_npu");
  auto loader = make_loader(env, options_for(env));
  auto b = loader->backends();
  EXPECT_EQ(b[0].state, BackendState::failed);
  EXPECT_EQ(b[0].kind, BackendKind::unresolved);
  expect_backend_error(b[0].error, "ghost", "library missing");
  EXPECT_NE(b[0].error.find(env.site() + "/ghost/_native.so"), std::string::npos) << b[0].error;
  // One broken backend breaks nobody else.
  EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
  expect_backend_error(error_of(*loader, "nosuch"), "ghost", "library missing");
}

TEST(LoaderErrors, LibraryDeletedAfterItWasRemembered) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // writes the store
  ASSERT_EQ(::unlink(lib.c_str()), 0);
  auto loader = make_loader(env, options_for(env));
  expect_backend_error(error_of(*loader, "tnpu"), "npu", "library missing");
}

TEST(LoaderErrors, DependencyMissing) {
  BackendEnv env;
  const std::string lib = env.add("dep", "dep", "tb_needs_dep");
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "tdep");
  expect_backend_error(e, "dep", "a library it depends on is missing: libepload_test_dep.so");
  EXPECT_NE(e.find(lib), std::string::npos) << e;
}

TEST(LoaderErrors, InitSymbolMissing) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu", "no_such_init");
  auto loader = make_loader(env, options_for(env));
  expect_backend_error(error_of(*loader, "tnpu"), "npu", "init symbol 'no_such_init' missing");
}

TEST(LoaderErrors, AbiMismatchDeclaredIsCaughtWithoutLoading) {
  BackendEnv env;
  const std::string lib = env.add("old", "old", "tb_bad_abi");
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "tabi");
  expect_backend_error(e, "old", "ABI version mismatch: the library declares backend ABI 99");
  EXPECT_FALSE(mapped(lib));
  EXPECT_TRUE(loader->load_order().empty());
}

TEST(LoaderErrors, AbiMismatchReportedByInit) {
  BackendEnv env;
  env.add("picky", "picky", "tb_reject_abi");
  auto loader = make_loader(env, options_for(env, LoadMode::eager));
  loader->start();
  auto b = loader->backends();
  EXPECT_EQ(b[0].state, BackendState::failed);
  expect_backend_error(b[0].error, "picky", "ABI version mismatch: init rejected");
}

TEST(LoaderErrors, InitReportsFailure) {
  BackendEnv env;
  env.add("flaky", "flaky", "tb_fail");
  auto loader = make_loader(env, options_for(env));
  expect_backend_error(error_of(*loader, "tfail"), "flaky",
                       "init failed (returned -1): simulated failure: the device is unplugged");
}

TEST(LoaderErrors, InitThrowsCppException) {
  BackendEnv env;
  env.add("thrower", "thrower", "tb_throw");
  auto loader = make_loader(env, options_for(env));
  expect_backend_error(error_of(*loader, "tthrow"), "thrower",
                       "init threw a C++ exception: driver table corrupt");
  EXPECT_EQ(loader->backends()[0].state, BackendState::failed);
}

TEST(LoaderErrors, TwoBackendsClaimOneDeviceFirstInIndexOrderWins) {
  BackendEnv env;
  env.add("first", "first", "tb_npu");
  env.add("second", "second", "tb_other_npu");  // also declares tnpu
  auto loader = make_loader(env, options_for(env));
  auto b = loader->backends();
  ASSERT_EQ(b[1].conflicts.size(), 1u);
  EXPECT_NE(b[1].conflicts[0].find("'tnpu'"), std::string::npos) << b[1].conflicts[0];
  EXPECT_NE(b[1].conflicts[0].find("'first'"), std::string::npos) << b[1].conflicts[0];
  const TbDevice* npu = device_of(*loader, "tnpu");
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0}));
  // Loading the second (for its other device) leaves tnpu with the first.
  const TbDevice* other = device_of(*loader, "tother");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(device_of(*loader, "tnpu"), npu);
  EXPECT_NE(other, npu);
  for (const DeviceStatus& d : loader->devices()) {
    if (d.name == "tnpu") {
      EXPECT_EQ(d.backend, 0u);
    }
  }
}

TEST(LoaderErrors, TwoBackendsClaimOneDeviceEvenInEagerMode) {
  BackendEnv env;
  env.add("first", "first", "tb_npu");
  env.add("second", "second", "tb_other_npu");
  auto loader = make_loader(env, options_for(env, LoadMode::eager));
  loader->start();
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0, 1}));
  auto b = loader->backends();
  EXPECT_EQ(b[1].state, BackendState::ready);
  EXPECT_FALSE(b[1].conflicts.empty());
  const void* npu = loader->find("tnpu");
  ASSERT_NE(npu, nullptr);
  EXPECT_NE(npu, loader->find("tother"));
}

TEST(LoaderErrors, CorruptOrNonElfLibrary) {
  BackendEnv env;
  const std::string junk = env.add("junk", "junk", "");
  testing::write_file(junk, "this is not a shared library\n");
  const std::string cut = env.add("cut", "cut", "");
  std::string elf = testing::read_file(testing::test_backend("tb_npu"));
  testing::write_file(cut, elf.substr(0, 100));
  env.add("npu", "npu", "tb_undeclared");
  auto loader = make_loader(env, options_for(env));
  auto b = loader->backends();
  expect_backend_error(b[0].error, "junk", "not an ELF file");
  expect_backend_error(b[1].error, "cut", "truncated");
  EXPECT_NE(device_of(*loader, "tundecl"), nullptr);
  const std::string e = error_of(*loader, "nosuch");
  EXPECT_NE(e.find("not an ELF file"), std::string::npos) << e;
}

TEST(LoaderErrors, TruncatedLibraryIsNeverHandedToDlopen) {
  // dlopen of a truncated library crashes the process (SIGBUS): it must be
  // refused before, on every start, also once a store exists.
  BackendEnv env;
  const std::string cut = env.add("cut", "cut", "");
  std::string elf = testing::read_file(testing::test_backend("tb_undeclared"));
  testing::write_file(cut, elf.substr(0, elf.size() / 2));
  env.add("u", "u", "tb_undeclared2");
  testing::let_clock_tick();
  for (int run = 0; run < 2; ++run) {
    auto loader = make_loader(env, options_for(env, run ? LoadMode::eager : LoadMode::lazy));
    loader->start();
    const std::string e = error_of(*loader, "nosuch");
    expect_backend_error(e, "cut", "truncated");
    EXPECT_FALSE(mapped(cut));
  }
}

// The loader trusts its store at creation (no system call per backend) and
// checks a library only when it is about to load it.  These change the file
// between creation and the first lookup: the check must see it.
TEST(LoaderErrors, LibraryTruncatedAfterCreateIsNeverHandedToDlopen) {
  BackendEnv env;
  const std::string lib = env.add("cut", "cut", "tb_npu");
  env.add("u", "u", "tb_undeclared");
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // writes the store
  auto loader = make_loader(env, options_for(env));
  loader->start();
  // In place: same inode, half the bytes (what an interrupted copy leaves).
  const std::string elf = testing::read_file(lib);
  ASSERT_EQ(::truncate(lib.c_str(), static_cast<off_t>(elf.size() / 2)), 0);
  const std::string e = error_of(*loader, "tnpu");
  expect_backend_error(e, "cut", "truncated");
  EXPECT_FALSE(mapped(lib));
  EXPECT_EQ(loader->backends()[0].state, BackendState::failed);
  // Sticky without touching the file again, and nobody else is affected.
  EXPECT_EQ(error_of(*loader, "tnpu"), e);
  EXPECT_FALSE(mapped(lib));
  EXPECT_NE(device_of(*loader, "tundecl"), nullptr);
}

TEST(LoaderErrors, LibraryRemovedAfterCreate) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // writes the store
  auto loader = make_loader(env, options_for(env));
  loader->start();
  ASSERT_EQ(::unlink(lib.c_str()), 0);
  const std::string e = error_of(*loader, "tnpu");
  expect_backend_error(e, "npu", "library missing");
  EXPECT_NE(e.find(lib + " no longer exists"), std::string::npos) << e;
  // Reinstalled: the next lookup retries and succeeds.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_npu")));
  const TbDevice* d = device_of(*loader, "tnpu");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->init_count(), 1);
}

TEST(LoaderStore, LibraryReplacedAfterCreateIsReadAgainBeforeLoading) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");  // declares tnpu, tnpu2
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // writes the store
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(loader->backends()[0].devices, (std::vector<std::string>{"tnpu", "tnpu2"}));
  // Upgraded after the loader was created: declares tnpu, tother.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_other_npu")));
  ASSERT_NE(device_of(*loader, "tnpu"), nullptr);
  auto b = loader->backends()[0];
  EXPECT_EQ(b.devices, (std::vector<std::string>{"tnpu", "tother"}));
  EXPECT_TRUE(b.conflicts.empty());
  ASSERT_NE(device_of(*loader, "tother"), nullptr);  // known from the new declaration
  EXPECT_EQ(loader->load_order().size(), 1u);
  const std::string e = error_of(*loader, "tnpu2");
  EXPECT_NE(e.find("no backend provides device 'tnpu2'"), std::string::npos) << e;
}

// A failed backend claims nothing: when the first backend that declares a
// device fails, the next one in index order that declares it provides it,
// in lazy mode as in eager mode; the failure stays reported.
TEST(LoaderErrors, FailedDeclaredProviderLeavesTheDeviceToTheNext) {
  BackendEnv env;
  env.add("broken", "broken", "tb_fail");  // declares tfail, init fails
  env.add("fixed", "fixed", "tb_fixed");   // declares tfail, works
  for (LoadMode mode : {LoadMode::lazy, LoadMode::eager}) {
    auto loader = make_loader(env, options_for(env, mode));
    loader->start();
    ASSERT_NE(device_of(*loader, "tfail"), nullptr);
    EXPECT_EQ(loader->provider("tfail"), std::optional<std::size_t>(1));
    auto b = loader->backends();
    EXPECT_EQ(b[0].state, BackendState::failed);
    EXPECT_NE(b[0].error.find("init failed"), std::string::npos) << b[0].error;
    EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0, 1}));
  }
  // With no other provider, the lookup's error is the failure.
  BackendEnv alone;
  alone.add("broken", "broken", "tb_fail");
  auto loader = make_loader(alone, options_for(alone));
  const std::string e = error_of(*loader, "tfail");
  EXPECT_NE(e.find("backend 'broken'"), std::string::npos) << e;
  EXPECT_NE(e.find("init failed"), std::string::npos) << e;
}

TEST(LoaderErrors, FailureIsStickyUntilTheLibraryChanges) {
  BackendEnv env;
  const std::string lib = env.add("flaky", "flaky", "tb_fail");
  auto loader = make_loader(env, options_for(env));
  const std::string e1 = error_of(*loader, "tfail");
  const std::string e2 = error_of(*loader, "tfail");
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(loader->load_order().size(), 1u);  // not retried
  // A fixed library is installed (new file, new inode): retried, and works.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_fixed")));
  const TbDevice* d = device_of(*loader, "tfail");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->init_count(), 1);  // the new library's own first init
  EXPECT_EQ(loader->load_order().size(), 2u);
  EXPECT_EQ(loader->backends()[0].state, BackendState::ready);
}

TEST(LoaderHotPath, LookupAfterLoadAllocatesNothing) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  env.add("u", "u", "tb_undeclared");
  auto loader = make_loader(env, options_for(env));
  ASSERT_NE(device_of(*loader, "tnpu"), nullptr);
  ASSERT_NE(device_of(*loader, "tundecl"), nullptr);
  const long before = g_allocations.load();
  const void* last = nullptr;
  for (int i = 0; i < 1000; ++i) {
    auto r = loader->lookup(i % 2 ? "tnpu" : "tundecl");
    if (r.ok()) last = r.value();
    last = loader->find("tnpu2") ? last : nullptr;
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_NE(last, nullptr);
}

TEST(LoaderHotPath, CountingAllocatorSeesAllocations) {
  // The allocation test above can fail: this is what an allocation looks like.
  const long before = g_allocations.load();
  std::string s(1000, 'x');
  EXPECT_GE(g_allocations.load() - before, 1);
  EXPECT_EQ(s.size(), 1000u);
}

}  // namespace
}  // namespace epload
