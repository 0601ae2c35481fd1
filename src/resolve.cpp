// resolve.cpp — entry point "pkg.mod:symbol" to the library or module file.
//
// importlib finds `pkg.mod` by asking each loader in turn for `pkg/mod` with
// its suffixes: extension modules first (EXTENSION_SUFFIXES), then source,
// then bytecode.  We follow the same order but only within the directory
// where the distribution's metadata was found (where installers put its
// files), so resolving costs one open() per suffix tried and nothing else:
// no directory listing, no import.  The first descriptor that opens is kept
// to fstat it (its dev+ino identify the backend, so one file reached by two
// paths is one backend) and to read its declared devices with pread
// (elf.cpp) without a second open.
#include "resolve.hpp"

#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat, fstatat
#include <unistd.h>    // close

#include <cerrno>  // errno

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

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const std::vector<std::string>& default_ext_suffixes() {
  static const std::vector<std::string> k_suffixes = {".cpython-311-x86_64-linux-gnu.so",
                                                      ".abi3.so", ".so"};
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

  for (const std::string& suffix : suffixes) {
    std::string path = base + suffix;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // ENOENT mostly; anything else: try the next, as importlib does
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      continue;
    }
    r.file = std::move(path);
    r.stamp = stamp_of(st);
    if (!is_c_identifier(r.symbol)) {
      // "mod:obj.method" or a module-only value: a CPython extension module
      // used from Python, not a backend.h library.
      ::close(fd);
      r.kind = BackendKind::python;
      return r;
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
    return r;
  }

  for (const char* py : {".py", ".pyc", "/__init__.py", "/__init__.pyc"}) {
    std::string path = base + py;
    if (is_file(path)) {
      r.kind = BackendKind::python;
      r.file = std::move(path);
      return r;
    }
  }
  r.error = "library missing: no file for module '" + r.module + "' (tried ";
  for (const std::string& suffix : suffixes) r.error += base + suffix + ", ";
  r.error += base + ".py, " + base + "/__init__.py)";
  if (r.symbol.empty()) r.error += "; the value names no init function either";
  return r;
}

}  // namespace epload::detail
