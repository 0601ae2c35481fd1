// loader_test.cpp — the lazy loader against real libraries: what is loaded,
// how many inits run, every error, modes, switches and the learned store.
// Behaviour only; timings live in bench/bench_loader.cpp.
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
#include "epload/backend.h"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
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
using testing::mapped;

LoaderOptions options_for(const BackendEnv& env, LoadMode mode = LoadMode::lazy) {
  LoaderOptions o;
  o.mode = mode;
  o.cache_dir = env.cache_dir();
  return o;
}

std::unique_ptr<Loader> make_loader(const BackendEnv& env, LoaderOptions o) {
  auto r = Loader::create(env.index(), std::move(o));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

const TbDevice* device_of(Loader& loader, std::string_view name) {
  auto r = loader.lookup(name);
  EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return nullptr;
  auto* d = static_cast<const TbDevice*>(r.value());
  EXPECT_EQ(d->magic, TB_MAGIC);
  return d;
}

std::string error_of(Loader& loader, std::string_view name) {
  auto r = loader.lookup(name);
  EXPECT_FALSE(r.ok()) << name << " unexpectedly found";
  return r.ok() ? std::string() : r.error().message;
}

std::vector<std::size_t> order(const Loader& l) { return l.load_order(); }

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

// ---- modes and switches --------------------------------------------------------

TEST(LoaderModes, EagerLoadsEverythingInIndexOrder) {
  BackendEnv env;
  env.add("a", "a", "tb_undeclared");
  env.add("b", "b", "tb_npu");
  env.add("c", "c", "tb_fail");
  env.add("d", "d", "tb_undeclared2");
  auto loader = make_loader(env, options_for(env, LoadMode::eager));
  loader->start();
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_NE(loader->find("tundecl2"), nullptr);  // a failure stopped nothing
  EXPECT_EQ(loader->backends()[2].state, BackendState::failed);
}

TEST(LoaderModes, OffLoadsNothing) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  env.add("hook", "hook", "tb_hook");
  auto loader = make_loader(env, options_for(env, LoadMode::off));
  ::setenv("EPLOAD_TB_HOOK_RUNS", "0", 1);
  loader->start();
  const std::string e = error_of(*loader, "tnpu");
  EXPECT_NE(e.find("autoload is off"), std::string::npos) << e;
  EXPECT_TRUE(loader->load_order().empty());
  EXPECT_STREQ(std::getenv("EPLOAD_TB_HOOK_RUNS"), "0");
  EXPECT_FALSE(mapped(lib));
}

TEST(LoaderModes, HooksRunAtStartInLazyAndEager) {
  for (LoadMode mode : {LoadMode::lazy, LoadMode::eager}) {
    BackendEnv env;
    const std::string npu = env.add("npu", "npu", "tb_npu");
    env.add("hook", "hook", "tb_hook");
    auto loader = make_loader(env, options_for(env, mode));
    ::setenv("EPLOAD_TB_HOOK_RUNS", "0", 1);
    loader->start();
    loader->start();  // idempotent
    EXPECT_STREQ(std::getenv("EPLOAD_TB_HOOK_RUNS"), "1") << to_string(mode);
    EXPECT_TRUE(loader->backends()[1].hook);
    EXPECT_EQ(mapped(npu), mode == LoadMode::eager) << to_string(mode);
  }
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_had) {
      ::setenv(m_name, m_old.c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }

 private:
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

TEST(LoaderModes, TorchAutoloadVariableKeepsPyTorchMeaning) {
  ScopedEnv mode("EPLOAD_MODE", nullptr);
  struct Case {
    const char* value;
    LoadMode expected;
  };
  for (Case c : {Case{nullptr, LoadMode::lazy}, Case{"1", LoadMode::lazy}, Case{"0", LoadMode::off},
                 Case{"", LoadMode::off}, Case{"true", LoadMode::off}, Case{" 1", LoadMode::off},
                 Case{"1 ", LoadMode::off}, Case{"yes", LoadMode::off}}) {
    ScopedEnv v("TORCH_DEVICE_BACKEND_AUTOLOAD", c.value);
    LoaderOptions o;
    EXPECT_TRUE(apply_environment(o).empty());
    EXPECT_EQ(o.mode, c.expected) << (c.value ? c.value : "(unset)");
  }
  {
    ScopedEnv v("TORCH_DEVICE_BACKEND_AUTOLOAD", "0");
    ScopedEnv m("EPLOAD_MODE", "eager");
    LoaderOptions o;
    EXPECT_TRUE(apply_environment(o).empty());
    EXPECT_EQ(o.mode, LoadMode::off);  // PyTorch's switch wins
  }
  {
    ScopedEnv v("TORCH_DEVICE_BACKEND_AUTOLOAD", nullptr);
    ScopedEnv m("EPLOAD_MODE", "eager");
    LoaderOptions o;
    EXPECT_TRUE(apply_environment(o).empty());
    EXPECT_EQ(o.mode, LoadMode::eager);
  }
  {
    // A bad value is a warning naming the variable and the accepted values;
    // the default applies.
    ScopedEnv m("EPLOAD_MODE", "sometimes");
    LoaderOptions o;
    o.mode = LoadMode::eager;
    const auto warnings = apply_environment(o);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0], "EPLOAD_MODE='sometimes' is not one of lazy, eager, off: using lazy");
    EXPECT_EQ(o.mode, LoadMode::lazy);
  }
}

