// loader_modes_test.cpp — lazy, eager and off; PyTorch's autoload variable;
// the enable and disable lists; and random sets of backends where lazy
// lookups must give what eager loading gives.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "backend_env.hpp"
#include "epload/backend.h"
#include "epload/loader.hpp"
#include "epload/profile.hpp"
#include "epload/switches.hpp"
#include "loader_test_util.hpp"

namespace epload {
namespace {

using testing::BackendEnv;
using testing::device_of;
using testing::error_of;
using testing::make_loader;
using testing::mapped;
using testing::options_for;
using testing::order;
using testing::ScopedEnv;

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
    EXPECT_TRUE(apply_environment(o).warnings.empty());
    EXPECT_EQ(o.mode, c.expected) << (c.value ? c.value : "(unset)");
  }
  {
    ScopedEnv v("TORCH_DEVICE_BACKEND_AUTOLOAD", "0");
    ScopedEnv m("EPLOAD_MODE", "eager");
    LoaderOptions o;
    EXPECT_TRUE(apply_environment(o).warnings.empty());
    EXPECT_EQ(o.mode, LoadMode::off);  // PyTorch's switch wins
  }
  {
    ScopedEnv v("TORCH_DEVICE_BACKEND_AUTOLOAD", nullptr);
    ScopedEnv m("EPLOAD_MODE", "eager");
    LoaderOptions o;
    EXPECT_TRUE(apply_environment(o).warnings.empty());
    EXPECT_EQ(o.mode, LoadMode::eager);
  }
  {
    // A bad value is a warning naming the variable and the accepted values;
    // the default applies.
    ScopedEnv m("EPLOAD_MODE", "sometimes");
    LoaderOptions o;
    o.mode = LoadMode::eager;
    const auto warnings = apply_environment(o).warnings;
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
    const Switches s = apply_environment(o);
    EXPECT_TRUE(s.warnings.empty());
    EXPECT_EQ(o.mode, c.expected) << c.group;
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

// epload's on/off switches share one table (switches.hpp), the one the
// Python package's _flags.py applies too.
TEST(LoaderModes, OnOffSwitchesShareOneTable) {
  for (const char* on : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) {
    ScopedEnv v("EPLOAD_DEBUG", on);
    std::vector<std::string> w;
    EXPECT_TRUE(read_flag("EPLOAD_DEBUG", false, &w)) << on;
    EXPECT_TRUE(w.empty()) << on;
  }
  for (const char* off : {"", "0", "false", "False", "no", "NO", "off", "Off"}) {
    ScopedEnv v("EPLOAD_DEBUG", off);
    std::vector<std::string> w;
    EXPECT_FALSE(read_flag("EPLOAD_DEBUG", true, &w)) << off;
    EXPECT_TRUE(w.empty()) << off;
  }
  {
    ScopedEnv v("EPLOAD_DEBUG", nullptr);
    std::vector<std::string> w;
    EXPECT_TRUE(read_flag("EPLOAD_DEBUG", true, &w));
    EXPECT_FALSE(read_flag("EPLOAD_DEBUG", false, &w));
    EXPECT_TRUE(w.empty());
  }
  ScopedEnv v("EPLOAD_NO_CACHE", "maybe");
  std::vector<std::string> w;
  EXPECT_FALSE(read_flag("EPLOAD_NO_CACHE", false, &w));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "EPLOAD_NO_CACHE='maybe' is not one of 1, true, yes, on, 0, false, no, off: using 0");
  // EPLOAD_AUTOLOAD follows the table; a bad value warns and autoload stays on.
  ScopedEnv mode("EPLOAD_MODE", nullptr);
  for (auto [value, off, warned] : {std::tuple{"no", true, false}, std::tuple{"true", false, false},
                                    std::tuple{"later", false, true}}) {
    ScopedEnv e("EPLOAD_AUTOLOAD", value);
    LoaderOptions o;
    o.group = "other.backends";
    const Switches s = apply_environment(o);
    EXPECT_EQ(o.mode == LoadMode::off, off) << value;
    EXPECT_EQ(s.warnings.size(), warned ? 1u : 0u) << value;
  }
}

// The close names difflib.get_close_matches gives (ratio >= 0.6, three at
// most, best first, equal ratios in descending name order).
TEST(LoaderModes, CloseMatchesAreDifflibs) {
  EXPECT_EQ(close_matches("torch_fo", {"torch_foo", "torch_bar", "hook", "be_a"}),
            (std::vector<std::string>{"torch_foo", "torch_bar"}));
  EXPECT_EQ(close_matches("trch", {"torch", "tomli", "pip", "trace"}),
            (std::vector<std::string>{"torch", "trace"}));
  EXPECT_EQ(close_matches("abcd", {"abce", "abdc", "bacd", "xyz", "abcf"}),
            (std::vector<std::string>{"bacd", "abdc", "abcf"}));
  EXPECT_TRUE(close_matches("zzz", {"torch"}).empty());
}

TEST(LoaderModes, NamesThatMatchNoBackendAreWarnings) {
  const std::vector<BackendName> backends{{"torch_foo", "torch-foo"}, {"npu", "Vendor_NPU"}};
  // Entry-point names and normalized distribution names match: no warning.
  EXPECT_TRUE(unmatched_names({"npu"}, {"torch_foo", "vendor-npu"}, "torch.backends", backends).empty());
  const auto w = unmatched_names({"nxu"}, {"torch_fo", "zzz"}, "torch.backends", backends);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], "EPLOAD_DISABLE names 'torch_fo', which is no backend of group 'torch.backends' "
                  "(close: torch_foo, torch-foo)");
  EXPECT_EQ(w[1], "EPLOAD_DISABLE names 'zzz', which is no backend of group 'torch.backends' "
                  "(none is close; `epload devices --group torch.backends` lists them)");
  EXPECT_EQ(w[2], "EPLOAD_ENABLE names 'nxu', which is no backend of group 'torch.backends' (close: npu)");
}

