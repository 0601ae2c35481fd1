// cmd_profile.cpp — `epload profile`: where start-up time goes.
//
// Two forms:
//   epload profile [index options] [--device DEV]... [--mode M] ...
//       runs the host path natively with the profiler on — ask the
//       interpreter for sys.path, open the index (cache key, validation,
//       read, parse, or a scan), create the loader, start it, look the
//       devices up — and prints the steps, the phases (self time: a span's
//       duration minus its nested spans), the backends loaded (costliest
//       first) and what eager loading would have cost for the rest.  That
//       last figure is measured, not guessed: after the report, a child
//       `epload profile --mode eager` loads every backend, and the loads of
//       the backends this run did not load are summed from its trace.
//   epload profile [--trace FILE] ... -- COMMAND ARGS...
//       runs COMMAND with EPLOAD_TRACE=<tmp>/trace-%p.json, so every process
//       it starts that uses epload (Python programs through the epload
//       module, epload commands, C++ hosts) writes its own trace, and every
//       Python process of an environment with epload installed records its
//       module imports (the .pth hook); merges them and prints the same
//       tables, the slowest imports and the imports each backend's load
//       caused.
//
// --trace writes the (merged) Chrome trace; --plot draws it with the
// package's plot module (epload/profile_plot.py, matplotlib), run by the
// Python of this executable's environment.  Spans come from the core's
// instrumentation (epload/profile.hpp); this file drives the first form and
// parses the arguments, profile_command.cpp runs the second, and
// profile_common.cpp holds what both print and write.
#include <fcntl.h>   // open /dev/null
#include <unistd.h>  // close

#include <algorithm>      // sort
#include <map>            // resolve times
#include <string>         // output
#include <unordered_set>  // loaded set
#include <vector>         // arguments

#include "cli/cli.hpp"
#include "cli/host_options.hpp"
#include "cli/profile_common.hpp"
#include "elf.hpp"  // device_name_problem
#include "epload/loader.hpp"
#include "epload/profile.hpp"