// PyTorch's switch governs its own group only; EPLOAD_AUTOLOAD every group.
TEST(LoaderModes, AutoloadSwitchesGovernTheirGroups) {
  ScopedEnv mode("EPLOAD_MODE", nullptr);
  struct Case {
    const char* torch;
    const char* epload;
    const char* group;
    LoadMode expected;
  };
  for (Case c : {Case{"0", nullptr, "torch.backends", LoadMode::off},
                 Case{"0", nullptr, "other.backends", LoadMode::lazy},
                 Case{nullptr, "0", "torch.backends", LoadMode::off},
                 Case{nullptr, "0", "other.backends", LoadMode::off},
                 Case{"1", "1", "other.backends", LoadMode::lazy}}) {
    ScopedEnv t("TORCH_DEVICE_BACKEND_AUTOLOAD", c.torch);
    ScopedEnv e("EPLOAD_AUTOLOAD", c.epload);
    LoaderOptions o;
    o.group = c.group;
    EXPECT_TRUE(apply_environment(o).empty());
    EXPECT_EQ(o.mode, c.expected) << c.group;
    const Switches s = read_switches(c.group);
    EXPECT_EQ(s.off_by.empty(), c.expected != LoadMode::off);
  }
}

TEST(LoaderModes, BadValidateValueIsAWarning) {
  {
    ScopedEnv v("EPLOAD_VALIDATE", "x");
    std::vector<std::string> w;
    EXPECT_EQ(read_validation(&w), Validation::full);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0], "EPLOAD_VALIDATE='x' is not one of full, paths: using full");
  }
  ScopedEnv v("EPLOAD_VALIDATE", "paths");
  std::vector<std::string> w;
  EXPECT_EQ(read_validation(&w), Validation::paths);
  EXPECT_TRUE(w.empty());
}

TEST(LoaderModes, DisableAndEnableLists) {
  BackendEnv env;
  const std::string npu = env.add("npu_dist", "npu", "tb_npu");
  env.add("other", "other", "tb_undeclared");
  {
    ScopedEnv d("EPLOAD_DISABLE", " npu , unrelated");
    ScopedEnv e("EPLOAD_ENABLE", nullptr);
    LoaderOptions o = options_for(env);
    EXPECT_TRUE(apply_environment(o).empty());
    auto loader = make_loader(env, o);
    const std::string err = error_of(*loader, "tnpu");
    EXPECT_NE(err.find("backend 'npu'"), std::string::npos) << err;
    EXPECT_NE(err.find("disabled by EPLOAD_DISABLE"), std::string::npos) << err;
    EXPECT_NE(device_of(*loader, "tundecl"), nullptr);
    EXPECT_FALSE(mapped(npu));
    EXPECT_EQ(loader->backends()[0].state, BackendState::disabled);
  }
  {
    ScopedEnv d("EPLOAD_DISABLE", nullptr);
    ScopedEnv e("EPLOAD_ENABLE", "NPU_Dist");  // a distribution name, normalized
    LoaderOptions o = options_for(env);
    EXPECT_TRUE(apply_environment(o).empty());
    auto loader = make_loader(env, o);
    EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
    const std::string err = error_of(*loader, "tundecl");
    EXPECT_EQ(loader->backends()[1].state, BackendState::disabled);
  }
}

// ---- randomized: lazy lookups give what eager loading gives ------------------

