// loader_python_test.cpp — the Loader with the Python front's hooks
// (src/loader/python_front.hpp): Python backends recognised, loaded through
// the Python loader, "not now" and "not there yet", eager's stop at the first
// failure, the disabling switch as a status field, and the failure wording
// the Python package shows.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "backend_env.hpp"
#include "epload/loader.hpp"
#include "epload/profile.hpp"
#include "epload/result.hpp"
#include "loader_test_util.hpp"
#include "python_front.hpp"

namespace epload {
namespace {

using testing::BackendEnv;
using testing::error_of;
using testing::make_loader;
using testing::options_for;

std::unique_ptr<Loader> make_python_loader(const BackendEnv& env, LoaderOptions o, PythonFront py) {
  auto r = create_loader(env.index(), std::move(o), std::move(py));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
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
  PythonFront py;
  py.load = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    calls.fetch_add(1);
    EXPECT_EQ(b.module, "pyback");
    EXPECT_EQ(b.attr, "_autoload");
    EXPECT_EQ(b.index, 0u);
    return PythonLoaded{{{"pydev", "attr"}, {"pu1", "privateuse1"}}, true};
  };
  {
    auto loader = make_python_loader(env, o, py);
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
  PythonFront py;
  py.start_unknown = true;
  py.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
    ++calls;
    return PythonLoaded{{{"pdev", "attr"}}, true};
  };
  for (int run = 0; run < 2; ++run) {
    auto loader = make_python_loader(env, o, py);
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

// A declared device registered with a kind beyond "attr" (a PrivateUse1
// name) is learned with it, and listed once: declared, of that kind.
TEST(LoaderPython, DeclaredDeviceLearnsItsKind) {
  BackendEnv env;
  add_python_backend(env, "pyback");
  env.add_entry_point("pyback", "pdev", "pyback", std::string(k_devices_group));
  env.add_entry_point("pyback", "adev", "pyback", std::string(k_devices_group));
  LoaderOptions o = options_for(env);
  PythonFront py;
  py.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
    return PythonLoaded{{{"pdev", "privateuse1"}, {"adev", "attr"}}, true};
  };
  {
    auto loader = make_python_loader(env, o, py);
    EXPECT_TRUE(loader->lookup("pdev").ok());
  }
  testing::let_clock_tick();
  auto listing = make_loader(env, options_for(env));
  const BackendStatus b = listing->backend(0);
  EXPECT_EQ(b.devices, (std::vector<std::string>{"pdev", "adev"}));
  EXPECT_EQ(b.sources, (std::vector<DeviceSource>{DeviceSource::declared, DeviceSource::declared}));
  EXPECT_EQ(b.kinds, (std::vector<std::string>{"privateuse1", ""}));
}

// A kind in brackets ("pyback [privateuse1]"), or after a colon
// ("pyback:attr", as a pyproject.toml must spell it), is the declared device's kind
// until a load shows what the backend registers; then only learned kinds
// count (here: it registered the device as an attribute only).
TEST(LoaderPython, DeclaredKindHoldsUntilALoadShowsOtherwise) {
  BackendEnv env;
  add_python_backend(env, "pyback");
  env.add_entry_point("pyback", "pdev", "pyback [privateuse1]", std::string(k_devices_group));
  env.add_entry_point("pyback", "adev", "pyback:attr", std::string(k_devices_group));
  {
    auto listing = make_loader(env, options_for(env));
    const BackendStatus b = listing->backend(0);
    EXPECT_EQ(b.devices, (std::vector<std::string>{"pdev", "adev"}));
    EXPECT_EQ(b.sources, (std::vector<DeviceSource>{DeviceSource::declared, DeviceSource::declared}));
    EXPECT_EQ(b.kinds, (std::vector<std::string>{"privateuse1", "attr"}));
    EXPECT_FALSE(b.devices_learned);
    EXPECT_TRUE(clash_warnings(*listing, true).empty());
  }
  PythonFront py;
  py.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
    return PythonLoaded{{{"pdev", "attr"}, {"adev", "attr"}}, true};
  };
  {
    auto loader = make_python_loader(env, options_for(env), py);
    EXPECT_TRUE(loader->lookup("pdev").ok());
  }
  testing::let_clock_tick();
  auto listing = make_loader(env, options_for(env));
  const BackendStatus b = listing->backend(0);
  EXPECT_EQ(b.devices, (std::vector<std::string>{"pdev", "adev"}));
  EXPECT_EQ(b.kinds, (std::vector<std::string>{"", ""}));
  EXPECT_TRUE(b.devices_learned);
}

// A kind it does not know is a warning naming the distribution and the
// accepted kinds; the device is declared without a kind.
TEST(LoaderPython, UnknownDeclaredKindIsAWarning) {
  BackendEnv env;
  add_python_backend(env, "pyback");
  env.add_entry_point("pyback", "gdev", "pyback [gpu]", std::string(k_devices_group));
  auto listing = make_loader(env, options_for(env));
  const BackendStatus b = listing->backend(0);
  EXPECT_EQ(b.devices, (std::vector<std::string>{"gdev"}));
  EXPECT_EQ(b.kinds, (std::vector<std::string>{""}));
  const std::vector<std::string> w = clash_warnings(*listing, false);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'pyback'"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("privateuse1, attr"), std::string::npos) << w[0];
}

// verify() stats a known backend's file: unchanged, nothing loads; changed,
// the backend is loaded now.
TEST(LoaderPython, VerifyLoadsABackendWhoseFileChanged) {
  BackendEnv env;
  const std::string file = add_python_backend(env, "pyback");
  int calls = 0;
  LoaderOptions o = options_for(env);
  PythonFront py;
  py.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
    ++calls;
    return PythonLoaded{{{"pdev", "privateuse1"}}, true};
  };
  EXPECT_TRUE(make_python_loader(env, o, py)->lookup("pdev").ok());
  testing::let_clock_tick();
  {
    auto loader = make_python_loader(env, o, py);
    EXPECT_TRUE(loader->verify(0).ok());
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(loader->backend(0).state, BackendState::unloaded);
  }
  testing::write_file(file, "def _autoload(): return 2\n");
  testing::let_clock_tick();
  auto loader = make_python_loader(env, o, py);
  EXPECT_TRUE(loader->verify(0).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(loader->backend(0).state, BackendState::ready);
  EXPECT_FALSE(loader->verify(1).ok());
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
  PythonFront py;
  py.start_unknown = true;
  py.load = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    if (b.name == "later") {
      if (later_calls.fetch_add(1) == 0) return Error{Errc::unsupported, "mid-import"};
      return PythonLoaded{{{"ldev", "attr"}}, true};
    }
    vague_calls.fetch_add(1);
    return PythonLoaded{{{"vdev", "attr"}}, false};
  };
  {
    auto loader = make_python_loader(env, o, py);
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
  auto again = make_python_loader(env, o, py);
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
  PythonFront py;
  py.stop_at_failure = true;
  py.load = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    ran.emplace_back(b.name);
    if (b.name == "b") return Error{Errc::backend, "ValueError: no"};
    return PythonLoaded{};
  };
  auto loader = make_python_loader(env, o, py);
  loader->start();
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(loader->backend(1).state, BackendState::failed);
  EXPECT_NE(loader->backend(1).error.find("ValueError: no"), std::string::npos);
  EXPECT_TRUE(loader->load(2).ok());  // asked for explicitly
  EXPECT_FALSE(loader->load(1).ok());  // sticky
}