namespace epload::cli {
namespace {

using namespace profiling;

const char k_help[] =
    "usage: epload profile [index options] [--group G] [--device DEV]... [--mode lazy|eager]\n"
    "                      [--trace FILE] [--plot FILE.png] [--json] [--no-estimate]\n"
    "       epload profile [--trace FILE] [--plot FILE.png] [--json] [--eager-estimate]\n"
    "                      -- COMMAND [ARGS...]\n\n"
    "Shows where start-up time goes.  The first form runs what a host does, natively,\n"
    "with the profiler on: find the search paths (asking --python), open the index,\n"
    "create the loader, start it and look up each DEV.  It prints the time of each\n"
    "step, of each phase (cache_key, stat, read, parse, scan, resolve, dlopen, init;\n"
    "self time, nested spans excluded), the system calls counted (stat, open, read,\n"
    "readdir), the backends loaded with their resolve / dlopen / init / whole-load\n"
    "times (costliest first), and what eager loading would have cost for the backends\n"
    "that were not loaded: measured after the report by a child process that loads\n"
    "them all (epload profile --mode eager), unless --no-estimate.\n\n"
    "The second form runs COMMAND with EPLOAD_TRACE set: each Python process of it\n"
    "whose environment has epload installed records every module import (nested,\n"
    "with start times), and each process that uses epload records its discovery and\n"
    "each backend's load (for PyTorch: EPLOAD_AUTOLOAD_HOSTS=torch); processes it\n"
    "starts (subprocess, multiprocessing) are traced too.  The traces are merged and\n"
    "the report adds the slowest imports by self and by cumulative time and the\n"
    "imports each backend's load caused.  Python backends show py_import and py_call\n"
    "instead of dlopen/init.  COMMAND's exit status is passed through (128+N when\n"
    "signal N killed it; 127 when it is not found, 126 when it cannot be executed).\n"
    "Cost: the import hook adds two clock reads per module imported; the trace is\n"
    "written at exit.  Measured against the command alone (interleaved rounds,\n"
    "medians, a loaded machine): `import torch` 0.89x, a start-up importing asyncio,\n"
    "email, json, decimal and unittest 1.01x (per-round ratios' median 1.13x): within\n"
    "the noise (docs/profile.md, scripts/profile_cost.py).\n\n"
    "Options:\n"
    "  --group G           the autoload group (default: torch.backends)\n"
    "  --device DEV        look DEV up after start (repeatable)\n"
    "  --mode MODE         lazy (default), eager or off; overrides EPLOAD_MODE\n"
    "  --trace FILE        write the Chrome trace-event JSON (Perfetto, chrome://tracing)\n"
    "  --plot FILE.png     draw each process's start-up and the slowest imports, and\n"
    "                      write FILE.plot.json, what the picture draws (python -m\n"
    "                      epload.profile_plot; needs matplotlib in the Python of\n"
    "                      epload's environment; EPLOAD_PLOT_PYTHON picks another)\n"
    "  --json              print the report as JSON (COMMAND's stdout goes to stderr)\n"
    "  --no-estimate       skip the eager-loading measurement (first form)\n"
    "  --eager-estimate    run COMMAND a second time with EPLOAD_MODE=eager and\n"
    "                      report what the backends it loaded in addition cost\n"
    "                      (second form; runs it twice!)\n\n"
    "EPLOAD_TRACE=FILE records the same trace from any program using epload without\n"
    "this command; \"%p\" in FILE becomes the process id.\n"
    "Exit status: 1 when a DEV cannot be loaded or the trace/plot cannot be written\n"
    "(the report is printed and the trace written all the same).\n";

// ---- first form: the host path, natively ----------------------------------------

// The index options again, for the eager child.
std::vector<std::string> index_args(const IndexOptions& o) {
  std::vector<std::string> a;
  for (const std::string& p : o.paths) a.insert(a.end(), {"--path", p});
  if (o.paths.empty()) a.insert(a.end(), {"--python", o.python});
  if (!o.cache_dir.empty()) a.insert(a.end(), {"--cache-dir", o.cache_dir});
  if (o.no_cache) a.push_back("--no-cache");
  if (o.validation_given) a.insert(a.end(), {"--validate", o.validation == Validation::paths ? "paths" : "full"});
  return a;
}

// What eager loading adds: a child `epload profile --mode eager` loads every
// backend; the loads of `missing` are summed from its trace.
Estimate measure_eager(const Options& o, const std::unordered_set<std::string>& missing) {
  Estimate e;
  TempDir tmp;
  if (tmp.path.empty()) {
    e.error = "cannot create a temporary directory";
    return e;
  }
  const std::string trace = tmp.path + "/trace-eager.json";
  std::vector<std::string> argv = {self_exe(), "profile"};
  for (const std::string& a : index_args(o.index)) argv.push_back(a);
  argv.insert(argv.end(), {"--group", o.group, "--mode", "eager", "--no-estimate", "--trace", trace});
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  // The child must not append to a trace the user asked for with EPLOAD_TRACE.
  std::vector<std::string> env;
  for (const std::string& kv : environment_with({})) {
    if (!kv.starts_with("EPLOAD_TRACE=")) env.push_back(kv);
  }
  const int rc = run_process(argv, env, null_fd, e.error);
  if (null_fd >= 0) ::close(null_fd);
  if (rc != 0) {
    if (rc > 0) e.error = "the eager child (epload profile --mode eager) exited with status " + std::to_string(rc);
    return e;
  }
  auto t = prof::read_trace(trace);
  if (!t) {
    e.error = t.error().message;
    return e;
  }
  for (const prof::Event& ev : t->events) {
    if (ev.phase == prof::Phase::total && ev.subject == "loader start") e.eager_ns += ev.dur_ns;
  }
  for (const prof::BackendTotal& b : prof::summarize(t->events).backends) {
    if (missing.count(b.name) != 0) {
      ++e.backends;
      e.extra_ns += b.load_ns;
    }
  }
  e.ran = true;
  return e;
}

// One --device lookup.
struct Lookup {
  std::string device;
  bool ok = false;
  std::string backend, error;
  std::int64_t ns = 0;
};

// What the host path did: the clock after each step, the cache outcome,
// the loader and the lookups.
struct HostRun {
  std::int64_t t0 = 0, t_paths = 0, t_index = 0, t_create = 0, t_start = 0, t_end = 0;
  CacheReport report;
  std::shared_ptr<const Index> index;
  std::unique_ptr<Loader> loader;
  std::vector<Lookup> lookups;
};

// Runs the host path under one `total` span: search paths, open the index,
// create the loader, start it, look each --device up.  k_ok, or k_error
// after the message.
int run_host_path(const Options& o, HostRun& r) {
  r.t0 = prof::now_ns();
  prof::Span whole(prof::Phase::total, "epload profile");
  CacheOptions co;
  {
    // The interpreter's answer is part of the cache key; asking costs a
    // Python start-up, which every `epload` command without --path pays.
    prof::Span span(prof::Phase::cache_key, o.index.paths.empty() ? "sys.path of " + o.index.python : "");
    if (!resolve_cache_options(o.index, co)) return k_error;
  }
  co.groups = {o.group, std::string(k_devices_group)};  // the loader needs these only
  r.t_paths = prof::now_ns();
  auto opened = open_index(co, &r.report);
  if (!opened) return fail(opened.error().message);
  r.index = std::move(opened).value();
  r.t_index = prof::now_ns();
  auto lo = host_loader_options(co, o.group, o.mode_text);
  if (!lo) return fail(lo.error().message);
  auto created = Loader::create(r.index, std::move(lo).value());
  if (!created) return fail(created.error().message);
  r.loader = std::move(created).value();
  r.t_create = prof::now_ns();
  r.loader->start();
  r.t_start = prof::now_ns();
  for (const std::string& d : o.devices) {
    Lookup l;
    l.device = d;
    const std::int64_t t = prof::now_ns();
    {
      prof::Span span(prof::Phase::total, "lookup " + d);
      auto found = r.loader->lookup(d);
      l.ok = found.ok();
      if (!found) l.error = found.error().message;
    }
    l.ns = prof::now_ns() - t;
    r.lookups.push_back(std::move(l));
  }
  r.t_end = prof::now_ns();
  return k_ok;
}

// The recorded spans and the loader's backends, sorted for the report.
struct Findings {
  std::vector<prof::Event> events;
  prof::Summary summary;
  std::uint64_t counters[static_cast<int>(prof::Counter::count_)] = {};
  std::vector<BackendStatus> backends;
  std::map<std::string, std::int64_t> resolve_ns;  ///< per backend resolved, loaded or not
  std::vector<std::size_t> loaded;                 ///< costliest first
  std::unordered_set<std::string> missing;         ///< loadable natively, not loaded
  std::size_t python_backends = 0, unavailable = 0;