// Random sequences of backends (declared, undeclared, hooks, failing inits,
// wrong ABIs, stale declarations, C++ throws, missing dependencies, inits
// that look up another device or themselves, the same device declared or
// registered twice, some disabled), each a distinct library file.  (Not two
// inits that look each other up: which end of such a cycle fails depends on
// which loads first, and choosing that is what lazy loading does.)  For every device name, a lookup in
// a fresh lazy loader must succeed exactly when eager loading (PyTorch's
// way: everything, in index order) provides the device, and the same
// backend must provide it.  Each lazy loader reads and extends the learned
// store of the ones before it, so first runs and later runs are both
// covered.  (No two variants here register one name that only the later
// declares: the one documented difference, ARCHITECTURE.md "Two backends
// claiming one device", is not drawn.)
TEST(LoaderRandom, LazyLookupsAgreeWithEagerLoading) {
  static const char* const k_variants[] = {
      "tb_npu",   "tb_other_npu", "tb_undeclared", "tb_undeclared2", "tb_hook",      "tb_fail",
      "tb_fixed", "tb_bad_abi",   "tb_stale",      "tb_throw",       "tb_reject_abi", "tb_npu",
      "tb_undeclared", "tb_needs_dep", "tb_chain",  "tb_self"};
  static const char* const k_devices[] = {"tnpu",   "tnpu2",      "tother",     "tundecl", "tundecl2",
                                          "tfail",  "tabi",       "treject",    "tstale_old",
                                          "tstale_new", "tthrow",   "tdep",       "tchain",  "tself",
                                          "nosuch"};
  const int seeds = std::getenv("EPLOAD_RANDOM_TREES") ? std::atoi(std::getenv("EPLOAD_RANDOM_TREES")) : 25;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    BackendEnv env;
    const int n = 2 + static_cast<int>(rng() % 7);
    std::string drawn;
    std::vector<std::string> disabled;
    std::vector<std::size_t> hooks;  // enabled backends that provide no device
    for (int i = 0; i < n; ++i) {
      const char* v = k_variants[rng() % std::size(k_variants)];
      const std::string name = "b" + std::to_string(i);
      env.add(name, name, v);
      drawn += std::string(drawn.empty() ? "" : ", ") + v;
      if (rng() % 8 == 0) {
        disabled.push_back(name);
        drawn += " (disabled)";
      } else if (std::string_view(v) == "tb_hook") {
        hooks.push_back(static_cast<std::size_t>(i));
      }
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + drawn);
    testing::let_clock_tick();
    auto options_with = [&](LoadMode mode) {
      LoaderOptions o = options_for(env, mode);
      o.disable = disabled;
      return o;
    };
    auto eager = make_loader(env, options_with(LoadMode::eager));
    eager->start();
    std::vector<const char*> names(std::begin(k_devices), std::end(k_devices));
    std::shuffle(names.begin(), names.end(), rng);
    for (int run = 0; run < 2; ++run) {
      for (const char* d : names) {
        auto lazy = make_loader(env, options_with(LoadMode::lazy));
        auto r = lazy->lookup(d);
        const bool want = eager->find(d) != nullptr;
        EXPECT_EQ(r.ok(), want) << "device " << d << " run " << run << ": "
                                << (r.ok() ? std::string("found") : r.error().message);
        if (r.ok() && want) {
          EXPECT_EQ(lazy->provider(d), eager->provider(d)) << "device " << d;
        }
      }
    }
    // And all at once: one lazy loader, four threads looking every device
    // up in their own orders, race for the same backends.
    auto shared = make_loader(env, options_with(LoadMode::lazy));
    std::vector<std::vector<const char*>> orders(4, names);
    for (auto& o : orders) std::shuffle(o.begin(), o.end(), rng);
    std::vector<std::vector<bool>> found(orders.size(), std::vector<bool>(names.size()));
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < orders.size(); ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t k = 0; k < orders[t].size(); ++k) found[t][k] = shared->lookup(orders[t][k]).ok();
      });
    }
    for (auto& t : threads) t.join();
    for (std::size_t t = 0; t < orders.size(); ++t) {
      for (std::size_t k = 0; k < orders[t].size(); ++k) {
        const char* d = orders[t][k];
        EXPECT_EQ(found[t][k], eager->find(d) != nullptr) << "device " << d << " thread " << t;
        if (found[t][k]) {
          EXPECT_EQ(shared->provider(d), eager->provider(d)) << "device " << d;
        }
      }
    }
    // Whatever the runs above taught the store (every backend has been
    // loaded by now), a lazy start loads the hooks and nothing else: a
    // backend that provides a device, even one an earlier backend owns, is
    // no hook.
    auto fresh = make_loader(env, options_with(LoadMode::lazy));
    fresh->start();
    auto started = fresh->load_order();
    std::sort(started.begin(), started.end());
    EXPECT_EQ(started, hooks);
  }
}

// ---- learned store, identity, Python backends ---------------------------------

/// Two backends with undeclared devices, and a first loader that had to
/// load both to find "tundecl2" (so the store then knows both).
void learn_two_undeclared(BackendEnv& env) {
  env.add("u1", "u1", "tb_undeclared");
  env.add("u2", "u2", "tb_undeclared2");
  testing::let_clock_tick();
  auto loader = make_loader(env, options_for(env));
  ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
  EXPECT_EQ(loader->load_order().size(), 2u);  // had to search
}

