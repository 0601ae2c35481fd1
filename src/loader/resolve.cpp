// resolve.cpp — entry point "pkg.mod:symbol" to the library or module file.
//
// importlib's path finder looks for the last component `mod` of `pkg.mod`
// in pkg's directory in this order (FileFinder.find_spec, CPython 3.11):
//
//   1. if `pkg/mod` is a directory, the package: `pkg/mod/__init__` with
//      each suffix in turn: the extension-module suffixes (the target
//      interpreter's EXTENSION_SUFFIXES, which the caller passes), then
//      source (.py), then bytecode (.pyc);
//   2. otherwise the module: `pkg/mod` with the same suffixes in the same
//      order.
//
// We follow that order but only within the search-path directory where the
// distribution's metadata was found (where installers put its files), so
// resolving costs one system call per candidate tried and nothing else: no
// directory listing, no import.  An extension-suffix candidate is opened,
// and the descriptor is kept to fstat it (its dev+ino identify the backend,
// so one file reached by two paths is one backend) and to read its declared
// devices with pread (elf.cpp) without a second open; a source or bytecode
// candidate is stat'ed.  Every resolved file is stamped, so that the
// learned store can remember the resolution.
#include "resolve.hpp"

#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat, fstatat
#include <unistd.h>    // close

#include <cerrno>   // errno
#include <cstring>  // strerror

#include "scan_read.hpp"  // exhausted
#include "stamp.hpp"

namespace epload::detail {

namespace {

std::string join(std::string_view dir, std::string_view rel) {
  std::string out;
  if (dir.empty() || dir == ".") {
    out.assign(rel);  // "" on sys.path means the current directory
    return out;
  }
  out.reserve(dir.size() + 1 + rel.size());
  out.append(dir);
  if (out.back() != '/') out.push_back('/');
  out.append(rel);
  return out;
}

/// The stamp of `path` if it is a regular file (absent otherwise).
FileStamp file_stamp(const std::string& path) {
  const FileStamp st = stamp_at(AT_FDCWD, path.c_str());
  return S_ISREG(st.mode) ? st : FileStamp{};
}

/// "STEM.a, STEM.b, STEM.py, STEM.pyc": the candidates tried, for messages.
std::string candidates(const std::string& stem, const std::vector<std::string>& ext) {
  std::string out;
  for (const std::string& s : ext) out += stem + s + ", ";
  return out + stem + ".py, " + stem + ".pyc";
}

/// An extension-module candidate: if `path` opens as a regular file, it is
/// the module (native when the attr can be a C init function, else an
/// extension module used from Python) and `r` is filled in.  When it cannot
/// be opened for want of descriptors or memory, `r.error` says so and true
/// is returned: the next candidate would be a wrong answer (a `mod.py`
/// beside `mod.so`), and the learned store would keep it.
bool try_extension(std::string path, const ResolveOptions& options, Resolved& r) {
  // O_NONBLOCK: a FIFO with a library's name must not hang the open (it is
  // not a regular file, so it is passed over, as importlib's isfile() does).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && exhausted(errno)) {
    r.error = "cannot resolve module '" + r.module + "': opening " + path + ": " + std::strerror(errno) + "; " +
              exhausted_advice(errno);
    r.kind = BackendKind::unresolved;
    return true;
  }
  if (fd < 0) return false;  // ENOENT mostly; anything else: try the next, as importlib does
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  r.file = std::move(path);
  r.stamp = stamp_of(st);
  if (!is_c_identifier(r.symbol)) {
    // "mod:obj.method" or a module-only value: a CPython extension module
    // used from Python, not a backend.h library.
    ::close(fd);
    r.kind = BackendKind::python;
    return true;
  }
  r.kind = BackendKind::native;
  if (options.read_declared) {
    auto declared = read_declared_devices_fd(fd, static_cast<std::uint64_t>(st.st_size), r.file);
    if (declared) {
      r.declared = std::move(declared).value();
    } else {
      r.elf_error = declared.error().message;
    }
  }
  ::close(fd);
  return true;
}

}  // namespace

const std::vector<std::string>& default_ext_suffixes() {
  // No interpreter's own tag: only the target interpreter knows it (its
  // importlib.machinery.EXTENSION_SUFFIXES, which hosts pass).
  static const std::vector<std::string> k_suffixes = {".abi3.so", ".so"};
  return k_suffixes;
}

bool is_c_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

Resolved resolve_backend(const EntryPoint& ep, std::string_view search_path,
                         const ResolveOptions& options) {
  Resolved r;
  auto parts = split_value(ep.value);
  if (!parts) {
    r.error = "entry point value '" + std::string(ep.value) +
              "' is not 'module:function' (importlib cannot parse it either)";
    return r;
  }
  r.module.assign(parts->module);
  r.symbol.assign(parts->attr);
  // "pkg.mod" -> "pkg/mod"; empty components ("a..b", ".a") name nothing.
  std::string rel;
  for (std::size_t i = 0; i <= r.module.size();) {
    std::size_t j = r.module.find('.', i);
    if (j == std::string::npos) j = r.module.size();
    if (j == i) {
      r.error = "entry point value '" + std::string(ep.value) + "' has an empty module name component";
      return r;
    }
    if (!rel.empty()) rel.push_back('/');
    rel.append(r.module, i, j - i);
    i = j + 1;
  }
  const std::string base = join(search_path, rel);
  const auto& suffixes = options.ext_suffixes.empty() ? default_ext_suffixes() : options.ext_suffixes;

  // The package's __init__ first, when there is a package directory.
  const bool package = S_ISDIR(stamp_at(AT_FDCWD, base.c_str()).mode);
  const std::string init = base + "/__init__";
  for (const std::string* stem : {&init, &base}) {
    if (stem == &init && !package) continue;
    for (const std::string& suffix : suffixes) {
      if (try_extension(*stem + suffix, options, r)) return r;
    }
    for (const char* py : {".py", ".pyc"}) {
      std::string path = *stem + py;
      if (const FileStamp st = file_stamp(path); st.exists()) {
        r.kind = BackendKind::python;
        r.file = std::move(path);
        r.stamp = st;
        return r;
      }
    }
  }
  r.error = "library missing: no file for module '" + r.module + "' (tried ";
  if (package) r.error += candidates(init, suffixes) + ", ";
  r.error += candidates(base, suffixes) + ")";
  if (r.symbol.empty()) r.error += "; the value names no init function either";
  return r;
}

}  // namespace epload::detail
