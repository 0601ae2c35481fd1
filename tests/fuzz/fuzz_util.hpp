// fuzz_util.hpp — what the fuzz targets share: an input as an open file
// (memfd) or as a file in a private temporary directory, and a check that a
// view lies in readable memory.
#pragma once

#include <fcntl.h>     // open
#include <sys/mman.h>  // memfd_create
#include <unistd.h>    // write, close, unlink

#include <cstdint>
#include <cstdio>   // fprintf
#include <cstdlib>  // abort, getenv
#include <string>
#include <string_view>
#include <vector>

namespace epload::fuzz {

/// Stops the process with a message: a broken invariant is a finding.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

inline void check(bool ok, const char* what) {
  if (!ok) fail(what);
}

/// Reads every byte of `v` (ASan reports a view into freed or foreign
/// memory); the sum is returned so that the reads are not optimised away.
/// True when `part` is empty or lies within `whole` (a view the parser
/// promised to take from its input).
inline bool inside(std::string_view part, std::string_view whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

inline unsigned touch(std::string_view v) {
  unsigned sum = 0;
  for (const char c : v) sum += static_cast<unsigned char>(c);
  return sum;
}

/// An anonymous regular file holding `data` (read with pread/fstat like a
/// file on disk), closed on destruction.
class MemFile {
 public:
  MemFile(const std::uint8_t* data, std::size_t size) {
    m_fd = ::memfd_create("epload-fuzz", MFD_CLOEXEC);
    if (m_fd < 0) fail("memfd_create");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(m_fd, data + done, size - done);
      if (n <= 0) fail("write to memfd");
      done += static_cast<std::size_t>(n);
    }
  }
  ~MemFile() { ::close(m_fd); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  int fd() const { return m_fd; }

 private:
  int m_fd = -1;
};

/// A private directory (mode 0700) for the whole process, removed at exit
/// with the files made by temp_file().
class TempDir {
 public:
  static TempDir& get() {
    static TempDir dir;
    return dir;
  }
  const std::string& path() const { return m_path; }

  /// Writes `data` to `name` in the directory, mode 0600 (the readers
  /// refuse files others can write), replacing it; returns the path.
  std::string write(const char* name, const std::uint8_t* data, std::size_t size) {
    const std::string path = file(name);
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail("create temp file");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) fail("write temp file");
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return path;
  }

  /// The path of `name` in the directory (removed at exit if it exists).
  std::string file(const char* name) {
    remember(name);
    return m_path + "/" + name;
  }

 private:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/epload-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp");
    m_path = tmpl;
  }
  ~TempDir() { remove_all(); }  // at exit (a function-local static)
  void remember(const char* name) {
    for (const std::string& n : m_names) {
      if (n == name) return;
    }
    m_names.emplace_back(name);
  }
  void remove_all() {
    for (const std::string& n : m_names) ::unlink((m_path + "/" + n).c_str());
    ::rmdir(m_path.c_str());
  }
  std::string m_path;
  std::vector<std::string> m_names;
};

}  // namespace epload::fuzz