TEST(LoaderStore, LearnedDevicesNeedNoSearchNextTime) {
  BackendEnv env;
  ASSERT_NO_FATAL_FAILURE(learn_two_undeclared(env));
  auto loader = make_loader(env, options_for(env));
  EXPECT_NE(loader->store_file().find(env.cache_dir()), std::string::npos);
  auto devices = loader->devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "tundecl");
  EXPECT_EQ(devices[0].source, DeviceSource::learned);
  EXPECT_FALSE(devices[0].ready);
  ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1}));  // straight to it
  struct stat st;
  ASSERT_EQ(::stat(loader->store_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// The store keeps a library relative to its search path, and a loader made
// from it keeps that relative view: status, loading, and the messages of a
// failure spell it whole, and the store written again keeps it relative.
TEST(LoaderStore, RememberedLibraryIsSpelledWholeWhereverItIsUsed) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  ASSERT_EQ(lib.rfind(env.site() + "/", 0), 0u) << lib;
  const std::string rel = lib.substr(env.site().size() + 1);
  testing::let_clock_tick();
  std::string store;
  { store = make_loader(env, options_for(env))->store_file(); }
  const std::string text = testing::read_file(store);
  EXPECT_NE(text.find("\t" + rel + "\t"), std::string::npos) << text;
  EXPECT_EQ(text.find(lib), std::string::npos) << text;
  {
    auto loader = make_loader(env, options_for(env));
    EXPECT_EQ(loader->backends()[0].library, lib);
    ASSERT_NE(device_of(*loader, "tnpu"), nullptr);
    EXPECT_EQ(loader->backends()[0].library, lib);
  }
  EXPECT_EQ(testing::read_file(store), text);  // nothing new to remember
  ASSERT_EQ(::unlink(lib.c_str()), 0);
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "tnpu");
  EXPECT_NE(e.find("library missing: " + lib + " no longer exists"), std::string::npos) << e;
  EXPECT_NE(e.find(", library " + lib + "): "), std::string::npos) << e;
}

/// The device names `loader` knows without loading anything.
std::vector<std::string> known_devices(Loader& loader) {
  std::vector<std::string> out;
  for (const DeviceStatus& d : loader.devices()) out.push_back(d.name);
  std::sort(out.begin(), out.end());
  return out;
}

// The store is parsed a record at a time as the slots are filled: damage
// found after a good record (in a later record, past the index's last entry
// point, or a missing trailer) must void what that record said too.
TEST(LoaderStore, DamageAnywhereVoidsTheWholeStore) {
  BackendEnv env;
  env.add("one", "one", "tb_npu");
  env.add("two", "two", "tb_other_npu");
  testing::let_clock_tick();
  std::string store;
  { store = make_loader(env, options_for(env))->store_file(); }
  const std::string good = testing::read_file(store);
  const std::size_t at = good.find("d:tnpu");
  ASSERT_NE(at, std::string::npos) << good;
  // A well-formed lie in the first record: believed when nothing else is wrong.
  const std::string lie = good.substr(0, at) + "d:tfake" + good.substr(at + 6);
  auto load_with = [&](const std::string& text) {
    testing::write_file(store, text);
    ::chmod(store.c_str(), 0600);
    return make_loader(env, options_for(env));
  };
  {
    auto believed = load_with(lie);
    const auto names = known_devices(*believed);
    EXPECT_NE(std::find(names.begin(), names.end(), "tfake"), names.end());
  }
  const std::size_t line2 = lie.find('\n', lie.find('\n') + 1) + 1;  // the second record
  const std::size_t trailer = lie.rfind("end ");
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {lie.substr(0, line2) + "0\tbroken record\n" + lie.substr(lie.find('\n', line2) + 1), "wrong number of fields"},
      {lie.substr(0, trailer), "truncated (no trailer)"},
      {lie.substr(0, trailer) + "1\tx.dist-info\tx\tx:y\tq\tx.so\t1:2:3:4:5:6\t1\t0\t\n" + lie.substr(trailer),
       "unknown backend kind"},  // past the index's entry points
  };
  for (const auto& [text, why] : damaged) {
    SCOPED_TRACE(why);
    auto loader = load_with(text);
    EXPECT_NE(loader->store_note().find(why), std::string::npos) << loader->store_note();
    const auto names = known_devices(*loader);
    EXPECT_EQ(std::find(names.begin(), names.end(), "tfake"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "tnpu"), names.end());
    EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
  }
}

