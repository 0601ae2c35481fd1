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
//       module, epload commands, C++ hosts) writes its own trace; merges
//       them and prints the same tables.
//
// --trace writes the (merged) Chrome trace; --plot draws it with
// scripts/plot_trace.py (matplotlib).  Spans come from the core's
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
    "The second form runs COMMAND (for example a Python program that uses epload)\n"
    "with EPLOAD_TRACE set, so that each process of it that uses epload writes a\n"
    "trace, then merges the traces and prints the same tables.  Its exit status is\n"
    "COMMAND's.  Python backends show py_import and py_call instead of dlopen/init.\n\n"
    "Options:\n"
    "  --group G           the autoload group (default: torch.backends)\n"
    "  --device DEV        look DEV up after start (repeatable)\n"
    "  --mode MODE         lazy (default), eager or off; overrides EPLOAD_MODE\n"
    "  --trace FILE        write the Chrome trace-event JSON (Perfetto, chrome://tracing)\n"
    "  --plot FILE.png     draw the timeline (scripts/plot_trace.py; needs\n"
    "                      python3-matplotlib; EPLOAD_PLOT_PYTHON picks the interpreter)\n"
    "  --json              print the report as JSON (COMMAND's stdout goes to stderr)\n"
    "  --no-estimate       skip the eager-loading measurement (first form)\n"
    "  --eager-estimate    run COMMAND a second time with EPLOAD_MODE=eager and\n"
    "                      report what the backends it loaded in addition cost\n"
    "                      (second form; runs it twice!)\n\n"
    "EPLOAD_TRACE=FILE records the same trace from any program using epload without\n"
    "this command; \"%p\" in FILE becomes the process id.\n"
    "Exit status: 1 when a DEV cannot be loaded or the trace/plot cannot be written.\n";

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
    if (ev.phase == prof::Phase::total && ev.detail == "loader start") e.eager_start_ns += ev.dur_ns;
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

