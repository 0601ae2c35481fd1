// resolve_test.cpp — entry point to library or module, in importlib's order.
#include "resolve.hpp"

#include <gtest/gtest.h>

#include "backend_env.hpp"
#include "cache_test_util.hpp"  // FdLimit

namespace epload::detail {
namespace {

using testing::BackendEnv;
using testing::make_dirs;
using testing::write_file;

// A host passes its interpreter's importlib.machinery.EXTENSION_SUFFIXES;
// these are CPython 3.11's on x86-64 Linux, as a sample.
ResolveOptions tagged() {
  ResolveOptions o;
  o.ext_suffixes = {".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"};
  return o;
}

Resolved resolve(const BackendEnv& env, const std::string& value, ResolveOptions o = tagged()) {
  EntryPoint ep;
  Distribution dist;
  dist.name = "d";
  ep.group = "torch.backends";
  ep.name = "x";
  ep.value = value;
  ep.dist = &dist;
  return resolve_backend(ep, env.site(), o);
}

void touch(const std::string& path, const std::string& text = "") {
  make_dirs(path.substr(0, path.rfind('/')));
  write_file(path, text);
}

TEST(Resolve, SuffixesInImportlibOrder) {
  BackendEnv env;
  const std::string lib = testing::read_file(testing::test_backend("tb_npu"));
  touch(env.site() + "/pkg/mod.so", lib);
  Resolved r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.kind, BackendKind::native);
  EXPECT_EQ(r.file, env.site() + "/pkg/mod.so");
  touch(env.site() + "/pkg/mod.abi3.so", lib);
  EXPECT_EQ(resolve(env, "pkg.mod:init").file, env.site() + "/pkg/mod.abi3.so");
  touch(env.site() + "/pkg/mod.cpython-311-x86_64-linux-gnu.so", lib);
  r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.file, env.site() + "/pkg/mod.cpython-311-x86_64-linux-gnu.so");
  EXPECT_EQ(r.symbol, "init");
  EXPECT_EQ(r.module, "pkg.mod");
  EXPECT_TRUE(r.stamp.exists());
  EXPECT_EQ(r.declared.devices, (std::vector<std::string>{"tnpu", "tnpu2"}));
  // The caller's suffix list rules.
  ResolveOptions o;
  o.ext_suffixes = {".so"};
  EXPECT_EQ(resolve(env, "pkg.mod:init", o).file, env.site() + "/pkg/mod.so");
  // Without one, no interpreter's own tag is assumed: .abi3.so, then .so.
  EXPECT_EQ(resolve(env, "pkg.mod:init", ResolveOptions{}).file, env.site() + "/pkg/mod.abi3.so");
}

TEST(Resolve, ExtensionBeatsPythonSource) {
  BackendEnv env;
  touch(env.site() + "/pkg/mod.py");
  EXPECT_EQ(resolve(env, "pkg.mod:init").kind, BackendKind::python);
  touch(env.site() + "/pkg/mod.so", testing::read_file(testing::test_backend("tb_hook")));
  Resolved r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.kind, BackendKind::native);
  EXPECT_TRUE(r.declared.has_section);
  EXPECT_TRUE(r.declared.devices.empty());
}