TEST(LoaderStore, StoreTruncatedWhileInUseIsHarmless) {
  // What a loader took from the store must stay valid whatever happens to
  // the file afterwards: its writers replace it (rename), but a person or
  // another tool may truncate it in place.  (A private mapping of the file
  // loses even its copied pages to a truncation: a later read of a view
  // into it would be SIGBUS.)
  BackendEnv env;
  ASSERT_NO_FATAL_FAILURE(learn_two_undeclared(env));
  auto loader = make_loader(env, options_for(env));
  ASSERT_EQ(loader->devices().size(), 2u);  // from the store
  ASSERT_EQ(::truncate(loader->store_file().c_str(), 0), 0);
  auto devices = loader->devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "tundecl");
  ASSERT_NE(device_of(*loader, "tundecl"), nullptr);
  ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
  EXPECT_EQ(loader->load_order().size(), 2u);
}

TEST(LoaderStore, ChangedLibraryInvalidatesWhatWasLearned) {
  BackendEnv env;
  const std::string lib = env.add("u1", "u1", "tb_undeclared");
  testing::let_clock_tick();
  {
    auto loader = make_loader(env, options_for(env));
    ASSERT_NE(device_of(*loader, "tundecl"), nullptr);
  }
  // Upgrade: the same path now provides another device.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_undeclared2")));
  testing::let_clock_tick();
  auto loader = make_loader(env, options_for(env));
  ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
  error_of(*loader, "tundecl");
  // And a checking loader reads the new declaration at once.
  auto checked_options = options_for(env);
  checked_options.check_libraries = true;
  auto checked = make_loader(env, checked_options);
  auto b = checked->backends();
  EXPECT_EQ(b[0].devices, (std::vector<std::string>{"tundecl2"}));
}

// Enough backends that their libraries are checked on two CPUs: an unknown
// name still finds the first changed library in index order, and loads no
// other until asked; a checking loader reads every changed one again.
TEST(LoaderStore, ChangedLibrariesAmongManyAreFoundInIndexOrder) {
  BackendEnv env;
  constexpr std::size_t k_count = 150;
  std::vector<std::string> libs;
  for (std::size_t i = 0; i < k_count; ++i) {
    const std::string n = "b" + std::to_string(1000 + i);
    libs.push_back(env.add(n, n, "tb_undeclared"));  // all provide "tundecl"; the first wins
  }
  auto become_undeclared2 = [&](std::size_t i) {
    testing::write_file(libs[i], testing::read_file(testing::test_backend("tb_undeclared2")));
  };
  testing::let_clock_tick();
  {
    auto loader = make_loader(env, options_for(env));
    error_of(*loader, "nosuch");  // loads all 150 to learn what they provide
    ASSERT_EQ(loader->load_order().size(), k_count);
  }
  become_undeclared2(41);
  become_undeclared2(97);
  testing::let_clock_tick();
  {
    auto loader = make_loader(env, options_for(env));
    loader->start();  // the 149 that lost "tundecl" to the first are no hooks
    EXPECT_TRUE(loader->load_order().empty());
    EXPECT_EQ(loader->backends()[1].devices, (std::vector<std::string>{"tundecl"}));
    ASSERT_EQ(loader->backends()[1].conflicts.size(), 1u);
    EXPECT_NE(loader->backends()[1].conflicts[0].find("'b1000', which comes first"), std::string::npos);
    ASSERT_NE(device_of(*loader, "tundecl2"), nullptr);
    EXPECT_EQ(order(*loader), (std::vector<std::size_t>{41}));  // not 97: 41 provides it
    // Every library but 97's was found unchanged by that lookup; 97's is
    // loaded by the next search.
    const std::string e = error_of(*loader, "nosuch");
    EXPECT_NE(e.find("no backend provides device 'nosuch'"), std::string::npos) << e;
    EXPECT_EQ(order(*loader), (std::vector<std::size_t>{41, 97}));
  }
  become_undeclared2(120);
  testing::let_clock_tick();
  auto checked_options = options_for(env);
  checked_options.check_libraries = true;
  auto checked = make_loader(env, checked_options);
  const auto b = checked->backends();
  ASSERT_EQ(b.size(), k_count);
  for (std::size_t i = 0; i < k_count; ++i) {
    SCOPED_TRACE(i);
    if (i == 120) {  // changed since anything was learned of it: unknown until loaded
      EXPECT_FALSE(b[i].devices_known);
      EXPECT_TRUE(b[i].devices.empty());
    } else {
      EXPECT_TRUE(b[i].devices_known);
      EXPECT_EQ(b[i].devices, (std::vector<std::string>{i == 41 || i == 97 ? "tundecl2" : "tundecl"}));
    }
  }
  EXPECT_TRUE(checked->load_order().empty());
}