TEST(LoaderModes, DisableAndEnableLists) {
  BackendEnv env;
  const std::string npu = env.add("npu_dist", "npu", "tb_npu");
  env.add("other", "other", "tb_undeclared");
  {
    ScopedEnv d("EPLOAD_DISABLE", " npu , unrelated");
    ScopedEnv e("EPLOAD_ENABLE", nullptr);
    LoaderOptions o = options_for(env);
    EXPECT_TRUE(apply_environment(o).warnings.empty());
    auto loader = make_loader(env, o);
    const std::string err = error_of(*loader, "tnpu");
    EXPECT_NE(err.find("backend 'npu'"), std::string::npos) << err;
    EXPECT_NE(err.find("disabled by EPLOAD_DISABLE"), std::string::npos) << err;
    EXPECT_NE(device_of(*loader, "tundecl"), nullptr);
    EXPECT_FALSE(mapped(npu));
    EXPECT_EQ(loader->backends()[0].state, BackendState::disabled);
    EXPECT_EQ(loader->backends()[0].disabled_by, "EPLOAD_DISABLE");  // the switch, as a field
    EXPECT_EQ(loader->backends()[1].disabled_by, "");
  }
  {
    ScopedEnv d("EPLOAD_DISABLE", nullptr);
    ScopedEnv e("EPLOAD_ENABLE", "NPU_Dist");  // a distribution name, normalized
    LoaderOptions o = options_for(env);
    EXPECT_TRUE(apply_environment(o).warnings.empty());
    auto loader = make_loader(env, o);
    EXPECT_NE(device_of(*loader, "tnpu"), nullptr);
    const std::string err = error_of(*loader, "tundecl");
    EXPECT_EQ(loader->backends()[1].state, BackendState::disabled);
    EXPECT_EQ(loader->backends()[1].disabled_by, "EPLOAD_ENABLE");
    EXPECT_EQ(loader->backends()[0].disabled_by, "");
  }
}

// ---- randomized: lazy lookups give what eager loading gives ------------------

// One lazy loader, four threads looking every device of `names` up in their
// own orders, racing for the same backends: each finds what `eager` found,
// from the same provider.
void expect_racing_lookups_agree(Loader& shared, const Loader& eager, const std::vector<const char*>& names,
                                 std::mt19937& rng) {
  std::vector<std::vector<const char*>> orders(4, names);
  for (auto& o : orders) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::vector<bool>> found(orders.size(), std::vector<bool>(names.size()));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < orders.size(); ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t k = 0; k < orders[t].size(); ++k) found[t][k] = shared.lookup(orders[t][k]).ok();
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t t = 0; t < orders.size(); ++t) {
    for (std::size_t k = 0; k < orders[t].size(); ++k) {
      const char* d = orders[t][k];
      EXPECT_EQ(found[t][k], eager.find(d) != nullptr) << "device " << d << " thread " << t;
      if (found[t][k]) {
        EXPECT_EQ(shared.provider(d), eager.provider(d)) << "device " << d;
      }
    }
  }
}

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
    // And all at once.
    auto shared = make_loader(env, options_with(LoadMode::lazy));
    expect_racing_lookups_agree(*shared, *eager, names, rng);
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

}  // namespace
}  // namespace epload