TEST(Resolve, OutOfDescriptorsIsNoResolution) {
  // The extension cannot be opened for want of a descriptor: taking the
  // next candidate (mod.py) would make a native backend a Python one, and
  // the learned store would remember it.
  BackendEnv env;
  touch(env.site() + "/pkg/mod.py");
  touch(env.site() + "/pkg/mod.so", testing::read_file(testing::test_backend("tb_hook")));
  Resolved r;
  {
    test::FdLimit limit(0);
    ASSERT_TRUE(limit.ok());
    r = resolve(env, "pkg.mod:init");
  }
  EXPECT_EQ(r.kind, BackendKind::unresolved);
  EXPECT_NE(r.error.find("cannot resolve module 'pkg.mod'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("Too many open files"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("ulimit -n"), std::string::npos) << r.error;
  EXPECT_EQ(resolve(env, "pkg.mod:init").kind, BackendKind::native);
}

TEST(Resolve, PythonOnlyBackends) {
  BackendEnv env;
  touch(env.site() + "/pkga/__init__.py");
  touch(env.site() + "/pkgb/sub.py");
  touch(env.site() + "/pkgc/__init__.pyc");
  EXPECT_EQ(resolve(env, "pkga:_autoload").kind, BackendKind::python);
  EXPECT_EQ(resolve(env, "pkga:_autoload").file, env.site() + "/pkga/__init__.py");
  EXPECT_EQ(resolve(env, "pkgb.sub:f").kind, BackendKind::python);
  EXPECT_EQ(resolve(env, "pkgc").kind, BackendKind::python);
  // An extension module used through a Python attribute path is Python's.
  touch(env.site() + "/ext.so", testing::read_file(testing::test_backend("tb_npu")));
  EXPECT_EQ(resolve(env, "ext:obj.method").kind, BackendKind::python);
  EXPECT_EQ(resolve(env, "ext").kind, BackendKind::python);
  EXPECT_EQ(resolve(env, "ext:tb_init").kind, BackendKind::native);
}

// importlib (FileFinder.find_spec) takes a package directory's __init__,
// with every suffix in the usual order, before any module file of the same
// name; a directory without one is passed over (a namespace portion).
TEST(Resolve, PackageInitBeatsModuleFilesAsImportlibDoes) {
  BackendEnv env;
  const std::string lib = testing::read_file(testing::test_backend("tb_npu"));
  touch(env.site() + "/pkg/mod.cpython-311-x86_64-linux-gnu.so", lib);
  touch(env.site() + "/pkg/mod.py");
  make_dirs(env.site() + "/pkg/mod");
  EXPECT_EQ(resolve(env, "pkg.mod:init").file, env.site() + "/pkg/mod.cpython-311-x86_64-linux-gnu.so");
  touch(env.site() + "/pkg/mod/__init__.pyc");
  Resolved r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.kind, BackendKind::python);
  EXPECT_EQ(r.file, env.site() + "/pkg/mod/__init__.pyc");
  touch(env.site() + "/pkg/mod/__init__.py");
  EXPECT_EQ(resolve(env, "pkg.mod:init").file, env.site() + "/pkg/mod/__init__.py");
  touch(env.site() + "/pkg/mod/__init__.abi3.so", lib);
  r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.kind, BackendKind::native);
  EXPECT_EQ(r.file, env.site() + "/pkg/mod/__init__.abi3.so");
  EXPECT_EQ(r.declared.devices, (std::vector<std::string>{"tnpu", "tnpu2"}));
}

TEST(Resolve, PythonModulesAreStampedToo) {
  BackendEnv env;
  touch(env.site() + "/pkga/__init__.py", "def _autoload(): pass\n");
  const Resolved r = resolve(env, "pkga:_autoload");
  ASSERT_EQ(r.kind, BackendKind::python);
  EXPECT_TRUE(r.stamp.exists());
  EXPECT_EQ(r.stamp.size, 22u);
}

TEST(Resolve, MissingOrMalformedIsUnresolvedWithReason) {
  BackendEnv env;
  Resolved r = resolve(env, "nothere.mod:init");
  EXPECT_EQ(r.kind, BackendKind::unresolved);
  EXPECT_NE(r.error.find("library missing"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(env.site() + "/nothere/mod.cpython-311-x86_64-linux-gnu.so"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(env.site() + "/nothere/mod.py"), std::string::npos) << r.error;
  // With a package directory, its __init__ candidates are named first.
  make_dirs(env.site() + "/nothere/mod");
  r = resolve(env, "nothere.mod:init");
  EXPECT_EQ(r.kind, BackendKind::unresolved);
  EXPECT_NE(r.error.find(env.site() + "/nothere/mod/__init__.abi3.so"), std::string::npos) << r.error;
  EXPECT_LT(r.error.find("/nothere/mod/__init__.pyc"), r.error.find("/nothere/mod.cpython")) << r.error;
  for (const char* bad : {"a..b:f", ".a:f", "a.:f", "-bad-", ""}) {
    Resolved b = resolve(env, bad);
    EXPECT_EQ(b.kind, BackendKind::unresolved) << bad;
    EXPECT_FALSE(b.error.empty()) << bad;
  }
}

TEST(Resolve, CorruptLibraryKeepsTheElfError) {
  BackendEnv env;
  touch(env.site() + "/pkg/mod.so", std::string(300, 'g'));
  Resolved r = resolve(env, "pkg.mod:init");
  EXPECT_EQ(r.kind, BackendKind::native);
  EXPECT_NE(r.elf_error.find("not an ELF file"), std::string::npos) << r.elf_error;
}

TEST(Resolve, DirectoryNamedLikeALibraryIsSkipped) {
  BackendEnv env;
  make_dirs(env.site() + "/pkg/mod.cpython-311-x86_64-linux-gnu.so");
  touch(env.site() + "/pkg/mod.so", testing::read_file(testing::test_backend("tb_npu")));
  EXPECT_EQ(resolve(env, "pkg.mod:init").file, env.site() + "/pkg/mod.so");
}

TEST(Resolve, CIdentifiers) {
  EXPECT_TRUE(is_c_identifier("tb_init"));
  EXPECT_TRUE(is_c_identifier("_x1"));
  EXPECT_FALSE(is_c_identifier("1x"));
  EXPECT_FALSE(is_c_identifier("a.b"));
  EXPECT_FALSE(is_c_identifier(""));
}

}  // namespace
}  // namespace epload::detail