TEST(LoaderStore, StaleDeclarationIsCorrectedAtLoad) {
  BackendEnv env;
  env.add("stale", "stale", "tb_stale");  // declares tstale_old, registers tstale_new
  auto loader = make_loader(env, options_for(env));
  const std::string e = error_of(*loader, "tstale_old");
  EXPECT_NE(e.find("no backend provides device 'tstale_old'"), std::string::npos) << e;
  EXPECT_NE(e.find("backend 'stale'"), std::string::npos) << e;
  EXPECT_NE(e.find("did not register it"), std::string::npos) << e;
  // What it did register is known now, without another load.
  ASSERT_NE(device_of(*loader, "tstale_new"), nullptr);
  EXPECT_EQ(loader->load_order().size(), 1u);
}

TEST(LoaderStore, CorruptStoreIsIgnored) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  testing::let_clock_tick();
  std::string path;
  {
    auto loader = make_loader(env, options_for(env));
    path = loader->store_file();
  }
  std::string text = testing::read_file(path);
  ASSERT_FALSE(text.empty());
  testing::write_file(path, text.substr(0, text.size() / 2));
  ::chmod(path.c_str(), 0600);
  auto loader = make_loader(env, options_for(env));
  EXPECT_NE(loader->store_note().find("truncated"), std::string::npos) << loader->store_note();
  EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
}

/// Backend "two": an entry point whose library is a hard link to `lib`.
bool add_second_path(BackendEnv& env, const std::string& lib) {
  testing::make_dirs(env.site() + "/two");
  if (::link(lib.c_str(), (env.site() + "/two/_native.so").c_str()) != 0) return false;
  env.add_entry_point("two", "two", "two._native:tb_init");
  return true;
}

TEST(LoaderIdentity, EveryLaterPathOfOneFileIsAnAliasOfTheFirst) {
  BackendEnv env;
  const std::string lib = env.add("one", "one", "tb_npu");
  env.add("mid", "mid", "tb_other_npu");
  ASSERT_TRUE(add_second_path(env, lib));
  for (const char* pkg : {"three", "four"}) {
    testing::make_dirs(env.site() + "/" + pkg);
    ASSERT_EQ(::link(lib.c_str(), (env.site() + "/" + pkg + "/_native.so").c_str()), 0);
  }
  env.add_entry_point("three", "three", "three._native:tb_init");
  env.add_entry_point("four", "four", "four._native:tb_elsewhere");  // another symbol: its own backend
  testing::let_clock_tick();
  for (int pass = 0; pass < 2; ++pass) {  // resolved, then from the store
    SCOPED_TRACE(pass);
    auto loader = make_loader(env, options_for(env));
    auto b = loader->backends();
    ASSERT_EQ(b.size(), 5u);
    EXPECT_EQ(b[0].alias_of, "");
    EXPECT_EQ(b[1].alias_of, "");
    EXPECT_EQ(b[2].alias_of, "one");
    EXPECT_EQ(b[3].alias_of, "one");
    EXPECT_EQ(b[4].alias_of, "");
    EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
    EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0}));
  }
}

TEST(LoaderIdentity, SameFileByTwoPathsIsOneBackend) {
  BackendEnv env;
  const std::string lib = env.add("one", "one", "tb_npu");
  ASSERT_TRUE(add_second_path(env, lib));
  auto loader = make_loader(env, options_for(env));
  auto b = loader->backends();
  EXPECT_EQ(b[1].alias_of, "one");
  EXPECT_TRUE(b[1].conflicts.empty());
  EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{0}));
  EXPECT_EQ(static_cast<const TbDevice*>(loader->find("tnpu"))->init_count(), 1);
  // An eager loader inits it once more (its own init; dlopen gives the same
  // mapping), not twice.
  auto eager = make_loader(env, options_for(env, LoadMode::eager));
  eager->start();
  EXPECT_EQ(order(*eager), (std::vector<std::size_t>{0}));
  EXPECT_EQ(static_cast<const TbDevice*>(eager->find("tnpu"))->init_count(), 2);
}

// Disabling one entry point does not disable another that reaches the same
// file: the other is a backend of its own, not an alias of one that never
// loads.
TEST(LoaderIdentity, DisabledEntryPointStandsForNoOther) {
  BackendEnv env;
  const std::string lib = env.add("one", "one", "tb_npu");
  ASSERT_TRUE(add_second_path(env, lib));
  ScopedEnv d("EPLOAD_DISABLE", "one");
  ScopedEnv e("EPLOAD_ENABLE", nullptr);
  LoaderOptions o = options_for(env);
  EXPECT_TRUE(apply_environment(o).empty());
  auto loader = make_loader(env, o);
  auto b = loader->backends();
  EXPECT_EQ(b[0].state, BackendState::disabled);
  EXPECT_EQ(b[1].alias_of, "");
  EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
  EXPECT_EQ(order(*loader), (std::vector<std::size_t>{1}));
}