// An interrupted load (a Python KeyboardInterrupt or SystemExit) is no
// failure: Errc::interrupted, the slot unloaded, nothing recorded for the
// store, no other backend loaded on the way out (start() and a lookup of an
// unknown name stop), and the backend loads at its next use.
TEST(LoaderPython, AnInterruptedLoadIsNoFailureAndLoadsAgain) {
  BackendEnv env;
  add_python_backend(env, "a");
  add_python_backend(env, "b");
  std::vector<std::string> ran;
  int interrupts = 2;
  LoaderOptions o = options_for(env);
  PythonFront py;
  py.start_unknown = true;
  py.load = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    ran.emplace_back(b.name);
    if (b.name == "a" && interrupts > 0) {
      --interrupts;
      return Error{Errc::interrupted, "interrupted by KeyboardInterrupt"};
    }
    return PythonLoaded{{{std::string(b.name) + "dev", "attr"}}, true};
  };
  {
    auto loader = make_python_loader(env, o, py);
    loader->start();  // a is interrupted: b does not run
    EXPECT_EQ(ran, (std::vector<std::string>{"a"}));
    EXPECT_EQ(loader->backend(0).state, BackendState::unloaded);
    EXPECT_EQ(loader->backend(0).error, "");
    EXPECT_TRUE(loader->load_order().empty());
    auto r = loader->lookup("bdev");  // an unknown name: a first, interrupted again; b not tried
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::interrupted) << r.error().message;
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "a"}));
    auto l = loader->load(0);  // a third time: it loads
    EXPECT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(loader->backend(0).state, BackendState::ready);
    loader->start();  // goes on where the interrupted start stopped
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "a", "a", "b"}));
  }
  testing::let_clock_tick();
  auto listing = make_loader(env, options_for(env));
  EXPECT_EQ(listing->backend(0).last_failure, "");
  EXPECT_EQ(listing->backend(0).devices, (std::vector<std::string>{"adev"}));
}