int run_native(const Options& o) {
  (void)prof::enabled();  // reads EPLOAD_TRACE, so that it is honoured here too
  prof::enable();
  struct Lookup {
    std::string device;
    bool ok = false;
    std::string backend, error;
    std::int64_t ns = 0;
  };
  std::vector<Lookup> lookups;
  std::int64_t t_paths = 0, t_index = 0, t_create = 0, t_start = 0, t_end = 0;
  CacheOptions co;
  CacheReport report;
  std::shared_ptr<const Index> index;
  std::unique_ptr<Loader> loader;
  const std::int64_t t0 = prof::now_ns();
  {
    prof::Span whole(prof::Phase::total, "epload profile");
    {
      // The interpreter's answer is part of the cache key; asking costs a
      // Python start-up, which every `epload` command without --path pays.
      prof::Span span(prof::Phase::cache_key, o.index.paths.empty() ? "sys.path of " + o.index.python : "");
      if (!resolve_cache_options(o.index, co)) return k_error;
    }
    co.groups = {o.group, std::string(k_devices_group)};  // the loader needs these only
    t_paths = prof::now_ns();
    auto opened = open_index(co, &report);
    if (!opened) return fail(opened.error().message);
    index = std::move(opened).value();
    t_index = prof::now_ns();
    auto lo = host_loader_options(co, o.group, o.mode_text);
    if (!lo) return fail(lo.error().message);
    auto created = Loader::create(index, std::move(lo).value());
    if (!created) return fail(created.error().message);
    loader = std::move(created).value();
    t_create = prof::now_ns();
    loader->start();
    t_start = prof::now_ns();
    for (const std::string& d : o.devices) {
      Lookup l;
      l.device = d;
      const std::int64_t t = prof::now_ns();
      {
        prof::Span span(prof::Phase::total, "lookup " + d);
        auto r = loader->lookup(d);
        l.ok = r.ok();
        if (!r) l.error = r.error().message;
      }
      l.ns = prof::now_ns() - t;
      lookups.push_back(std::move(l));
    }
    t_end = prof::now_ns();
  }
  const std::vector<prof::Event> events = prof::events();
  const prof::Summary summary = prof::summarize(events);
  std::uint64_t counters[static_cast<int>(prof::Counter::count_)];
  for (int k = 0; k < static_cast<int>(prof::Counter::count_); ++k) counters[k] = prof::counter(static_cast<prof::Counter>(k));

  const auto backends = loader->backends();
  const auto order = loader->load_order();
  for (Lookup& l : lookups) {
    for (const DeviceStatus& d : loader->devices()) {
      if (d.name == l.device && d.ready) l.backend = backends[d.backend].name;
    }
  }
  std::map<std::string, const prof::BackendTotal*> traced;
  for (const auto& b : summary.backends) traced[b.name] = &b;
  // Resolve spans belong to every backend resolved at create, loaded or not.
  std::map<std::string, std::int64_t> resolve_ns;
  for (const prof::Event& e : events) {
    if (e.phase == prof::Phase::resolve) resolve_ns[e.detail] += e.dur_ns;
  }
  std::vector<std::size_t> loaded(order.begin(), order.end());
  std::stable_sort(loaded.begin(), loaded.end(),
                   [&](std::size_t a, std::size_t b) { return backends[a].load_ns > backends[b].load_ns; });
  std::unordered_set<std::string> in_order;
  for (std::size_t k : order) in_order.insert(backends[k].name);
  std::unordered_set<std::string> missing;  // loadable natively, not loaded
  std::size_t python_backends = 0, unavailable = 0;
  for (const BackendStatus& b : backends) {
    if (in_order.count(b.name) != 0) continue;
    if (b.kind == BackendKind::python) {
      ++python_backends;
    } else if (b.kind == BackendKind::native && b.state == BackendState::unloaded && b.alias_of.empty()) {
      missing.insert(b.name);
    } else {
      ++unavailable;
    }
  }

  // The trace and plot first: the estimate below may take a while.
  std::string error;
  const bool outputs_ok = write_outputs(o.trace, o.plot, nullptr, error);

  Estimate est;
  if (o.estimate && loader->mode() == LoadMode::lazy && !missing.empty()) est = measure_eager(o, missing);

  std::string out;
  const char* status = report.status == CacheStatus::hit        ? "cache hit"
                       : report.status == CacheStatus::rebuilt  ? "cache rebuilt (scanned)"
                       : report.status == CacheStatus::shipped  ? "shipped index"
                                                                : "uncached (scanned)";
  if (o.json) {
    out += "{\"mode\":\"";
    out += to_string(loader->mode());
    out += "\",\"group\":";
    append_json_string(out, o.group);
    add_line(out, ",\"backends\":%zu,\"index\":{\"status\":\"%s\",\"file\":", backends.size(), status);
    append_json_string(out, report.file);
    out += ",\"reason\":";
    append_json_string(out, report.reason);
    out += "},\"steps\":{\"search_paths_us\":" + us(t_paths - t0) + ",\"index_us\":" + us(t_index - t_paths) +
           ",\"loader_us\":" + us(t_create - t_index) + ",\"start_us\":" + us(t_start - t_create) +
           ",\"lookups_us\":" + us(t_end - t_start) + ",\"total_us\":" + us(t_end - t0) + "},\"lookups\":[";
    for (std::size_t k = 0; k < lookups.size(); ++k) {
      const Lookup& l = lookups[k];
      out += k ? ",{\"device\":" : "{\"device\":";
      append_json_string(out, l.device);
      out += l.ok ? ",\"ok\":true,\"backend\":" : ",\"ok\":false,\"backend\":";
      if (l.backend.empty()) out += "null";
      else append_json_string(out, l.backend);
      out += ",\"us\":" + us(l.ns) + ",\"error\":";
      if (l.ok) out += "null";
      else append_json_string(out, l.error);
      out += "}";
    }
    out += "]";
    json_phases(out, summary, counters);
    out += ",\"loaded\":[";
    for (std::size_t k = 0; k < loaded.size(); ++k) {
      const BackendStatus& b = backends[loaded[k]];
      out += k ? ",\n{\"backend\":" : "\n{\"backend\":";
      append_json_string(out, b.name);
      add_line(out, ",\"kind\":\"%s\",\"state\":\"%s\",\"load_seq\":%d", to_string(b.kind), to_string(b.state),
               b.load_seq);
      auto r = resolve_ns.find(b.name);
      out += ",\"resolve_us\":" + us(r == resolve_ns.end() ? 0 : r->second) + ",\"dlopen_us\":" + us(b.dlopen_ns) +
             ",\"init_us\":" + us(b.init_ns) + ",\"load_us\":" + us(b.load_ns) + ",\"error\":";
      if (b.error.empty()) out += "null";
      else append_json_string(out, b.error);
      out += "}";
    }
    add_line(out, "],\"not_loaded\":{\"native\":%zu,\"python\":%zu,\"unavailable\":%zu},\"eager_estimate\":",
             missing.size(), python_backends, unavailable);
    if (est.ran) {
      out += "{\"backends\":" + std::to_string(est.backends) + ",\"extra_us\":" + us(est.extra_ns) +
             ",\"eager_start_us\":" + us(est.eager_start_ns) +
             ",\"method\":\"measured: a child process loaded every backend (epload profile --mode eager); "
             "the loads of the backends not loaded here, summed\"}";
    } else {
      out += "null";
    }
    out += "}\n";
  } else {
    std::size_t loadable = 0;
    for (const BackendStatus& b : backends) loadable += b.kind == BackendKind::native ? 1 : 0;
    add_line(out, "epload profile: %s mode, group %s, %zu backend(s) (%zu native)\n", to_string(loader->mode()),
             o.group.c_str(), backends.size(), loadable);
    add_line(out, "index: %s%s%s%s%s\n", status, report.file.empty() ? "" : " ", report.file.c_str(),
             report.reason.empty() ? "" : "; ", report.reason.c_str());
    out += "\nsteps (wall ms):\n";
    add_line(out, "  %-28s %10s\n", o.index.paths.empty() ? ("sys.path of " + o.index.python).c_str() : "search paths",
             ms(t_paths - t0).c_str());
    add_line(out, "  %-28s %10s\n", "open index", ms(t_index - t_paths).c_str());
    add_line(out, "  %-28s %10s\n", "create loader", ms(t_create - t_index).c_str());
    add_line(out, "  %-28s %10s\n", "start (hooks; eager: all)", ms(t_start - t_create).c_str());
    for (const Lookup& l : lookups) {
      add_line(out, "  %-28s %10s  %s%s\n", ("lookup " + l.device).c_str(), ms(l.ns).c_str(),
               l.ok ? "ok, backend " : "FAILED", l.ok ? l.backend.c_str() : "");
    }
    add_line(out, "  %-28s %10s\n", "total", ms(t_end - t0).c_str());
    counters_line(out, counters);
    phase_table(out, summary);
    add_line(out, "\nbackends loaded: %zu of %zu (costliest first; ms)\n", loaded.size(), backends.size());
    if (!loaded.empty()) {
      add_line(out, "  %-32s %-7s %-8s %9s %9s %9s %9s\n", "backend", "kind", "state", "resolve", "dlopen", "init",
               "load");
    }
    std::size_t shown = 0;
    for (std::size_t k : loaded) {
      if (++shown > 40 && loaded.size() > 50) continue;  // eager at 1,000: keep it readable
      const BackendStatus& b = backends[k];
      auto r = resolve_ns.find(b.name);
      add_line(out, "  %-32s %-7s %-8s %9s %9s %9s %9s\n", b.name.c_str(), to_string(b.kind), to_string(b.state),
               cell(r == resolve_ns.end() ? 0 : r->second).c_str(), cell(b.dlopen_ns).c_str(),
               cell(b.init_ns).c_str(), cell(b.load_ns).c_str());
    }
    if (loaded.size() > 50) add_line(out, "  ... %zu more (--json lists all)\n", loaded.size() - 40);
    const std::size_t not_loaded = backends.size() - loaded.size();
    if (not_loaded > 0) {
      add_line(out, "\nnot loaded: %zu backend(s) (%zu native, %zu Python, %zu disabled/failed/alias)\n", not_loaded,
               missing.size(), python_backends, unavailable);
      if (est.ran) {
        add_line(out,
                 "eager loading would have cost %s ms more for %zu of them (measured: a child process\n"
                 "loaded every backend with --mode eager after this run; their loads summed.  Its whole\n"
                 "eager start took %s ms.)\n",
                 ms(est.extra_ns).c_str(), est.backends, ms(est.eager_start_ns).c_str());
      } else if (!est.error.empty()) {
        add_line(out, "eager estimate unavailable: %s\n", est.error.c_str());
      } else if (!missing.empty() && loader->mode() == LoadMode::lazy) {
        out += "eager estimate: not measured (--no-estimate)\n";
      }
      if (python_backends > 0) {
        out += "Python backends are loaded by the Python layer: profile the program with\n"
               "'epload profile -- python3 PROGRAM' to see their py_import / py_call costs.\n";
      }
    }
    if (!o.trace.empty()) out += "\ntrace: " + o.trace + "\n";
    if (!o.plot.empty() && outputs_ok) out += "plot: " + o.plot + "\n";
  }
  write_out(out);
  std::fflush(stdout);
  if (!outputs_ok) return fail(error);
  int rc = k_ok;
  for (const Lookup& l : lookups) {
    if (!l.ok) rc = fail(l.error);
  }
  return rc;
}