// Identity comes from (dev, ino), and a remembered stamp may name an inode
// that now belongs to another file (removed and reinstalled trees reuse
// inodes).  Here backend "one" was remembered with inode X; its library is
// then replaced (inode Y) and a new backend "two" arrives whose library is
// inode X.  "two" is not an alias of "one": both are loaded.
TEST(LoaderIdentity, StaleRememberedInodeMakesNoAlias) {
  BackendEnv env;
  const std::string lib = env.add("one", "one", "tb_npu");
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // remembers "one" with its inode
  ASSERT_TRUE(add_second_path(env, lib));
  const std::string fresh = lib + ".new";
  testing::write_file(fresh, testing::read_file(testing::test_backend("tb_other_npu")));
  ASSERT_EQ(::rename(fresh.c_str(), lib.c_str()), 0);
  testing::let_clock_tick();
  auto eager = make_loader(env, options_for(env, LoadMode::eager));
  auto b = eager->backends();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].alias_of, "");
  eager->start();
  EXPECT_EQ(order(*eager), (std::vector<std::size_t>{0, 1}));
  EXPECT_NE(device_of(*eager, "tother"), nullptr);  // one's new library
  EXPECT_NE(device_of(*eager, "tnpu2"), nullptr);   // two's
}

TEST(LoaderPython, PythonBackendIsRecognisedAndReported) {
  BackendEnv env;
  testing::make_dirs(env.site() + "/pyback");
  testing::write_file(env.site() + "/pyback/__init__.py", "def _autoload(): pass\n");
  env.add_entry_point("pyback", "pyback", "pyback:_autoload");
  auto loader = make_loader(env, options_for(env));
  auto b = loader->backends();
  EXPECT_EQ(b[0].kind, BackendKind::python);
  EXPECT_EQ(b[0].library, env.site() + "/pyback/__init__.py");
  const std::string e = error_of(*loader, "pydev");
  EXPECT_NE(e.find("1 Python backend(s)"), std::string::npos) << e;
}

// A Python backend's module file is remembered like a library: the next
// loader checks nothing more and resolves nothing (no suffix probing).
TEST(LoaderPython, PythonBackendResolutionIsRemembered) {
  BackendEnv env;
  testing::make_dirs(env.site() + "/pyback");
  testing::write_file(env.site() + "/pyback/__init__.py", "def _autoload(): pass\n");
  env.add_entry_point("pyback", "pyback", "pyback:_autoload");
  testing::let_clock_tick();
  std::string store;
  { store = make_loader(env, options_for(env))->store_file(); }
  EXPECT_NE(testing::read_file(store).find("pyback/__init__.py"), std::string::npos);
  profile::reset();
  profile::enable();
  auto loader = make_loader(env, options_for(env));
  std::size_t resolves = 0;
  for (const auto& e : profile::events()) resolves += e.phase == profile::Phase::resolve;
  profile::reset();  // stops recording
  EXPECT_EQ(resolves, 0u);
  auto b = loader->backends();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].kind, BackendKind::python);
  EXPECT_EQ(b[0].library, env.site() + "/pyback/__init__.py");
}

// A Python backend under a loader with a Python loader: `pyback`, its module
// file, and an environment for it.
std::string add_python_backend(BackendEnv& env, const std::string& name) {
  testing::make_dirs(env.site() + "/" + name);
  testing::write_file(env.site() + "/" + name + "/__init__.py", "def _autoload(): pass\n");
  env.add_entry_point(name, name, name + ":_autoload");
  testing::let_clock_tick();  // a stamp of the same tick as the write is not remembered (racy)
  return env.site() + "/" + name + "/__init__.py";
}

TEST(LoaderPython, PythonLoaderCallbackRegistersDevices) {
  BackendEnv env;
  add_python_backend(env, "pyback");
  std::atomic<int> calls{0};
  LoaderOptions o = options_for(env);
  o.python_loader = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    calls.fetch_add(1);
    EXPECT_EQ(b.module, "pyback");
    EXPECT_EQ(b.attr, "_autoload");
    EXPECT_EQ(b.index, 0u);
    return PythonLoaded{{{"pydev", "attr"}, {"pu1", "privateuse1"}}, true};
  };
  {
    auto loader = make_loader(env, o);
    auto r = loader->lookup("pydev");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NE(r.value(), nullptr);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_TRUE(loader->lookup("pu1").ok());
    EXPECT_EQ(calls.load(), 1);
  }
  // The kinds are remembered in the one store, and read by a loader without
  // a Python loader (the CLI's).
  testing::let_clock_tick();
  LoaderOptions plain = options_for(env);
  auto listing = make_loader(env, plain);
  const BackendStatus b = listing->backend(0);
  EXPECT_TRUE(b.devices_known);
  EXPECT_EQ(b.devices, (std::vector<std::string>{"pydev", "pu1"}));
  EXPECT_EQ(b.kinds, (std::vector<std::string>{"attr", "privateuse1"}));
  EXPECT_EQ(b.sources, (std::vector<DeviceSource>{DeviceSource::learned, DeviceSource::learned}));
}

