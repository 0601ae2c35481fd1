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

#include <dirent.h>    // opendir: a tagged library when no interpreter is named
#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat, fstatat
#include <unistd.h>    // close

#include <cerrno>   // errno
#include <cstring>  // strerror

#include "scan_read.hpp"  // exhausted
#include "stamp.hpp"

namespace epload::detail {

namespace {

#if defined(__x86_64__)
constexpr const char* k_multiarch = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char* k_multiarch = "aarch64-linux-gnu";
#else
constexpr const char* k_multiarch = "linux-gnu";
#endif

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
  // A library exporting PyInit_<module> is a CPython extension module (a
  // Python backend whose attr happens to be a plain name); any other is a
  // backend.h library.  Its ELF section says which devices it declares.
  const std::size_t dot = r.module.rfind('.');
  const std::string python_init = "PyInit_" + r.module.substr(dot == std::string::npos ? 0 : dot + 1);
  auto declared = read_declared_devices_fd(fd, static_cast<std::uint64_t>(st.st_size), r.file, python_init);
  r.kind = BackendKind::native;
  if (!declared) {
    r.elf_error = declared.error().message;
  } else if (declared->python_module) {
    r.kind = BackendKind::python;
  } else if (options.read_declared) {
    r.declared = std::move(declared).value();
  }
  ::close(fd);
  return true;
}

/// The one file `<base>.cpython-3*-<multiarch>.so` in base's directory, or
/// "" when there is none or more than one.
std::string only_tagged(const std::string& base) {
  const std::size_t slash = base.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : base.substr(0, slash);
  const std::string stem = (slash == std::string::npos ? base : base.substr(slash + 1)) + ".cpython-3";
  const std::string tail = std::string("-") + k_multiarch + ".so";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return {};
  std::string found;
  int count = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n.size() > stem.size() + tail.size() && n.starts_with(stem) && n.ends_with(tail) && ++count == 1) {
      found = slash == std::string::npos ? std::string(n) : dir + "/" + std::string(n);
    }
  }
  ::closedir(d);
  return count == 1 ? found : std::string();
}

}  // namespace

const std::vector<std::string>& default_ext_suffixes() {
  static const std::vector<std::string> k_suffixes = {".abi3.so", ".so"};
  return k_suffixes;
}

std::vector<std::string> ext_suffixes_for(std::string_view search_path) {
  // ".../lib/python3.11/site-packages" -> ".cpython-311-x86_64-linux-gnu.so",
  // the EXT_SUFFIX of the interpreter whose directory that is.
  std::vector<std::string> out;
  for (std::size_t at = search_path.find("python3."); at != std::string_view::npos;
       at = search_path.find("python3.", at + 1)) {
    if (at > 0 && search_path[at - 1] != '/') continue;
    std::size_t end = at + 8;
    while (end < search_path.size() && search_path[end] >= '0' && search_path[end] <= '9') ++end;
    if (end == at + 8 || (end < search_path.size() && search_path[end] != '/')) continue;
    out.push_back(".cpython-3" + std::string(search_path.substr(at + 8, end - at - 8)) + "-" + k_multiarch + ".so");
    break;
  }
  for (const std::string& s : default_ext_suffixes()) out.push_back(s);
  return out;
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
  const std::vector<std::string> suffixes =
      options.ext_suffixes.empty() ? ext_suffixes_for(search_path) : options.ext_suffixes;

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
  if (options.ext_suffixes.empty()) {
    // No interpreter named: a library tagged for any CPython 3 of this
    // machine (a search path without a version, e.g. dist-packages) when it
    // is the only one.
    if (std::string tagged = only_tagged(base); !tagged.empty() && try_extension(tagged, options, r)) return r;
  }
  r.error = "library missing: no file for module '" + r.module + "' (tried ";
  if (package) r.error += candidates(init, suffixes) + ", ";
  r.error += candidates(base, suffixes) + ")";
  if (r.symbol.empty()) r.error += "; the value names no init function either";
  return r;
}

}  // namespace epload::detail
