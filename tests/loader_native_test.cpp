// loader_native_test.cpp — native backends as a vendor ships them: the file
// names setuptools and scikit-build-core produce found by default, a CPython
// extension module told from a backend.h library, lookup() error codes by
// cause, one store both fronts agree on, and a crash in init remembered by
// the next process (a real SIGSEGV in a forked child).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "backend_env.hpp"
#include "epload/loader.hpp"
#include "loader_test_util.hpp"
#include "python_front.hpp"

namespace epload {
namespace {

using testing::BackendEnv;
using testing::make_loader;
using testing::options_for;

Errc code_of(Loader& loader, std::string_view device) {
  auto r = loader.lookup(device);
  EXPECT_FALSE(r.ok()) << device;
  return r.ok() ? Errc::io : r.error().code;
}

// ---- error codes: "no backend provides it" vs "its backend failed" ----------

TEST(LoaderErrorCodes, UnknownDeviceIsNotFound) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(code_of(*loader, "nosuch"), Errc::not_found);
}

TEST(LoaderErrorCodes, InitFailureIsBackend) {
  BackendEnv env;
  env.add("flaky", "flaky", "tb_fail");
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(code_of(*loader, "tfail"), Errc::backend);
}

TEST(LoaderErrorCodes, MissingSymbolIsBackend) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu", "no_such_init");
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(code_of(*loader, "tnpu"), Errc::backend);
}

TEST(LoaderErrorCodes, MissingDependencyIsBackend) {
  BackendEnv env;
  env.add("dep", "dep", "tb_needs_dep");
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(code_of(*loader, "tdep"), Errc::backend);
}

TEST(LoaderErrorCodes, MissingLibraryIsBackend) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  testing::let_clock_tick();
  make_loader(env, options_for(env));  // remembers tnpu
  ASSERT_EQ(::unlink(lib.c_str()), 0);
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(code_of(*loader, "tnpu"), Errc::backend);
}

TEST(LoaderErrorCodes, DisabledProviderIsNotFound) {
  BackendEnv env;
  env.add("npu", "npu", "tb_npu");
  LoaderOptions o = options_for(env);
  o.disable = {"npu"};
  auto loader = make_loader(env, o);
  EXPECT_EQ(code_of(*loader, "tnpu"), Errc::not_found);
}

// ---- file names --------------------------------------------------------------

TEST(LoaderNames, FindsTheInterpretersExtensionSuffixByDefault) {
  BackendEnv env("venv/lib/python3.11/site-packages");
  env.add("npu", "npu", "tb_npu", "tb_init", ".cpython-311-x86_64-linux-gnu.so");
  auto loader = make_loader(env, options_for(env));  // no ext_suffixes: a C++ host's default
  EXPECT_EQ(loader->backends()[0].kind, BackendKind::native) << loader->backends()[0].error;
  EXPECT_NE(testing::device_of(*loader, "tnpu"), nullptr);
}

TEST(LoaderNames, FindsTheOneTaggedLibraryOnAPathWithoutAVersion) {
  BackendEnv env("usr/lib/python3/dist-packages");
  env.add("npu", "npu", "tb_npu", "tb_init", ".cpython-313-x86_64-linux-gnu.so");
  auto loader = make_loader(env, options_for(env));
  EXPECT_NE(testing::device_of(*loader, "tnpu"), nullptr);
}

TEST(LoaderNames, AbiThreeAndPlainSoStillWork) {
  BackendEnv env("venv/lib/python3.12/site-packages");
  env.add("a", "a", "tb_npu", "tb_init", ".abi3.so");
  env.add("b", "b", "tb_undeclared", "tb_init", ".so");
  auto loader = make_loader(env, options_for(env));
  EXPECT_NE(testing::device_of(*loader, "tnpu"), nullptr);
  EXPECT_NE(testing::device_of(*loader, "tundecl"), nullptr);
}

// ---- what a library is, for every front -----------------------------------------

TEST(LoaderKinds, ExtensionModuleWithPyInitIsPython) {
  BackendEnv env;
  env.add("pyext", "pyext", "tb_pyext");
  auto loader = make_loader(env, options_for(env));
  EXPECT_EQ(loader->backends()[0].kind, BackendKind::python);
  auto r = loader->load(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::unsupported);
  EXPECT_NE(r.error().message.find("it loads in Python"), std::string::npos) << r.error().message;
}

