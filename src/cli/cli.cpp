// cli.cpp — shared plumbing of the `epload` command: registry, option
// scanning, resolving search paths (the interpreter's sys.path when no --path
// is given: python_memo.hpp) and opening the index through the cache.
#include "cli/cli.hpp"

#include "cli/heap_pages.hpp"
#include "cli/host_options.hpp"  // warn_switches
#include "cli/python_memo.hpp"
#include "epload/metadata.hpp"  // find_invalid_utf8
#include "epload/switches.hpp"
#include "json_text.hpp"  // append_json_escaped
#include "cache_overlap.hpp"
#include "index_provenance.hpp"

#include <unistd.h>  // getcwd

#include <cerrno>    // errno
#include <cstdio>    // fprintf, fwrite
#include <string_view>
#include <optional>  // the target's suffixes, once known

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

namespace {

/// Pops the value of an option that takes one (`--opt VALUE` or
/// `--opt=VALUE`).  `i` indexes args[i] == the option; on success advances i
/// past the value.  Returns false (after printing a usage error) when the
/// value is missing.
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

}  // namespace

const char* const k_index_options_help =
    "Index options:\n"
    "  --path DIR          search path, repeatable, in order (default: the sys.path\n"
    "                      of --python)\n"
    "  --python EXE        interpreter whose sys.path to use (default: the python\n"
    "                      beside this command, as a console script's, else python3);\n"
    "                      what it says is remembered in the cache directory\n"
    "  --cache-dir DIR     cache directory (default: $EPLOAD_CACHE_DIR, else\n"
    "                      $XDG_CACHE_HOME/epload, else ~/.cache/epload)\n"
    "  --no-cache          always scan; neither read nor write a cache\n"
    "  --validate MODE     full (default): stat search paths and metadata files;\n"
    "                      paths: stat search paths only (frozen environments)\n"
    "  --verbose           say on stderr whether the cache was used, and why not\n";

bool is_option(std::string_view arg, std::string_view option) {
  return arg == option || (arg.size() > option.size() && arg.substr(0, option.size()) == option &&
                           arg[option.size()] == '=');
}

int take_option(std::string_view command, std::vector<std::string_view>& args, std::size_t& i,
                std::string_view option, std::string& out) {
  if (!is_option(args[i], option)) return 0;
  return take_value(command, args, i, option, out) ? 1 : -1;
}