  std::int64_t resolve_of(const std::string& backend) const {
    auto it = resolve_ns.find(backend);
    return it == resolve_ns.end() ? 0 : it->second;
  }
};

// Reads the profiler's record and sorts the backends into loaded (costliest
// first), loadable but not loaded, Python, and unavailable.  Names each
// lookup's backend.
Findings gather(HostRun& r) {
  Findings f;
  f.events = prof::events();
  f.summary = prof::summarize(f.events);
  for (int k = 0; k < static_cast<int>(prof::Counter::count_); ++k) f.counters[k] = prof::counter(static_cast<prof::Counter>(k));
  f.backends = r.loader->backends();
  const auto order = r.loader->load_order();
  for (Lookup& l : r.lookups) {
    for (const DeviceStatus& d : r.loader->devices()) {
      if (d.name == l.device && d.ready) l.backend = f.backends[d.backend].name;
    }
  }
  for (const prof::Event& e : f.events) {
    if (e.phase == prof::Phase::resolve) f.resolve_ns[e.subject] += e.dur_ns;
  }
  f.loaded.assign(order.begin(), order.end());
  std::stable_sort(f.loaded.begin(), f.loaded.end(),
                   [&](std::size_t a, std::size_t b) { return f.backends[a].load_ns > f.backends[b].load_ns; });
  std::unordered_set<std::string> in_order;
  for (std::size_t k : order) in_order.insert(f.backends[k].name);
  for (const BackendStatus& b : f.backends) {
    if (in_order.count(b.name) != 0) continue;
    if (b.kind == BackendKind::python) {
      ++f.python_backends;
    } else if (b.kind == BackendKind::native && b.state == BackendState::unloaded && b.alias_of.empty()) {
      f.missing.insert(b.name);
    } else {
      ++f.unavailable;
    }
  }
  return f;
}

const char* cache_outcome(const CacheReport& report) {
  return report.status == CacheStatus::hit       ? "cache hit"
         : report.status == CacheStatus::rebuilt ? "cache rebuilt (scanned)"
         : report.status == CacheStatus::refreshed ? "cache refreshed (what changed was read)"
         : report.status == CacheStatus::shipped ? "shipped index"
                                                 : "uncached (scanned)";
}

std::string native_json(const Options& o, const HostRun& r, const Findings& f, const Estimate& est) {
  std::string out;
  JsonObject top(out);
  top.str("mode", to_string(r.loader->mode())).str("group", o.group).raw("backends", std::to_string(f.backends.size()));
  JsonObject(top.member("index"))
      .str("status", cache_outcome(r.report))
      .str("file", r.report.file)
      .str("reason", r.report.reason)
      .close();
  JsonObject(top.member("steps"))
      .raw("search_paths_us", us(r.t_paths - r.t0))
      .raw("index_us", us(r.t_index - r.t_paths))
      .raw("loader_us", us(r.t_create - r.t_index))
      .raw("start_us", us(r.t_start - r.t_create))
      .raw("lookups_us", us(r.t_end - r.t_start))
      .raw("total_us", us(r.t_end - r.t0))
      .close();
  top.member("lookups") += '[';
  for (std::size_t k = 0; k < r.lookups.size(); ++k) {
    const Lookup& l = r.lookups[k];
    if (k) out += ',';
    JsonObject(out)
        .str("device", l.device)
        .boolean("ok", l.ok)
        .str_or_null("backend", l.backend)
        .raw("us", us(l.ns))
        .str_or_null("error", l.ok ? "" : l.error)
        .close();
  }
  out += ']';
  json_phases(out, f.summary, f.counters);
  top.member("loaded") += '[';
  for (std::size_t k = 0; k < f.loaded.size(); ++k) {
    const BackendStatus& b = f.backends[f.loaded[k]];
    out += k ? ",\n" : "\n";
    JsonObject(out)
        .str("backend", b.name)
        .str("kind", to_string(b.kind))
        .str("state", to_string(b.state))
        .raw("load_seq", std::to_string(b.load_seq))
        .raw("resolve_us", us(f.resolve_of(b.name)))
        .raw("dlopen_us", us(b.dlopen_ns))
        .raw("init_us", us(b.init_ns))
        .raw("load_us", us(b.load_ns))
        .str_or_null("error", b.error)
        .close();
  }
  out += ']';
  JsonObject(top.member("not_loaded"))
      .raw("native", std::to_string(f.missing.size()))
      .raw("python", std::to_string(f.python_backends))
      .raw("unavailable", std::to_string(f.unavailable))
      .close();
  json_estimate(top, est, "eager_start_us",
                "measured: a child process loaded every backend (epload profile --mode eager); "
                "the loads of the backends not loaded here, summed");
  top.close();
  out += '\n';
  return out;
}

// The text report's head: mode, index, the steps' times and the counters.
void native_steps_text(std::string& out, const Options& o, const HostRun& r, const Findings& f) {
  std::size_t loadable = 0;
  for (const BackendStatus& b : f.backends) loadable += b.kind == BackendKind::native ? 1 : 0;
  add_line(out, "epload profile: %s mode, group %s, %zu backend(s) (%zu native)\n", to_string(r.loader->mode()),
           o.group.c_str(), f.backends.size(), loadable);
  add_line(out, "index: %s%s%s%s%s\n", cache_outcome(r.report), r.report.file.empty() ? "" : " ",
           r.report.file.c_str(), r.report.reason.empty() ? "" : "; ", r.report.reason.c_str());
  out += "\nsteps (wall ms):\n";
  add_line(out, "  %-28s %10s\n", o.index.paths.empty() ? ("sys.path of " + o.index.python).c_str() : "search paths",
           ms(r.t_paths - r.t0).c_str());
  add_line(out, "  %-28s %10s\n", "open index", ms(r.t_index - r.t_paths).c_str());
  add_line(out, "  %-28s %10s\n", "create loader", ms(r.t_create - r.t_index).c_str());
  add_line(out, "  %-28s %10s\n", "start (hooks; eager: all)", ms(r.t_start - r.t_create).c_str());
  for (const Lookup& l : r.lookups) {
    add_line(out, "  %-28s %10s  %s%s\n", ("lookup " + l.device).c_str(), ms(l.ns).c_str(),
             l.ok ? "ok, backend " : "FAILED", l.ok ? l.backend.c_str() : "");
  }
  add_line(out, "  %-28s %10s\n", "total", ms(r.t_end - r.t0).c_str());
  counters_line(out, f.counters);
}

// The text report's backends: those loaded, then what loading the rest
// would have cost.
void native_backends_text(std::string& out, const HostRun& r, const Findings& f, const Estimate& est) {
  add_line(out, "\nbackends loaded: %zu of %zu (costliest first; ms)\n", f.loaded.size(), f.backends.size());
  if (!f.loaded.empty()) {
    add_line(out, "  %-32s %-7s %-8s %9s %9s %9s %9s\n", "backend", "kind", "state", "resolve", "dlopen", "init",
             "load");
  }
  std::size_t shown = 0;
  for (std::size_t k : f.loaded) {
    if (++shown > 40 && f.loaded.size() > 50) continue;  // eager at 1,000: keep it readable
    const BackendStatus& b = f.backends[k];
    add_line(out, "  %-32s %-7s %-8s %9s %9s %9s %9s\n", b.name.c_str(), to_string(b.kind), to_string(b.state),
             cell(f.resolve_of(b.name)).c_str(), cell(b.dlopen_ns).c_str(), cell(b.init_ns).c_str(),
             cell(b.load_ns).c_str());
  }
  if (f.loaded.size() > 50) add_line(out, "  ... %zu more (--json lists all)\n", f.loaded.size() - 40);
  const std::size_t not_loaded = f.backends.size() - f.loaded.size();
  if (not_loaded == 0) return;
  add_line(out, "\nnot loaded: %zu backend(s) (%zu native, %zu Python, %zu disabled/failed/alias)\n", not_loaded,
           f.missing.size(), f.python_backends, f.unavailable);
  if (est.ran) {
    add_line(out,
             "eager loading would have cost %s ms more for %zu of them (measured: a child process\n"
             "loaded every backend with --mode eager after this run; their loads summed.  Its whole\n"
             "eager start took %s ms.)\n",
             ms(est.extra_ns).c_str(), est.backends, ms(est.eager_ns).c_str());
  } else if (!est.error.empty()) {
    add_line(out, "eager estimate unavailable: %s\n", est.error.c_str());
  } else if (!f.missing.empty() && r.loader->mode() == LoadMode::lazy) {
    out += "eager estimate: not measured (--no-estimate)\n";
  }
  if (f.python_backends > 0) {
    out += "Python backends are loaded by the Python layer: profile the program with\n"
           "'epload profile -- python3 PROGRAM' to see their py_import / py_call costs.\n";
  }
}

int run_native(const Options& o) {
  (void)prof::enabled();  // reads EPLOAD_TRACE, so that it is honoured here too
  prof::enable();
  HostRun r;
  if (int rc = run_host_path(o, r); rc != k_ok) return rc;
  Findings f = gather(r);

  // The trace and plot first: the estimate below may take a while.
  std::string error;
  const bool outputs_ok = write_outputs(o.trace, o.plot, nullptr, error);
  Estimate est;
  if (o.estimate && r.loader->mode() == LoadMode::lazy && !f.missing.empty()) est = measure_eager(o, f.missing);

  std::string out;
  if (o.json) {
    out = native_json(o, r, f, est);
  } else {
    native_steps_text(out, o, r, f);
    phase_table(out, f.summary);
    native_backends_text(out, r, f, est);
    if (!o.trace.empty()) out += "\ntrace: " + o.trace + "\n";
    if (!o.plot.empty() && outputs_ok) out += "plot: " + o.plot + "\n";
  }
  write_out(out);
  std::fflush(stdout);
  if (!outputs_ok) return fail(error);
  int rc = k_ok;
  for (const Lookup& l : r.lookups) {
    if (!l.ok) rc = fail(l.error);
  }
  return rc;
}

// ---- arguments --------------------------------------------------------------------------

// One argument of `epload profile` other than the index options (see
// scan_args): 1 consumed, -1 after a usage error.
int profile_arg(std::vector<std::string_view>& args, std::size_t& i, Options& o, bool& group_given) {
  const std::string_view a = args[i];
  auto bad = [](const std::string& message) {
    usage_error("profile", message);
    return -1;
  };
  if (a == "--") {
    for (std::size_t k = i + 1; k < args.size(); ++k) o.command.emplace_back(args[k]);
    i = args.size();
    return o.command.empty() ? bad("'--' must be followed by a command to run") : 1;
  }
  if (int r = take_option("profile", args, i, "--group", o.group)) {
    group_given = true;
    return r;
  }
  std::string d;
  if (int r = take_option("profile", args, i, "--device", d)) {
    if (r < 0) return r;
    if (std::string why = detail::device_name_problem(d); !why.empty()) return bad(why);
    o.devices.push_back(d);
    return 1;
  }
  if (int r = take_option("profile", args, i, "--mode", o.mode_text)) {
    if (r > 0 && !parse_load_mode(o.mode_text)) return bad("--mode takes lazy, eager or off, not '" + o.mode_text + "'");
    return r;
  }
  if (int r = take_option("profile", args, i, "--trace", o.trace)) {
    return r > 0 && o.trace.empty() ? bad("--trace needs a file name") : r;
  }
  if (int r = take_option("profile", args, i, "--plot", o.plot)) {
    return r > 0 && o.plot.empty() ? bad("--plot needs a file name") : r;
  }
  if (take_flag(a, "--json", i, o.json) || take_flag(a, "--no-estimate", i, o.estimate, false) ||
      take_flag(a, "--eager-estimate", i, o.eager_estimate)) {
    return 1;
  }
  return bad("unknown argument '" + std::string(a) + "' (to profile a command, put it after '--')");
}

int run(std::vector<std::string_view>& args) {
  Options o;
  bool group_given = false;
  const int scanned = scan_args("profile", args, 0, o.index, [&](std::string_view, std::size_t& i) {
    return profile_arg(args, i, o, group_given);
  });
  if (scanned != k_ok) return scanned;
  if (!o.command.empty()) {
    if (o.index.given || group_given || !o.devices.empty() || !o.mode_text.empty() || !o.estimate) {
      return usage_error("profile",
                         "index options, --group, --device, --mode and --no-estimate apply to the native "
                         "form, not to a command after '--' (set EPLOAD_* variables for the command instead)");
    }
    return run_command(o);
  }
  if (o.eager_estimate) return usage_error("profile", "--eager-estimate applies to a command after '--'");
  return run_native(o);
}

Registration k_registration{{"profile", "show where start-up time goes (phases, backends, trace, plot)",
                             k_help, run}};


}  // namespace
}  // namespace epload::cli
