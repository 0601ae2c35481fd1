// cache_key.cpp — which file caches which answer, and where caches live.
//
// A cache file answers for one key: the interpreter identity, the exact
// ordered search-path list, the current directory when a search path is
// relative ("" on sys.path means the current directory), and the format
// version.  The file name carries a 64-bit FNV-1a hash of the key so that a
// lookup is one open(); the full key is stored inside the file and compared
// on load, so a collision costs a rebuild, never a wrong answer.  Fields are
// length-prefixed before hashing: ["a","bc"] and ["ab","c"] hash differently.
//
// Two things would multiply the files without changing an answer, and are
// kept out of the key.  The interpreter's executable is keyed by its real
// path (a venv's `python` and `python3` are links to one file; its prefix,
// also in the key, tells venvs apart).  And the first search path, the
// working directory when sys.path comes from a run of `python -c` or a
// script ('' or the script's directory), is left out when importlib finds
// no metadata in it now (head_left_out()): every such directory then
// shares the file of the other entries, and a first query from a new
// directory costs a hit and one listing of it, not a scan.  The entry is
// listed again at every lookup (a Catalog's too: still_keyed()), so a
// dist-info that appears there is never missed; a directory that holds
// metadata is keyed, with the current directory, as any search path is.
#include <limits.h>  // PATH_MAX
#include <pwd.h>     // getpwuid_r: home directory fallback
#include <stdlib.h>  // realpath
#include <unistd.h>  // getcwd, geteuid

#include <cerrno>
#include <cstdlib>  // getenv
#include <mutex>    // the last real path
#include <vector>

#include "cache_internal.hpp"
#include "epload/profile.hpp"
#include "fnv.hpp"
#include "scan_list.hpp"

namespace epload {
namespace detail {

namespace {

std::string current_dir() {
  std::vector<char> buf(4096);
  for (;;) {
    if (::getcwd(buf.data(), buf.size()) != nullptr) return buf.data();
    if (errno != ERANGE) return {};  // deleted cwd: "" still keys consistently
    buf.resize(buf.size() * 2);
  }
}

std::string home_dir() {
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return h;
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr) {
    return found->pw_dir;
  }
  return {};
}

/// `interpreter` ("executable\0prefix\0version", as the fronts make it)
/// with its executable replaced by its real path, when it is absolute and
/// resolves.  The last answer is remembered: a process asks for one
/// interpreter, many times.
std::string real_interpreter(const std::string& interpreter) {
  const std::size_t end = interpreter.find('\0');
  const std::string exe = interpreter.substr(0, end);
  if (exe.empty() || exe.front() != '/') return interpreter;
  struct Last {
    std::mutex mutex;
    std::string in, out;
  };
  // Never destroyed: a thread may still ask while the process exits.
  static Last* const last = new Last;
  {
    std::lock_guard<std::mutex> lock(last->mutex);
    if (last->in == interpreter) return last->out;
  }
  char buf[PATH_MAX];
  std::string out = interpreter;
  if (::realpath(exe.c_str(), buf) != nullptr) out.replace(0, exe.size(), buf);
  std::lock_guard<std::mutex> lock(last->mutex);
  last->in = interpreter;
  last->out = out;
  return out;
}

}  // namespace

bool head_left_out(const std::vector<std::string>& paths) {
  if (paths.size() < 2 || paths.front().find('\0') != std::string::npos) return false;
  return metadata_in(paths.front().empty() ? "." : paths.front().c_str()) == MetadataIn::none;
}

const CacheOptions& without_head(const CacheOptions& options, CacheOptions& storage) {
  storage = options;
  if (!storage.search_paths.empty()) storage.search_paths.erase(storage.search_paths.begin());
  return storage;
}

const CacheOptions& keyed_options(const CacheOptions& options, CacheOptions& storage) {
  return head_left_out(options.search_paths) ? without_head(options, storage) : options;
}

bool still_keyed(const Index& index, const CacheOptions& options) {
  return index.search_paths().size() + 1 != options.search_paths.size() || head_left_out(options.search_paths);
}

bool is_relative(std::string_view path) { return path.empty() || path.front() != '/'; }

std::string key_cwd(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    if (is_relative(p)) return current_dir();
  }
  return {};
}

CacheKey make_key(const CacheOptions& options) {
  profile::Span span(profile::Phase::cache_key);
  CacheKey key;
  key.interpreter = real_interpreter(options.interpreter);
  key.search_paths = options.search_paths;
  key.cwd = key_cwd(options.search_paths);
  return key;
}

std::uint64_t key_hash(const CacheKey& key) {
  Fnv1a h;
  h.field("epload-index");
  h.u64(static_cast<std::uint64_t>(k_cache_format_version));
  h.u64(static_cast<std::uint64_t>(k_scanner_version));
  h.field(key.interpreter);
  h.u64(key.search_paths.size());
  for (const std::string& p : key.search_paths) h.field(p);
  h.field(key.cwd);
  return h.value;
}

std::string cache_file_name(const CacheKey& key) {
  static constexpr char k_hex[] = "0123456789abcdef";
  const std::uint64_t h = key_hash(key);
  std::string name = "index-";
  for (int shift = 60; shift >= 0; shift -= 4) name += k_hex[(h >> shift) & 0xf];
  name += ".json";
  return name;
}

std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
      // skip
    } else if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (is_relative(path)) {
        parts.push_back(part);  // a relative path keeps leading ".."
      }  // "/.." is "/"
    } else {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out;
  if (!is_relative(path)) out.push_back('/');
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (k != 0) out.push_back('/');
    out.append(parts[k]);
  }
  if (out.empty()) out.push_back('.');
  return out;
}

std::string relative_path(std::string_view path, std::string_view base) {
  auto split = [](std::string_view p) {
    std::vector<std::string_view> v;
    std::size_t i = 0;
    while (i < p.size()) {
      std::size_t j = p.find('/', i);
      if (j == std::string_view::npos) j = p.size();
      if (j > i) v.push_back(p.substr(i, j - i));
      i = j + 1;
    }
    return v;
  };
  const auto a = split(path), b = split(base);
  std::size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  std::string out;
  for (std::size_t k = common; k < b.size(); ++k) out += out.empty() ? ".." : "/..";
  for (std::size_t k = common; k < a.size(); ++k) {
    if (!out.empty()) out += '/';
    out += a[k];
  }
  return out.empty() ? "." : out;
}

std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

std::string absolute_path(std::string_view path) {
  if (!is_relative(path)) return normalize_path(path);
  return normalize_path(join_path(current_dir(), path));
}

}  // namespace detail

std::string resolve_cache_dir(const CacheOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* d = std::getenv("EPLOAD_CACHE_DIR"); d != nullptr && *d != '\0') return d;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/') {
    return detail::join_path(x, "epload");
  }
  std::string home = detail::home_dir();
  if (home.empty()) return {};  // no usable home: the caller works uncached
  return detail::join_path(detail::join_path(home, ".cache"), "epload");
}

std::string cache_file_path(const CacheOptions& requested) {
  CacheOptions storage;
  const CacheOptions& options = detail::keyed_options(requested, storage);
  const std::string dir = resolve_cache_dir(options);
  if (dir.empty()) return {};
  return detail::join_path(dir, detail::cache_file_name(detail::make_key(options)));
}

}  // namespace epload