// A Python host's loader dlopens a native backend itself (its Python loader
// is never called for it), lazily, and records it as native: the C++ host
// after it agrees, and in the other order too.
TEST(LoaderKinds, PythonFrontLoadsNativeThroughDlopenAndBothFrontsAgree) {
  for (const bool python_first : {true, false}) {
    BackendEnv env;
    const std::string lib = env.add("npu", "npu", "tb_npu");
    testing::let_clock_tick();
    auto python = [&] {
      int calls = 0;
      PythonFront front;
      front.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
        ++calls;
        return PythonLoaded{};
      };
      front.start_unknown = true;
      auto r = create_loader(env.index(), options_for(env), std::move(front));
      ASSERT_TRUE(r.ok());
      Loader& l = *r.value();
      l.start();
      if (python_first) EXPECT_FALSE(testing::mapped(lib)) << "declared: not loaded at start";
      EXPECT_EQ(l.backends()[0].kind, BackendKind::native);
      EXPECT_TRUE(l.lookup("tnpu").ok());
      EXPECT_EQ(calls, 0);
    };
    auto cpp = [&] {
      auto l = make_loader(env, options_for(env));
      EXPECT_EQ(l->backends()[0].kind, BackendKind::native);
      EXPECT_NE(testing::device_of(*l, "tnpu"), nullptr);
    };
    if (python_first) {
      python();
      cpp();
    } else {
      cpp();
      python();
    }
  }
}

// In PyTorch's group a native library is not a backend of PyTorch's: lazy
// mode fails it at start without loading it, eager imports it (as PyTorch).
TEST(LoaderKinds, NativeLibraryInTorchGroupIsSkippedByThePythonFront) {
  BackendEnv env;
  const std::string lib = env.add("npu", "npu", "tb_npu");
  PythonFront front;
  int calls = 0;
  front.load = [&](const PythonBackend&) -> Result<PythonLoaded> {
    ++calls;
    return Error{Errc::backend, "ImportError: dynamic module does not define module export function"};
  };
  front.callables_only = true;
  auto lazy = create_loader(env.index(), options_for(env), front);
  ASSERT_TRUE(lazy.ok());
  lazy.value()->start();
  auto b = lazy.value()->backends()[0];
  EXPECT_EQ(b.state, BackendState::failed);
  EXPECT_NE(b.error.find("Python callables"), std::string::npos) << b.error;
  EXPECT_EQ(lazy.value()->load_order().size(), 1u);
  EXPECT_FALSE(testing::mapped(lib));
  EXPECT_EQ(calls, 0);
  auto eager = create_loader(env.index(), options_for(env, LoadMode::eager), front);
  ASSERT_TRUE(eager.ok());
  eager.value()->start();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(testing::mapped(lib));
}

// ---- a crash in init -------------------------------------------------------------

// Runs `fn` in a child; true when the child died of SIGSEGV.
template <class Fn>
bool dies_of_sigsegv(Fn&& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

TEST(LoaderCrash, CrashInInitIsRememberedAndSkippedUntilEnabledOrChanged) {
  BackendEnv env;
  const std::string lib = env.add("crash", "crash", "tb_crash");
  env.add("npu", "npu", "tb_npu");
  testing::let_clock_tick();
  ASSERT_TRUE(dies_of_sigsegv([&] { (void)make_loader(env, options_for(env))->lookup("tcrash"); }));

  // The next process: shown as crashed, with the time; lazy skips it.
  auto loader = make_loader(env, options_for(env));
  BackendStatus b = loader->backends()[0];
  EXPECT_FALSE(b.crashed_at.empty());
  EXPECT_NE(b.last_failure.find("crashed in init at " + b.crashed_at), std::string::npos) << b.last_failure;
  loader->start();
  EXPECT_EQ(loader->backends()[0].state, BackendState::failed);
  auto r = loader->lookup("tcrash");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::backend);
  EXPECT_NE(r.error().message.find("EPLOAD_ENABLE"), std::string::npos) << r.error().message;
  EXPECT_FALSE(testing::mapped(lib));
  EXPECT_NE(testing::device_of(*loader, "tnpu"), nullptr);  // the others are unharmed

  // Still remembered by the one after.
  EXPECT_FALSE(make_loader(env, options_for(env))->backends()[0].crashed_at.empty());

  // EPLOAD_ENABLE naming it tries it again (and it crashes again).
  ASSERT_TRUE(dies_of_sigsegv([&] {
    LoaderOptions o = options_for(env);
    o.enable = {"crash"};
    (void)make_loader(env, o)->lookup("tcrash");
  }));

  // New files: loaded again, and the crash is forgotten once it loads.
  testing::write_file(lib, testing::read_file(testing::test_backend("tb_crash_fixed")));
  auto fixed = make_loader(env, options_for(env));
  EXPECT_NE(testing::device_of(*fixed, "tcrash"), nullptr);
  EXPECT_TRUE(make_loader(env, options_for(env))->backends()[0].crashed_at.empty());
}

TEST(LoaderCrash, EagerModeLoadsACrashedBackendAgain) {
  BackendEnv env;
  env.add("crash", "crash", "tb_crash");
  ASSERT_TRUE(dies_of_sigsegv([&] { (void)make_loader(env, options_for(env))->lookup("tcrash"); }));
  EXPECT_TRUE(dies_of_sigsegv([&] { make_loader(env, options_for(env, LoadMode::eager))->start(); }));
}

}  // namespace
}  // namespace epload
