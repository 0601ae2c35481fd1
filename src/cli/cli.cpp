// cli.cpp — shared plumbing of the `epload` command: registry, option
// scanning, resolving search paths (asking the interpreter for sys.path when
// no --path is given) and opening the index through the cache.
#include "cli/cli.hpp"

#include "cli/heap_pages.hpp"
#include "cli/host_options.hpp"  // warn_switches
#include "epload/switches.hpp"

#include <spawn.h>     // posix_spawnp: ask the interpreter for sys.path
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // pipe, read, close

#include <cerrno>   // errno
#include <cstdio>   // fprintf, fwrite
#include <cstring>  // strerror

extern char** environ;

namespace epload::cli {

namespace {
std::vector<Command>& registry() {
  // Function-local: no init-order hazard.  Room for every command at once,
  // so that registering allocates once.
  static std::vector<Command> commands = [] {
    std::vector<Command> v;
    v.reserve(8);
    return v;
  }();
  return commands;
}
}  // namespace

Registration::Registration(Command command) { registry().push_back(command); }
const std::vector<Command>& commands() { return registry(); }

int usage_error(std::string_view command, std::string_view message) {
  std::fprintf(stderr, "epload %.*s: %.*s\nTry 'epload %.*s --help'.\n",
               static_cast<int>(command.size()), command.data(), static_cast<int>(message.size()),
               message.data(), static_cast<int>(command.size()), command.data());
  return k_usage;
}

int fail(std::string_view message) {
  std::fprintf(stderr, "epload: %.*s\n", static_cast<int>(message.size()), message.data());
  return k_error;
}

namespace {
int g_write_out_errno = 0;
}  // namespace

void write_out(std::string_view data) {
  errno = 0;
  if (std::fwrite(data.data(), 1, data.size(), stdout) != data.size() && g_write_out_errno == 0) {
    g_write_out_errno = errno != 0 ? errno : EIO;
  }
}

int write_out_errno() { return g_write_out_errno; }

bool take_value(std::string_view command, std::vector<std::string_view>& args, std::size_t& i,
                std::string_view option, std::string& out) {
  std::string_view a = args[i];
  if (a.size() > option.size() && a.substr(0, option.size()) == option && a[option.size()] == '=') {
    out.assign(a.substr(option.size() + 1));
    ++i;
    return true;
  }
  if (i + 1 >= args.size()) {
    usage_error(command, std::string(option) + " needs a value");
    return false;
  }
  out.assign(args[i + 1]);
  i += 2;
  return true;
}

const char* const k_index_options_help =
    "Index options:\n"
    "  --path DIR          search path, repeatable, in order (default: the sys.path\n"
    "                      of --python)\n"
    "  --python EXE        interpreter whose sys.path to use (default: python3)\n"
    "  --cache-dir DIR     cache directory (default: $EPLOAD_CACHE_DIR, else\n"
    "                      $XDG_CACHE_HOME/epload, else ~/.cache/epload)\n"
    "  --no-cache          always scan; neither read nor write a cache\n"
    "  --validate MODE     full (default): stat search paths and metadata files;\n"
    "                      paths: stat search paths only (frozen environments)\n"
    "  --verbose           say on stderr whether the cache was used, and why not\n";

namespace {
bool matches(std::string_view arg, std::string_view option) {
  return arg == option || (arg.size() > option.size() && arg.substr(0, option.size()) == option &&
                           arg[option.size()] == '=');
}
}  // namespace

int parse_index_option(std::string_view command, std::vector<std::string_view>& args,
                       std::size_t& i, IndexOptions& options) {
  std::string_view a = args[i];
  std::string value;
  if (matches(a, "--path")) {
    if (!take_value(command, args, i, "--path", value)) return -1;
    options.paths.push_back(value);
  } else if (matches(a, "--python")) {
    if (!take_value(command, args, i, "--python", options.python)) return -1;
  } else if (matches(a, "--cache-dir")) {
    if (!take_value(command, args, i, "--cache-dir", options.cache_dir)) return -1;
    if (options.cache_dir.empty()) return usage_error(command, "--cache-dir needs a directory"), -1;
  } else if (matches(a, "--validate")) {
    if (!take_value(command, args, i, "--validate", value)) return -1;
    options.validation_given = true;
    if (value == "full") {
      options.validation = Validation::full;
    } else if (value == "paths") {
      options.validation = Validation::paths;
    } else {
      usage_error(command, "--validate takes 'full' or 'paths', not '" + value + "'");
      return -1;
    }
  } else if (a == "--no-cache") {
    options.no_cache = true;
    ++i;
  } else if (a == "--verbose" || a == "-v") {
    options.verbose = true;
    ++i;
  } else {
    return 0;
  }
  return 1;
}

namespace {

// Runs `python -c PROGRAM` and returns its stdout: the executable, prefix,
// version and every sys.path entry, NUL-separated (paths are bytes on Linux,
// so no text encoding can mangle them).
Result<std::vector<std::string>> ask_interpreter(const std::string& python) {
  static const char* const k_program =
      "import os, sys\n"
      "sys.stdout.buffer.write(b'\\0'.join(os.fsencode(p) for p in "
      "[sys.executable, sys.prefix, sys.version] + sys.path))\n";
  int fds[2];
  if (::pipe(fds) != 0) return Error{Errc::io, std::string("pipe: ") + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  const char* argv[] = {python.c_str(), "-c", k_program, nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, python.c_str(), &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return Error{Errc::not_found, "cannot run interpreter '" + python + "': " + std::strerror(rc) +
                                      " (pass --python EXE, or give the search paths with --path)"};
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error{Errc::io, "interpreter '" + python + "' failed to report its sys.path (exit status " +
                               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")"};
  }
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= out.size(); ++i) {
    if (i == out.size() || out[i] == '\0') {
      fields.emplace_back(out, start, i - start);
      start = i + 1;
    }
  }
  if (fields.size() < 3) return Error{Errc::io, "interpreter '" + python + "' gave no sys.path"};
  return fields;
}

const char* status_name(CacheStatus s) {
  switch (s) {
    case CacheStatus::hit: return "cache hit";
    case CacheStatus::rebuilt: return "cache rebuilt";
    case CacheStatus::uncached: return "uncached";
    case CacheStatus::shipped: return "shipped index";
  }
  return "?";
}

}  // namespace

bool resolve_cache_options(const IndexOptions& options, CacheOptions& co) {
  if (!options.paths.empty()) {
    co.search_paths = options.paths;
  } else {
    auto fields = ask_interpreter(options.python);
    if (!fields) {
      fail(fields.error().message);
      return false;
    }
    auto& f = fields.value();
    co.interpreter = f[0] + '\0' + f[1] + '\0' + f[2];
    co.search_paths.assign(f.begin() + 3, f.end());
  }
  co.cache_dir = options.cache_dir;
  co.use_cache = !options.no_cache;
  if (options.validation_given) {
    co.validation = options.validation;
  } else {
    std::vector<std::string> warnings;
    co.validation = read_validation(&warnings);  // EPLOAD_VALIDATE, as in Python
    warn_switches(warnings);
  }
  co.groups = options.groups;
  co.map_files = true;  // a short-lived process (CacheOptions::map_files)
  return true;
}

std::shared_ptr<const Index> open_index_or_report(const IndexOptions& options, CacheOptions* used,
                                                  const PrepareFn& prepare) {
  CacheOptions co;
  if (!resolve_cache_options(options, co)) return nullptr;
  // A full scan touches megabytes of heap: huge pages pay for it even
  // where a fault is cheap (heap_pages.hpp).
  if (!co.use_cache) prefer_huge_heap_pages(/*big_run=*/true);
  if (prepare) {
    co.while_validating = [&](const std::shared_ptr<const Index>& index) { prepare(co, index); };
  }
  CacheReport report;
  auto index = open_index(co, &report);
  if (options.verbose) {
    std::fprintf(stderr, "epload: %s%s%s%s%s\n", status_name(report.status),
                 report.file.empty() ? "" : " (", report.file.c_str(), report.file.empty() ? "" : ")",
                 report.reason.empty() ? "" : (": " + report.reason).c_str());
  } else if (!report.cache_dir_problem.empty()) {
    // Said even unasked: every run will scan until it is fixed.
    std::fprintf(stderr,
                 "epload: warning: the index was not cached (%s); working uncached, every run "
                 "scans (set --cache-dir or EPLOAD_CACHE_DIR to a usable directory, or pass "
                 "--no-cache)\n",
                 report.cache_dir_problem.c_str());
  }
  if (!index) {
    fail(index.error().message);
    return nullptr;
  }
  co.while_validating = nullptr;  // it refers to this frame
  if (!options.paths.empty()) {
    // A --path that names nothing lists nothing, as in importlib, and
    // silently so there; asked for by name, it is most likely a typo.
    const std::shared_ptr<const Index>& ix = index.value();
    const auto paths = ix->search_paths();
    const auto stamps = ix->search_path_stamps();
    for (std::size_t i = 0; i < paths.size() && i < stamps.size(); ++i) {
      if (!stamps[i].exists()) {
        std::fprintf(stderr, "epload: warning: search path '%.*s' does not exist\n",
                     static_cast<int>(paths[i].size()), paths[i].data());
      }
    }
  }
  if (used) *used = std::move(co);
  return std::move(index).value();
}

void append_json_string(std::string& out, std::string_view s) {
  static const char k_hex[] = "0123456789abcdef";
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out.push_back(k_hex[c >> 4]);
          out.push_back(k_hex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void keep_until_exit(std::shared_ptr<const void> object) {
  static auto* kept = new std::vector<std::shared_ptr<const void>>();  // never freed: see cli.hpp
  kept->push_back(std::move(object));
}

}  // namespace epload::cli
