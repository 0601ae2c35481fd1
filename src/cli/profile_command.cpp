// profile_command.cpp — `epload profile -- COMMAND ARGS...`: runs COMMAND
// with EPLOAD_TRACE=<tmp>/trace-%p.json, so that every process of it that
// uses epload (a Python program through the epload module, epload commands,
// C++ hosts) writes its own trace; merges them and prints the phases and the
// backends loaded.  With --eager-estimate it runs COMMAND again with
// EPLOAD_MODE=eager and reports what the additional backend loads cost: measured, since a command's backends are
// not known to this process.
#include <string.h>  // strsignal

#include <cerrno>  // ENOENT

#include <algorithm>      // find_if, any_of
#include <string>         // output
#include <unordered_set>  // loaded set
#include <vector>         // arguments

#include "cli/profile_common.hpp"

namespace epload::cli::profiling {

namespace {

/// Runs the command once with EPLOAD_TRACE pointing into `dir`.
int run_traced(const Options& o, const TempDir& dir, bool eager, std::int64_t& wall_ns, std::string& error,
               ProcessEnd* end = nullptr) {
  std::vector<std::pair<std::string, std::string>> set = {{"EPLOAD_TRACE", dir.path + "/trace-%p.json"}};
  if (eager) {
    set.push_back({"EPLOAD_MODE", "eager"});
  }
  const std::int64_t t = prof::now_ns();
  // With --json, stdout carries the report only: the command's goes to stderr.
  const int rc = run_process(o.command, environment_with(set), o.json ? 2 : -1, error, end, true);
  wall_ns = prof::now_ns() - t;
  return rc;
}

/// One line of a traced run's timeline.
struct Step {
  const prof::Event* event = nullptr;
  int depth = 0;      ///< 1 inside a host import
  std::string note;   ///< "at start" / "first use" for loads, "discovery" ...
};

/// What a discovery span did, from the spans inside it: a cold scan (the
/// scanner's `scan` span), a refresh of a stale index (its `scan` span
/// "refresh": N distributions read again), or an index hit (neither).
std::string discovery_note(const prof::Trace& trace, const prof::Event& d) {
  auto inside = [&](const prof::Event& x, const prof::Event& outer) {
    return x.pid == outer.pid && x.start_ns >= outer.start_ns && x.start_ns < outer.start_ns + outer.dur_ns;
  };
  const prof::Event* scan = nullptr;
  for (const prof::Event& x : trace.events) {
    if (x.phase == prof::Phase::scan && inside(x, d)) {
      scan = &x;
      break;
    }
  }
  if (scan == nullptr) return "discovery (index hit)";
  if (scan->subject != "refresh") return "discovery (cold scan)";
  // Distributions read again: the metadata directories of the reads inside.
  std::vector<std::string_view> dirs;
  for (const prof::Event& x : trace.events) {
    if (x.phase != prof::Phase::read || !inside(x, *scan)) continue;
    const std::string_view rel = x.subject;
    const std::string_view dir = rel.substr(0, rel.rfind('/'));
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return "discovery (refresh: " + std::to_string(dirs.size()) +
         (dirs.size() == 1 ? " distribution" : " distributions") + " read again)";
}

bool is_host_import(const prof::Event& e) {
  return e.phase == prof::Phase::total && e.subject.rfind("import ", 0) == 0;
}

/// The steps of a traced run, in start order: host imports (the `total`
/// span "import <host>" that epload's .pth hook records around the host's
/// import and its autoload), and the `total` (discovery, matching) and
/// `load` spans that are at top level or directly inside a host import or
/// the Loader's start.  A load inside either happened at start; any other
/// load, on the first use of a device.
std::vector<Step> timeline(const prof::Trace& trace) {
  std::vector<Step> steps;
  // Open total/load spans per (pid, tid), innermost last.
  std::vector<std::pair<std::pair<std::int32_t, std::uint32_t>, std::vector<const prof::Event*>>> open;
  for (const prof::Event& e : trace.events) {
    if (e.phase != prof::Phase::total && e.phase != prof::Phase::load) continue;
    const auto key = std::make_pair(e.pid, e.tid);
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == key; });
    if (it == open.end()) it = open.insert(open.end(), {key, {}});
    auto& stack = it->second;
    while (!stack.empty() && stack.back()->start_ns + stack.back()->dur_ns <= e.start_ns) stack.pop_back();
    // The Loader's start (a `total` span) holds the loads it makes: at start.
    auto starting = [](const prof::Event* o) { return o->subject == "loader start"; };
    const bool in_host = std::any_of(stack.begin(), stack.end(), [&](const prof::Event* o) {
      return is_host_import(*o) || starting(o);
    });
    const bool shown = std::all_of(stack.begin(), stack.end(), [&](const prof::Event* o) {
      return is_host_import(*o) || starting(o);
    });
    stack.push_back(&e);
    if (!shown) continue;
    Step s{&e, static_cast<int>(stack.size()) - 1, {}};
    if (e.phase == prof::Phase::load) {
      s.note = in_host ? "at start" : "first use";
    } else if (e.subject == "entry_points query" || e.subject == "open_index") {
      s.note = discovery_note(trace, e);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

/// When each backend was first loaded ("at start" / "first use").
std::string when_loaded(const std::vector<Step>& steps, const std::string& backend) {
  for (const Step& s : steps) {
    if (s.event->phase == prof::Phase::load && s.event->subject == backend) return s.note;
  }
  return "";
}

void timeline_text(std::string& out, const prof::Trace& trace, const std::vector<Step>& steps) {
  if (steps.empty()) return;
  out += "\ntimeline (ms from the trace's first span, every process on one axis; host imports, discovery,\n"
         "backend loads):\n";
  // One clock (CLOCK_MONOTONIC) for every process: a child is placed where
  // it ran in its parent's time.
  std::int64_t t0 = -1;
  for (const prof::Event& e : trace.events) {
    if (t0 < 0 || e.start_ns < t0) t0 = e.start_ns;
  }
  for (const std::int32_t pid : trace.pids) {
    bool header = false;
    for (const Step& s : steps) {
      const prof::Event& e = *s.event;
      if (e.pid != pid) continue;
      if (!header && trace.pids.size() > 1) add_line(out, "  pid %d\n", pid);
      header = true;
      const std::string name = (e.phase == prof::Phase::load ? "load " : "") + e.subject;
      add_line(out, "  %10s %10s  %*s%-32s %s\n", ms(e.start_ns - t0).c_str(), ms(e.dur_ns).c_str(),
               2 * s.depth, "", name.c_str(), s.note.c_str());
    }
  }
}

void timeline_json(std::string& out, const std::vector<Step>& steps) {
  out += ",\"timeline\":[";
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const prof::Event& e = *steps[k].event;
    out += k ? ",\n" : "\n";
    JsonObject(out)
        .raw("pid", std::to_string(e.pid))
        .str("phase", prof::phase_name(e.phase))
        .str("name", e.subject)
        .raw("start_us", us(e.start_ns))
        .raw("dur_us", us(e.dur_ns))
        .raw("depth", std::to_string(steps[k].depth))
        .str("note", steps[k].note)
        .close();
  }
  out += "]";
}

std::string kind_of(const prof::BackendTotal& b) {
  if (b.import_ns > 0 || b.call_ns > 0) return "python";
  if (b.dlopen_ns > 0 || b.init_ns > 0) return "native";
  return "?";
}

/// A traced run of the command, read back.
struct CommandRun {
  int rc = 0;                         ///< its exit status (128+n when killed by signal n)
  ProcessEnd end;                     ///< the signal that killed it
  std::int64_t wall = 0;              ///< its wall time
  std::string shown_command;          ///< the command line, as shown
  std::vector<std::string> problems;  ///< trace files that could not be read
  prof::Trace trace;
  prof::Summary summary;
  prof::ImportSummary imports;
  std::vector<Step> steps;
  /// Spans of epload itself (discovery, loads, host imports), not only imports.
  bool epload_spans = false;
};

/// --eager-estimate: runs the command again with EPLOAD_MODE=eager and sums
/// the loads of the backends it loaded in addition.
Estimate eager_estimate(const Options& o, const CommandRun& r) {
  Estimate est;
  std::unordered_set<std::string> loaded;
  for (const auto& b : r.summary.backends) loaded.insert(b.name);
  TempDir again;
  const int rc2 = again.path.empty() ? -1 : run_traced(o, again, true, est.eager_ns, est.error);
  if (rc2 >= 0 && rc2 == r.rc) {  // it ended as the first run did
    std::vector<std::string> ignored;
    for (const auto& b : prof::summarize(again.collect(ignored).events).backends) {
      if (loaded.count(b.name) != 0) continue;
      ++est.backends;
      est.extra_ns += b.load_ns;
    }
    est.ran = true;
  } else if (rc2 >= 0) {
    est.error = "the eager run exited with status " + std::to_string(rc2) + ", the first with " +
                std::to_string(r.rc) + ": not comparable";
  } else if (est.error.empty()) {
    est.error = "cannot create a temporary directory";
  }
  return est;
}

std::string command_json(const CommandRun& r, const Estimate& est) {
  std::string out;
  JsonObject top(out);
  top.str("command", r.shown_command)
      .raw("exit_status", std::to_string(r.rc))
      .raw("signal", r.end.signal ? std::to_string(r.end.signal) : "null")
      .raw("wall_us", us(r.wall))
      .raw("traced_us", us(r.summary.wall_ns))
      .member("processes") += '[';
  for (std::size_t k = 0; k < r.trace.pids.size(); ++k) {
    if (k) out += ',';
    JsonObject(out).raw("pid", std::to_string(r.trace.pids[k])).str("name", r.trace.process_names[k]).close();
  }
  out += ']';
  json_phases(out, r.summary, r.trace.counters);
  timeline_json(out, r.steps);
  imports_json(top, r.imports);
  top.member("loaded") += '[';
  for (std::size_t k = 0; k < r.summary.backends.size(); ++k) {
    const auto& b = r.summary.backends[k];
    out += k ? ",\n" : "\n";
    JsonObject backend(out);
    backend.str("backend", b.name)
        .str("kind", kind_of(b))
        .str("when", when_loaded(r.steps, b.name))
        .raw("loads", std::to_string(b.loads))
        .raw("resolve_us", us(b.resolve_ns))
        .raw("dlopen_us", us(b.dlopen_ns))
        .raw("init_us", us(b.init_ns))
        .raw("import_us", us(b.import_ns))
        .raw("call_us", us(b.call_ns))
        .raw("load_us", us(b.load_ns));
    backend_imports_json(backend, r.imports, b.name);
    backend.close();
  }
  out += ']';
  json_estimate(top, est, "eager_wall_us",
                "measured: the command ran again with EPLOAD_MODE=eager; "
                "the loads of the backends it loaded in addition, summed");
  top.strings("problems", r.problems).close();
  out += '\n';
  return out;
}

/// The traced processes, their phases, timeline and backends, as text.
void command_trace_text(std::string& out, const CommandRun& r) {
  out += "traced processes:";
  for (std::size_t k = 0; k < r.trace.pids.size(); ++k) {
    add_line(out, " %s (pid %d)", r.trace.process_names[k].c_str(), r.trace.pids[k]);
  }
  add_line(out, "; traced span %s ms\n", ms(r.summary.wall_ns).c_str());
  if (r.epload_spans) counters_line(out, r.trace.counters);
  phase_table(out, r.summary);
  imports_text(out, r.trace, r.imports);
  if (!r.epload_spans) return;  // imports only: no timeline, no backends
  timeline_text(out, r.trace, r.steps);
  add_line(out, "\nbackends loaded: %zu (costliest first; ms)\n", r.summary.backends.size());
  if (!r.summary.backends.empty()) {
    add_line(out, "  %-32s %-7s %9s %12s %11s %9s  %s\n", "backend", "kind", "resolve", "dlopen/import",
             "init/call", "load", "when");
  }
  for (const auto& b : r.summary.backends) {
    const bool py = kind_of(b) == "python";
    add_line(out, "  %-32s %-7s %9s %12s %11s %9s  %s\n", b.name.c_str(), kind_of(b).c_str(),
             cell(b.resolve_ns).c_str(), cell(py ? b.import_ns : b.dlopen_ns).c_str(),
             cell(py ? b.call_ns : b.init_ns).c_str(), cell(b.load_ns).c_str(),
             when_loaded(r.steps, b.name).c_str());
  }
  backend_imports_text(out, r.summary, r.imports);
}

// What to set for epload's own spans, when a command's processes recorded
// imports only (or nothing).
const char k_no_epload[] =
    "epload's own spans (discovery, each backend's load) appear when a program uses epload:\n"
    "for PyTorch, set EPLOAD_AUTOLOAD_HOSTS=torch (epload then discovers and loads torch's\n"
    "backends, e.g. EPLOAD_AUTOLOAD_HOSTS=torch epload profile -- python -c 'import torch').\n";

std::string command_text(const Options& o, const CommandRun& r, const Estimate& est) {
  std::string out;
  if (r.end.signal != 0) {
    const char* what = ::strsignal(r.end.signal);
    add_line(out, "\nepload profile: %s was killed by signal %d (%s) after %s ms (wall); exit status %d\n",
             r.shown_command.c_str(), r.end.signal, what ? what : "?", ms(r.wall).c_str(), r.rc);
  } else {
    add_line(out, "\nepload profile: %s exited with status %d after %s ms (wall)\n", r.shown_command.c_str(), r.rc,
             ms(r.wall).c_str());
  }
  if (r.trace.pids.empty()) {
    out += "no trace was written: no process of the command used epload.  A Python with epload\n"
           "installed (pip install epload, in the environment of that Python) records its imports;\n"
           "a process that ends by os._exit, a crash or a signal writes nothing.\n";
    out += k_no_epload;
  } else {
    command_trace_text(out, r);
    if (!r.epload_spans) out += "\n" + std::string(k_no_epload);
  }
  if (!r.epload_spans && !est.ran && est.error.empty()) {
    // nothing to say about eager loading: no backend was discovered
  } else if (est.ran) {
    add_line(out,
             "\neager loading (stock autoload's behaviour) would have loaded %zu more backend(s), costing %s ms\nmore (measured: the "
             "command ran again with EPLOAD_MODE=eager in %s ms wall)\n",
             est.backends, ms(est.extra_ns).c_str(), ms(est.eager_ns).c_str());
  } else if (!est.error.empty()) {
    add_line(out, "\neager estimate unavailable: %s\n", est.error.c_str());
  } else {
    out += "\neager estimate: not measured for a command (--eager-estimate runs it again with\n"
           "EPLOAD_MODE=eager and compares)\n";
  }
  for (const std::string& p : r.problems) out += "warning: " + p + "\n";
  if (!o.trace.empty()) out += "trace: " + o.trace + "\n";
  return out;
}

}  // namespace

int run_command(const Options& o) {
  TempDir dir;
  if (dir.path.empty()) return fail("cannot create a temporary directory for the traces (set TMPDIR)");
  CommandRun r;
  std::string error;
  r.rc = run_traced(o, dir, false, r.wall, error, &r.end);
  if (r.rc < 0) {
    // As shells do: 127 when the command is not found, 126 when it cannot
    // be executed.
    fail(error);
    return r.end.spawn_error == ENOENT ? 127 : r.end.spawn_error != 0 ? 126 : k_error;
  }
  r.trace = dir.collect(r.problems);
  r.summary = prof::summarize(r.trace.events);
  r.imports = prof::summarize_imports(r.trace.events);
  r.steps = timeline(r.trace);
  r.shown_command = shell_quoted(o.command);
  r.epload_spans = std::any_of(r.trace.events.begin(), r.trace.events.end(),
                               [](const prof::Event& e) { return e.phase != prof::Phase::module_import; });

  Estimate est;
  if (o.eager_estimate) est = eager_estimate(o, r);
  std::string out = o.json ? command_json(r, est) : command_text(o, r, est);
  std::string werror;
  const bool outputs_ok = write_outputs(o.trace, o.plot, &r.trace, werror, "epload profile -- " + r.shown_command);
  if (outputs_ok && !o.plot.empty() && !o.json) out += "plot: " + o.plot + "\n";
  write_out(out);
  std::fflush(stdout);
  if (!outputs_ok) {
    fail(werror);
    return r.rc != 0 ? r.rc : k_error;
  }
  return r.rc;
}

}  // namespace epload::cli::profiling
