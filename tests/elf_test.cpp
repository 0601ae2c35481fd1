// elf_test.cpp — reading declared devices from ELF files without loading
// them: real libraries, every malformed shape, and a fuzz of truncations and
// byte flips that must never crash.
#include "elf.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "backend_env.hpp"

namespace epload::detail {
namespace {

using testing::BackendEnv;
using testing::read_file;
using testing::test_backend;
using testing::write_file;

Result<DeclaredDevices> read_bytes(const BackendEnv& env, const std::string& bytes) {
  const std::string path = env.root() + "/lib.so";
  write_file(path, bytes);
  return read_declared_devices(path);
}

TEST(Elf, ReadsDeclaredDevicesOfARealLibrary) {
  auto r = read_declared_devices(test_backend("tb_npu"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->has_section);
  EXPECT_EQ(r->abi, 1u);
  EXPECT_EQ(r->devices, (std::vector<std::string>{"tnpu", "tnpu2"}));
}

TEST(Elf, UndeclaredLibraryHasNoSection) {
  FileStamp stamp;
  auto r = read_declared_devices(test_backend("tb_undeclared"), &stamp);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->has_section);
  EXPECT_TRUE(r->devices.empty());
  EXPECT_TRUE(stamp.exists());
  EXPECT_GT(stamp.size, 0u);
}

TEST(Elf, HookDeclaresNoDevice) {
  auto r = read_declared_devices(test_backend("tb_hook"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->has_section);
  EXPECT_EQ(r->abi, 1u);
  EXPECT_TRUE(r->devices.empty());
}

TEST(Elf, OtherAbiVersionIsReported) {
  auto r = read_declared_devices(test_backend("tb_bad_abi"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->abi, 99u);
}

TEST(Elf, CxxLibraryDeclarationWorks) {
  auto r = read_declared_devices(test_backend("tb_throw"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->devices, (std::vector<std::string>{"tthrow"}));
}

TEST(Elf, MissingFileIsNotFound) {
  auto r = read_declared_devices("/nonexistent/dir/lib.so");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::not_found);
}

TEST(Elf, MalformedFilesGiveClearErrors) {
  BackendEnv env;
  const std::string good = read_file(test_backend("tb_npu"));
  struct Case {
    std::string bytes, expect;
  };
  std::string wrong_class = good;
  wrong_class[4] = 1;  // ELFCLASS32 on a 64-bit host
  std::string bad_class = good;
  bad_class[4] = 9;
  std::string exec = good;
  exec[16] = 2;  // ET_EXEC
  std::string far_headers = good;
  for (int i = 0; i < 8; ++i) far_headers[0x28 + i] = '\x7f';  // e_shoff far away
  std::string bad_strndx = good;
  bad_strndx[0x3E] = '\xf0';
  bad_strndx[0x3F] = '\x0f';
  for (const Case& c : {Case{"", "empty"}, Case{"hello", "too short"},
                        Case{std::string(200, 'x'), "not an ELF file"},
                        Case{good.substr(0, 40), "truncated ELF header"},
                        Case{good.substr(0, 200), "outside the file"},
                        Case{wrong_class, "another machine"}, Case{bad_class, "unknown ELF class"},
                        Case{exec, "not a shared object"}, Case{far_headers, "outside the file"},
                        Case{bad_strndx, "out of range"}}) {
    auto r = read_bytes(env, c.bytes);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_EQ(r.error().code, Errc::backend);
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(env.root() + "/lib.so"), std::string::npos) << r.error().message;
  }
}

TEST(Elf, SegmentPastTheEndOfTheFileIsRefused) {
  // dlopen of such a file dies of SIGBUS; the reader must refuse it first.
  BackendEnv env;
  std::string bytes = read_file(test_backend("tb_npu"));
  const std::uint64_t phoff = static_cast<unsigned char>(bytes[0x20]);  // small, little-endian
  bool patched = false;
  for (int i = 0; i < 16 && !patched; ++i) {
    char* ph = bytes.data() + phoff + 56 * i;
    if (ph[0] == 1 && ph[1] == 0 && ph[2] == 0 && ph[3] == 0) {  // PT_LOAD
      ph[32 + 3] = 0x10;  // p_filesz += 256 MiB
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  auto r = read_bytes(env, bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("loadable segment lies outside the file"), std::string::npos)
      << r.error().message;
}

TEST(Elf, DirectoryIsNotALibrary) {
  BackendEnv env;
  auto r = read_declared_devices(env.root());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos);
}

TEST(Elf, SectionParsing) {
  using namespace std::string_literals;
  auto ok = parse_declared_section("epload-abi=1\0npu\0\0\0npu2\0npu\0"s, "f");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->devices, (std::vector<std::string>{"npu", "npu2"}));
  // A patched placeholder: the name, then NUL padding.
  auto patched = parse_declared_section("epload-abi=1\0dev0042\0\0\0\0\0\0\0\0\0"s, "f");
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(patched->devices, (std::vector<std::string>{"dev0042"}));
  // Two objects, one version: fine; two versions: an error.
  EXPECT_TRUE(parse_declared_section("epload-abi=1\0a\0epload-abi=1\0b\0"s, "f").ok());
  for (const std::string& bad : {"npu\0"s, "epload-abi=\0npu\0"s, "epload-abi=x1\0"s,
                                 "epload-abi=1\0bad name\0"s, "epload-abi=1\0a\0epload-abi=2\0"s,
                                 ""s, "\0\0"s, "epload-abi=0\0"s,
                                 "epload-abi=1\0"s + std::string(64, 'a') + "\0"s}) {
    auto r = parse_declared_section(bad, "lib.so");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("lib.so"), std::string::npos);
    }
  }
}

TEST(Elf, FuzzTruncationsAndByteFlipsNeverCrash) {
  BackendEnv env;
  const std::string good = read_file(test_backend("tb_npu"));
  std::mt19937_64 rng(20240611);
  int errors = 0, oks = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string bytes = good;
    switch (iter % 3) {
      case 0:
        bytes.resize(rng() % good.size());
        break;
      case 1:
        for (int k = 0, n = 1 + static_cast<int>(rng() % 8); k < n; ++k) {
          bytes[rng() % bytes.size()] = static_cast<char>(rng());
        }
        break;
      default:
        // Flip bytes where it hurts: the ELF header and the section headers.
        for (int k = 0; k < 3; ++k) {
          const std::size_t at = k == 0 ? rng() % 64 : bytes.size() - 1 - rng() % 2048;
          bytes[at] = static_cast<char>(rng());
        }
    }
    auto r = read_bytes(env, bytes);
    if (r.ok()) {
      ++oks;
      for (const std::string& d : r->devices) EXPECT_TRUE(valid_device_name(d)) << d;
    } else {
      ++errors;
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  EXPECT_GT(errors, 100);
  EXPECT_GT(oks, 10);
}

}  // namespace
}  // namespace epload::detail
