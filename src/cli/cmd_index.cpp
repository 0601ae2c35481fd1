// cmd_index.cpp — `epload index build|show|verify|clear|path`: manage the
// cached index for a set of search paths, and build a relocatable read-only
// index to ship with an environment (used through EPLOAD_INDEX=FILE).
#include <sys/stat.h>  // stat: does the cache directory exist
#include <unistd.h>    // rmdir

#include <cerrno>   // ENOENT
#include <cstdio>   // printf
#include <cstdlib>  // getenv
#include <map>      // group counts for `show`
#include <string>   // messages

#include "cli/cli.hpp"
#include "index_provenance.hpp"
#include "epload/scanner.hpp"

namespace epload::cli {
namespace {

const char k_help[] =
    "usage: epload index ACTION [index options] [--output FILE] [--json]\n\n"
    "Actions:\n"
    "  build     scan and (re)write the cache file for these search paths;\n"
    "            with --output FILE, write a relocatable read-only index to FILE\n"
    "            instead (ship it with the environment; use it via EPLOAD_INDEX=FILE)\n"
    "  show      summarise the index: cache file, search paths, distributions,\n"
    "            entry points per group (--json: as one JSON object)\n"
    "  verify    compare the cache file with a fresh scan; exit 1 on any difference\n"
    "  clear     delete every file epload keeps in the cache directory: index\n"
    "            caches, learned device names, remembered sys.paths, leftover\n"
    "            temporary files (files that start as epload writes them, whatever\n"
    "            their names); the default directory itself too, once empty\n"
    "  path      print the cache file used for these search paths\n";

std::shared_ptr<const Index> opened(const IndexOptions& o, CacheOptions& co) {
  return open_index_or_report(o, &co);
}

int build(const IndexOptions& options, const std::string& output) {
  IndexOptions o = options;
  if (!output.empty()) o.no_cache = true;  // a shipped index never touches the user's cache
  CacheOptions co;
  auto index = opened(o, co);
  if (!index) return k_error;
  if (!output.empty()) {
    // A shipped index holds absolute search paths only.  The sys.path of
    // `python -c` (and of a script) starts with '' (or the script's
    // directory): with PYTHONSAFEPATH=1 Python leaves it out, for this
    // command's interpreter and for every job that uses the index.
    for (std::string_view p : index->search_paths()) {
      if (!p.starts_with('/')) {
        return fail(std::string("cannot ship an index for the relative search path '") + std::string(p) + "'" +
                    (p.empty() ? " (the current directory, at the head of sys.path)" : "") +
                    (options.paths.empty() ? ": run it with PYTHONSAFEPATH=1 (Python >= 3.11; set it in every "
                                             "job's environment too), or give the jobs' search paths with --path"
                                           : ": give absolute search paths"));
      }
    }
    auto written = write_index(*index, output, /*relocatable=*/true);
    if (!written) return fail(written.error().message);
    std::printf("wrote %s (%zu distributions, %zu entry points)\n", output.c_str(),
                index->distributions().size(), index->entry_points().size());
    return k_ok;
  }
  // open_index() stored it if it was stale; store again so that `build`
  // also replaces a cache file that was valid.
  auto stored = store_index(*index, co);
  if (!stored) return fail(stored.error().message);
  std::printf("%s\n", stored.value().c_str());
  return k_ok;
}

int show(const IndexOptions& options, bool json) {
  CacheOptions co;
  auto index = opened(options, co);
  if (!index) return k_error;
  const std::size_t watched =
      watched_digest(*index) != nullptr ? watched_names(*index).size() : watched_files(*index).size();
  if (json) {
    std::string out;
    JsonObject o(out);
    o.str_or_null("cache_file", co.use_cache ? cache_file_path(co) : "");
    o.strings("search_paths", co.search_paths);  // asked for, as the text says
    o.raw("distributions", std::to_string(index->distributions().size()));
    o.raw("watched_files", std::to_string(watched));
    o.raw("entry_points", std::to_string(index->entry_points().size()));
    std::string& groups = o.member("groups");
    groups.push_back('{');
    bool first = true;
    for (auto g : index->groups()) {
      if (!first) groups.push_back(',');
      first = false;
      append_json_string(groups, g);
      groups += ':' + std::to_string(index->group(g).size());
    }
    groups.push_back('}');
    const Distribution* bad = index->first_error();
    o.str_or_null("error", bad != nullptr ? bad->error : std::string_view());
    o.close();
    out.push_back('\n');
    write_out(out);
    return k_ok;
  }
  std::printf("cache file:    %s\n", co.use_cache ? cache_file_path(co).c_str() : "(none: --no-cache)");
  // The paths asked for: the index may lack a first one that holds nothing
  // (it is then not part of the key).
  std::printf("search paths:  %zu\n", co.search_paths.size());
  for (const std::string& p : co.search_paths) {
    // '' is the current directory of the process that runs (python -c's head of sys.path).
    if (p.empty()) {
      std::printf("  '' (the current directory)\n");
    } else {
      std::printf("  %.*s\n", static_cast<int>(p.size()), p.data());
    }
  }
  std::printf("distributions: %zu\n", index->distributions().size());
  std::printf("watched files: %zu\n", watched);
  std::printf("entry points:  %zu in %zu groups\n", index->entry_points().size(), index->groups().size());
  for (auto g : index->groups()) {
    std::printf("  %6zu  %.*s\n", index->group(g).size(), static_cast<int>(g.size()), g.data());
  }
  if (const Distribution* bad = index->first_error()) {
    std::printf("error:         %.*s\n", static_cast<int>(bad->error.size()), bad->error.data());
  }
  return k_ok;
}

int verify(const IndexOptions& options) {
  CacheOptions co;
  if (!resolve_cache_options(options, co)) return k_error;
  co.use_cache = true;
  const std::string file = cache_file_path(co);
  auto cached = read_index(file);
  if (!cached) return fail(cached.error().message + "\n(run 'epload index build' to create it)");
  auto fresh = scan(co.search_paths);
  if (!fresh) return fail(fresh.error().message);
  std::string why;
  if (!same_answer(cached.value(), fresh.value(), &why)) {
    return fail("cache " + file + " differs from a fresh scan: " + why);
  }
  std::string stale;
  const bool valid = still_valid(cached.value(), co.validation, &stale);
  std::printf("%s: same answer as a fresh scan (%zu entry points)%s%s\n", file.c_str(),
              fresh->entry_points().size(), valid ? "" : "; stamps stale: ", valid ? "" : stale.c_str());
  return k_ok;
}

/// `index clear`: needs the cache directory only, so it starts no
/// interpreter and creates nothing.  The default directory (named after
/// epload) is removed too when nothing else is left in it; one given by
/// --cache-dir or EPLOAD_CACHE_DIR may be shared and stays.
int clear(const IndexOptions& options) {
  CacheOptions co;
  co.cache_dir = options.cache_dir;
  const std::string dir = resolve_cache_dir(co);
  if (dir.empty()) return fail("no cache directory: set EPLOAD_CACHE_DIR or HOME, or pass --cache-dir");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 && errno == ENOENT) {
    std::printf("no cache directory %s: nothing to remove\n", dir.c_str());
    return k_ok;
  }
  auto removed = clear_cache(co);
  if (!removed) return fail(removed.error().message);
  const char* env_dir = std::getenv("EPLOAD_CACHE_DIR");
  const bool default_dir = options.cache_dir.empty() && (env_dir == nullptr || *env_dir == '\0');
  const bool dir_removed = default_dir && ::rmdir(dir.c_str()) == 0;
  std::printf("removed %d cache file(s) from %s%s\n", removed.value(), dir.c_str(),
              dir_removed ? ", and the directory" : "");
  return k_ok;
}

int run(std::vector<std::string_view>& args) {
  if (args.empty()) return usage_error("index", "needs an action: build, show, verify, clear or path");
  const std::string action(args[0]);
  IndexOptions options;
  std::string output;
  bool json = false;
  const int scanned = scan_args("index", args, 1, options, [&](std::string_view a, std::size_t& i) {
    if (a == "--json") {
      if (action != "show") return usage_error("index", "--json goes with 'show' only"), -1;
      json = true;
      ++i;
      return 1;
    }
    if (!is_option(a, "--output")) return 0;
    if (action == "build") return take_option("index", args, i, "--output", output);
    usage_error("index", "--output goes with 'build' only");
    return -1;
  });
  if (scanned != k_ok) return scanned;
  if (action == "build") return build(options, output);
  if (action == "show") return show(options, json);
  if (action == "verify") return verify(options);
  if (action == "clear") return clear(options);
  if (action == "path") {
    CacheOptions co;  // only the key is needed: no scan
    if (!resolve_cache_options(options, co)) return k_error;
    co.use_cache = true;
    std::printf("%s\n", cache_file_path(co).c_str());
    return k_ok;
  }
  return usage_error("index", "unknown action '" + action + "' (build, show, verify, clear, path)");
}

Registration k_registration{{"index", "build, show, verify, clear or locate the cached index",
                             k_help, run}};

}  // namespace
}  // namespace epload::cli