// ---- arguments --------------------------------------------------------------------------

int run(std::vector<std::string_view>& args) {
  Options o;
  bool index_given = false, group_given = false;
  std::size_t i = 0;
  for (; i < args.size();) {
    std::string_view a = args[i];
    if (a == "--") {
      for (std::size_t k = i + 1; k < args.size(); ++k) o.command.emplace_back(args[k]);
      if (o.command.empty()) return usage_error("profile", "'--' must be followed by a command to run");
      break;
    }
    const int r = parse_index_option("profile", args, i, o.index);
    if (r < 0) return k_usage;
    if (r > 0) {
      index_given = true;
      continue;
    }
    if (a == "--group" || a.starts_with("--group=")) {
      if (!take_value("profile", args, i, "--group", o.group)) return k_usage;
      group_given = true;
    } else if (a == "--device" || a.starts_with("--device=")) {
      std::string d;
      if (!take_value("profile", args, i, "--device", d)) return k_usage;
      if (std::string why = detail::device_name_problem(d); !why.empty()) return usage_error("profile", why);
      o.devices.push_back(d);
    } else if (a == "--mode" || a.starts_with("--mode=")) {
      if (!take_value("profile", args, i, "--mode", o.mode_text)) return k_usage;
      if (!parse_load_mode(o.mode_text)) {
        return usage_error("profile", "--mode takes lazy, eager or off, not '" + o.mode_text + "'");
      }
    } else if (a == "--trace" || a.starts_with("--trace=")) {
      if (!take_value("profile", args, i, "--trace", o.trace)) return k_usage;
      if (o.trace.empty()) return usage_error("profile", "--trace needs a file name");
    } else if (a == "--plot" || a.starts_with("--plot=")) {
      if (!take_value("profile", args, i, "--plot", o.plot)) return k_usage;
      if (o.plot.empty()) return usage_error("profile", "--plot needs a file name");
    } else if (a == "--json") {
      o.json = true;
      ++i;
    } else if (a == "--no-estimate") {
      o.estimate = false;
      ++i;
    } else if (a == "--eager-estimate") {
      o.eager_estimate = true;
      ++i;
    } else {
      return usage_error("profile", "unknown argument '" + std::string(a) +
                                        "' (to profile a command, put it after '--')");
    }
  }
  if (!o.command.empty()) {
    if (index_given || group_given || !o.devices.empty() || !o.mode_text.empty() || !o.estimate) {
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
