// loader_store_test.cpp — the learned-device store (what a later run need not
// search for, and every way it can be stale or damaged), one backend per
// file whatever the path, and Python backends.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <random>
#include <thread>
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

// ---- learned store, identity ---------------------------------

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

// A failed load is remembered with its cause for `epload devices`, and never
// keeps a later loader from trying again; a successful load clears it.
TEST(LoaderStore, LastFailureIsShownAndNeverSkipsALoad) {
  BackendEnv env;
  const std::string lib = env.add("f", "f", "tb_fail");
  testing::let_clock_tick();
  {
    auto first = make_loader(env, options_for(env));
    EXPECT_NE(error_of(*first, "tfail").find("init failed"), std::string::npos);
    EXPECT_NE(first->backend(0).last_failure.find("init failed"), std::string::npos);
  }
  {
    auto second = make_loader(env, options_for(env));
    const BackendStatus b = second->backend(0);
    EXPECT_EQ(b.state, BackendState::unloaded);  // remembered, not trusted
    EXPECT_NE(b.last_failure.find("backend 'f'"), std::string::npos) << b.last_failure;
    EXPECT_NE(b.last_failure.find("init failed"), std::string::npos) << b.last_failure;
    EXPECT_NE(error_of(*second, "tfail").find("init failed"), std::string::npos);  // tried again
    EXPECT_EQ(second->backend(0).state, BackendState::failed);
  }
  // The library fixed: it loads, and its last failure is gone from the store.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_npu")));
  testing::let_clock_tick();
  {
    auto third = make_loader(env, options_for(env));
    ASSERT_NE(device_of(*third, "tnpu"), nullptr);
    EXPECT_EQ(third->backend(0).last_failure, "");
  }
  auto fourth = make_loader(env, options_for(env));
  EXPECT_EQ(fourth->backend(0).last_failure, "");
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
      {lie.substr(0, trailer) + "1\tx.dist-info\tx\tx:y\tq\tx.so\t1:2:3:4:5:6\t1\t0\t\t\n" + lie.substr(trailer),
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
  EXPECT_TRUE(apply_environment(o).warnings.empty());
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

}  // namespace
}  // namespace epload