// A lookup of a device no backend is known to provide, made from inside a
// Python backend's load (a host's hasattr probe), is "not there yet"
// (Errc::unsupported) and loads no other backend in the middle of this one;
// a known device is still loaded; after the load, the same lookup searches.
TEST(LoaderPython, LookupFromInsideAPythonLoadIsNotThereYet) {
  BackendEnv env;
  add_python_backend(env, "first");
  add_python_backend(env, "second");
  env.add_entry_point("second", "sdev", "second", std::string(k_devices_group));
  Loader* self = nullptr;
  std::vector<std::string> ran;
  Result<void*> inside_unknown = nullptr, inside_known = nullptr;
  PythonFront py;
  py.load = [&](const PythonBackend& b) -> Result<PythonLoaded> {
    ran.emplace_back(b.name);
    if (b.name == "first") {
      EXPECT_TRUE(in_python_load());
      inside_unknown = self->lookup("nowhere");
      inside_known = self->lookup("sdev");
      return PythonLoaded{{{"fdev", "attr"}}, true};
    }
    return PythonLoaded{{{"sdev", "attr"}}, true};
  };
  auto loader = make_python_loader(env, options_for(env), py);
  self = loader.get();
  ASSERT_TRUE(loader->load(0).ok());
  EXPECT_FALSE(in_python_load());
  ASSERT_FALSE(inside_unknown.ok());
  EXPECT_EQ(inside_unknown.error().code, Errc::unsupported);
  EXPECT_NE(inside_unknown.error().message.find("not there yet"), std::string::npos)
      << inside_unknown.error().message;
  EXPECT_TRUE(inside_known.ok());  // its provider is known: loaded
  EXPECT_EQ(ran, (std::vector<std::string>{"first", "second"}));
  auto after = loader->lookup("nowhere");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, Errc::not_found);
}

// The failure the Python package shows is worded here, once: with and without
// the device asked for, for torch's group and for another one.
TEST(LoaderPython, FailureMessageWording) {
  FailureText t;
  t.group = "torch.backends";
  t.group_repr = "'torch.backends'";
  t.name = "torch_npu";
  t.value_repr = "'torch_npu:_autoload'";
  t.dist_path = "/site/torch_npu-2.5.dist-info";
  t.cause = "ImportError: libascend.so: cannot open shared object file";
  t.device_repr = "'npu'";
  t.host_repr = "'torch'";
  EXPECT_EQ(failure_message(t),
            "Device 'npu' of module 'torch' is unavailable: Failed to load the backend extension: torch_npu "
            "('torch_npu:_autoload' from /site/torch_npu-2.5.dist-info): ImportError: libascend.so: cannot open "
            "shared object file. You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0, "
            "or this backend alone with EPLOAD_DISABLE=torch_npu.");
  t.group = "my.group";
  t.group_repr = "'my.group'";
  t.value_repr = t.dist_path = t.device_repr = t.host_repr = "";
  EXPECT_EQ(failure_message(t),
            "Failed to load the backend extension: torch_npu: ImportError: libascend.so: cannot open shared "
            "object file. You can disable autoloading of 'my.group' with EPLOAD_AUTOLOAD=0, or this backend "
            "alone with EPLOAD_DISABLE=torch_npu.");
  EXPECT_EQ(pytorch_failure_message("torch.backends", "x"),
            "Failed to load the backend extension: x. You can disable extension auto-loading with "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0.");
  EXPECT_EQ(pytorch_failure_message("my.group", "x"),
            "Failed to load the backend extension: x. You can disable extension auto-loading with "
            "EPLOAD_AUTOLOAD=0.");
}

}  // namespace
}  // namespace epload