int parse_index_option(std::string_view command, std::vector<std::string_view>& args,
                       std::size_t& i, IndexOptions& options) {
  std::string_view a = args[i];
  std::string value;
  if (is_option(a, "--path")) {
    if (!take_value(command, args, i, "--path", value)) return -1;
    options.paths.push_back(value);
  } else if (is_option(a, "--python")) {
    if (!take_value(command, args, i, "--python", options.python)) return -1;
    options.python_given = true;
  } else if (is_option(a, "--cache-dir")) {
    if (!take_value(command, args, i, "--cache-dir", options.cache_dir)) return -1;
    if (options.cache_dir.empty()) return usage_error(command, "--cache-dir needs a directory"), -1;
  } else if (is_option(a, "--validate")) {
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
  options.given = true;
  return 1;
}

namespace {
// The interpreter this run targets (--python), for its extension suffixes.
FactsRequest g_target;
std::optional<std::vector<std::string>> g_ext_suffixes;  // known once asked or remembered
bool g_verbose = false;
std::string g_python_how;  // how the interpreter was chosen, for --verbose
std::shared_ptr<const Index> g_opened;  // the last index opened (or being validated)

Result<PythonFacts> target_facts() {
  if (g_verbose) std::fprintf(stderr, "epload: interpreter %s (%s)\n", g_target.python.c_str(), g_python_how.c_str());
  std::string note;
  auto facts = python_facts(g_target, note);
  if (g_verbose && !note.empty()) std::fprintf(stderr, "epload: %s\n", note.c_str());
  if (facts) g_ext_suffixes = facts.value().ext_suffixes;
  return facts;
}
}  // namespace

const std::shared_ptr<const Index>& opened_index() { return g_opened; }

const std::vector<std::string>& target_ext_suffixes() {
  if (!g_ext_suffixes) {
    if (auto facts = target_facts(); !facts) {
      // --path runs need the interpreter only for this: go on with the
      // suffixes every CPython 3 accepts.
      std::fprintf(stderr, "epload: warning: %s; resolving backends with the suffixes '.abi3.so' and '.so' only\n",
                   facts.error().message.c_str());
      g_ext_suffixes.emplace();
    }
  }
  return *g_ext_suffixes;
}

bool resolve_cache_options(const IndexOptions& options, CacheOptions& co) {
  // EPLOAD_NO_CACHE, the Python front's switch, asks for --no-cache too.
  std::vector<std::string> warnings;
  const bool no_cache = options.no_cache || read_flag("EPLOAD_NO_CACHE", false, &warnings);
  g_target.python = options.python;
  g_target.use_memo = !no_cache;
  g_python_how = options.python_given ? "--python" : own_python_reason();
  CacheOptions dir_only;
  dir_only.cache_dir = options.cache_dir;
  g_target.cache_dir = resolve_cache_dir(dir_only);
  g_verbose = options.verbose;
  if (!options.paths.empty()) {
    co.search_paths = options.paths;
  } else {
    auto facts = target_facts();
    if (!facts) {
      fail(facts.error().message);
      return false;
    }
    co.interpreter = facts.value().identity();
    co.search_paths = std::move(facts.value().sys_path);
  }
  co.cache_dir = options.cache_dir;
  co.use_cache = !no_cache;
  if (options.validation_given) {
    co.validation = options.validation;
  } else {
    co.validation = read_validation(&warnings);  // EPLOAD_VALIDATE, as in Python
  }
  warn_switches(warnings);
  co.groups = options.groups;
  return true;
}

std::shared_ptr<const Index> open_index_or_report(const IndexOptions& options, CacheOptions* used,
                                                  const PrepareFn& prepare) {
  CacheOptions co;
  if (!resolve_cache_options(options, co)) return nullptr;
  // A full scan touches megabytes of heap: huge pages pay for it
  // (heap_pages.hpp).
  if (!co.use_cache) prefer_huge_heap_pages();
  WhileValidating while_validating;
  if (prepare) {
    while_validating = [&](const std::shared_ptr<const Index>& index) {
      g_opened = index;
      prepare(co, index);
    };
  }
  CacheReport report;
  auto index = open_index(co, &report, while_validating);
  if (index) g_opened = index.value();
  // EPLOAD_DEBUG, the Python front's switch for the same report, asks for it too.
  std::vector<std::string> warnings;
  const bool debug = read_flag("EPLOAD_DEBUG", false, &warnings);
  warn_switches(warnings);
  if (options.verbose || debug) {
    std::fprintf(stderr, "epload: cache %s%s%s%s%s\n", to_string(report.status),
                 report.file.empty() ? "" : " (", report.file.c_str(), report.file.empty() ? "" : ")",
                 report.reason.empty() ? "" : (": " + report.reason).c_str());
  } else if (!report.shipped_problem.empty()) {
    // Said even unasked: EPLOAD_INDEX names a file someone meant to be used.
    std::fprintf(stderr, "epload: warning: %s; working without it (EPLOAD_INDEX)\n",
                 report.shipped_problem.c_str());
  }
  if (!options.verbose && !report.cache_dir_problem.empty()) {
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
  if (!options.paths.empty()) {
    // A --path that names nothing lists nothing, as in importlib, and
    // silently so there; asked for by name, it is most likely a typo.
    const std::shared_ptr<const Index>& ix = index.value();
    const auto paths = ix->search_paths();
    const auto stamps = search_path_stamps(*ix);
    for (std::size_t i = 0; i < paths.size() && i < stamps.size(); ++i) {
      if (!stamps[i].exists()) {
        // A relative one names a directory of the current directory: say
        // which, so that a path copied from elsewhere is seen for what it is.
        std::string where;
        if (!paths[i].starts_with('/')) {
          char cwd[4096];
          where = std::string(" in ") + (::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "the current directory") +
                  " (a relative path is taken from there: give an absolute one)";
        }
        std::fprintf(stderr, "epload: warning: search path '%.*s' does not exist%s\n",
                     static_cast<int>(paths[i].size()), paths[i].data(), where.c_str());
      }
    }
  }
  if (used) *used = std::move(co);
  return std::move(index).value();
}

void append_json_string(std::string& out, std::string_view s) {
  static const char k_hex[] = "0123456789abcdef";
  out.push_back('"');
  while (!s.empty()) {
    // Valid UTF-8 is written as it is; each byte of anything else (a path's
    // bytes) as the lone surrogate U+DC80..U+DCFF that Python's
    // surrogateescape decodes it to, so json.loads gives the str importlib has.
    const std::size_t bad = find_invalid_utf8(s);
    detail::append_json_escaped(out, s.substr(0, bad));
    if (bad == std::string_view::npos) break;
    const auto c = static_cast<unsigned char>(s[bad]);
    out += "\\udc";
    out.push_back(k_hex[c >> 4]);
    out.push_back(k_hex[c & 15]);
    s.remove_prefix(bad + 1);
  }
  out.push_back('"');
}

void keep_until_exit(std::shared_ptr<const void> object) {
  static auto* kept = new std::vector<std::shared_ptr<const void>>();  // never freed: see cli.hpp
  kept->push_back(std::move(object));
}

}  // namespace epload::cli