// Devices a distribution declares in its epload.devices entry points are
// known before the backend loads, for native and Python backends alike.
TEST(LoaderPython, DistributionDeclaresDevicesInEntryPoints) {
  BackendEnv env;
  add_python_backend(env, "pyback");
  env.add_entry_point("pyback", "pdev", "pyback", std::string(k_devices_group));
  env.add_entry_point("pyback", "bad name", "pyback", std::string(k_devices_group));
  int calls = 0;
  LoaderOptions o = options_for(env);
  o.start_unknown = true;
  o.python_loader = [&](const PythonBackend&) -> Result<PythonLoaded> {
    ++calls;
    return PythonLoaded{{{"pdev", "attr"}}, true};
  };
  for (int run = 0; run < 2; ++run) {
    auto loader = make_loader(env, o);
    loader->start();
    EXPECT_EQ(calls, run);  // known: not loaded at start
    const BackendStatus b = loader->backend(0);
    EXPECT_EQ(b.devices, (std::vector<std::string>{"pdev"}));
    EXPECT_EQ(b.sources, (std::vector<DeviceSource>{DeviceSource::declared}));
    ASSERT_EQ(loader->devices().size(), 1u);
    EXPECT_EQ(loader->devices()[0].source, DeviceSource::declared);
    EXPECT_TRUE(loader->lookup("pdev").ok());
    EXPECT_EQ(calls, run + 1);
  }
}

// Lazy start with start_unknown loads the backends whose devices are
// unknown; a "not now" (Errc::unsupported) leaves one unloaded, to be tried
// at the next lookup; a load that cannot tell what it provided learns nothing.
TEST(LoaderPython, StartUnknownDeferralAndUnknownOutcome) {
  BackendEnv env;
  add_python_backend(env, "later");
  add_python_backend(env, "vague");
  std::atomic<int> later_calls{0}, vague_calls{0};
  LoaderOptions o = options_for(env);
  o.start_unknown = true;
  o.python_loader = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    if (b.name == "later") {
      if (later_calls.fetch_add(1) == 0) return Error{Errc::unsupported, "mid-import"};
      return PythonLoaded{{{"ldev", "attr"}}, true};
    }
    vague_calls.fetch_add(1);
    return PythonLoaded{{{"vdev", "attr"}}, false};
  };
  {
    auto loader = make_loader(env, o);
    loader->start();
    EXPECT_EQ(later_calls.load(), 1);
    EXPECT_EQ(vague_calls.load(), 1);
    EXPECT_EQ(loader->backend(0).state, BackendState::unloaded);
    EXPECT_EQ(loader->backend(1).state, BackendState::ready);
    EXPECT_FALSE(loader->backend(1).devices_known);
    EXPECT_TRUE(loader->lookup("vdev").ok());  // registered all the same
    EXPECT_TRUE(loader->lookup("ldev").ok());  // tried again
    EXPECT_EQ(later_calls.load(), 2);
  }
  testing::let_clock_tick();
  auto again = make_loader(env, o);
  again->start();
  EXPECT_EQ(later_calls.load(), 2);  // learned: not loaded at start
  EXPECT_EQ(vague_calls.load(), 2);  // still unknown: loaded at start
}

// Eager with stop_at_failure is PyTorch's loop: nothing after a failure.
TEST(LoaderPython, EagerStopsAtTheFirstFailure) {
  BackendEnv env;
  add_python_backend(env, "a");
  add_python_backend(env, "b");
  add_python_backend(env, "c");
  std::vector<std::string> ran;
  LoaderOptions o = options_for(env, LoadMode::eager);
  o.stop_at_failure = true;
  o.python_loader = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    ran.emplace_back(b.name);
    if (b.name == "b") return Error{Errc::backend, "ValueError: no"};
    return PythonLoaded{};
  };
  auto loader = make_loader(env, o);
  loader->start();
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(loader->backend(1).state, BackendState::failed);
  EXPECT_NE(loader->backend(1).error.find("ValueError: no"), std::string::npos);
  EXPECT_TRUE(loader->load(2).ok());  // asked for explicitly
  EXPECT_FALSE(loader->load(1).ok());  // sticky
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
