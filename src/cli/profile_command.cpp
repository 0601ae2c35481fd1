// profile_command.cpp — `epload profile -- COMMAND ARGS...`: runs COMMAND
// with EPLOAD_TRACE=<tmp>/trace-%p.json, so that every process of it that
// uses epload (a Python program through the epload module, epload commands,
// C++ hosts) writes its own trace; merges them and prints the phases and the
// backends loaded.  With --eager-estimate it runs COMMAND again with
// EPLOAD_MODE=eager and reports what the additional backend loads cost: measured, since a command's backends are
// not known to this process.
#include <algorithm>      // find_if, any_of
#include <string>         // output
#include <unordered_set>  // loaded set
#include <vector>         // arguments

#include "cli/profile_common.hpp"

namespace epload::cli::profiling {

namespace {

/// Runs the command once with EPLOAD_TRACE pointing into `dir`.
int run_traced(const Options& o, const TempDir& dir, bool eager, std::int64_t& wall_ns, std::string& error) {
  std::vector<std::pair<std::string, std::string>> set = {{"EPLOAD_TRACE", dir.path + "/trace-%p.json"}};
  if (eager) {
    set.push_back({"EPLOAD_MODE", "eager"});
  }
  const std::int64_t t = prof::now_ns();
  // With --json, stdout carries the report only: the command's goes to stderr.
  const int rc = run_process(o.command, environment_with(set), o.json ? 2 : -1, error);
  wall_ns = prof::now_ns() - t;
  return rc;
}

/// One line of a traced run's timeline.
struct Step {
  const prof::Event* event = nullptr;
  int depth = 0;      ///< 1 inside a host import
  std::string note;   ///< "at start" / "first use" for loads, "discovery" ...
};

bool is_host_import(const prof::Event& e) {
  return e.phase == prof::Phase::total && e.detail.rfind("import ", 0) == 0;
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
    auto starting = [](const prof::Event* o) { return o->detail == "loader start"; };
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
    } else if (e.detail == "entry_points query" || e.detail == "open_index") {
      const bool scanned = std::any_of(trace.events.begin(), trace.events.end(), [&](const prof::Event& x) {
        return x.pid == e.pid && x.phase == prof::Phase::scan && x.start_ns >= e.start_ns &&
               x.start_ns < e.start_ns + e.dur_ns;
      });
      s.note = scanned ? "discovery (cold scan)" : "discovery (cached index)";
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

/// When each backend was first loaded ("at start" / "first use").
std::string when_loaded(const std::vector<Step>& steps, const std::string& backend) {
  for (const Step& s : steps) {
    if (s.event->phase == prof::Phase::load && s.event->detail == backend) return s.note;
  }
  return "";
}

void timeline_text(std::string& out, const prof::Trace& trace, const std::vector<Step>& steps) {
  if (steps.empty()) return;
  out += "\ntimeline (ms from the process's first span; host imports, discovery, backend loads):\n";
  for (const std::int32_t pid : trace.pids) {
    std::int64_t t0 = -1;
    for (const prof::Event& e : trace.events) {
      if (e.pid == pid && (t0 < 0 || e.start_ns < t0)) t0 = e.start_ns;
    }
    bool header = false;
    for (const Step& s : steps) {
      const prof::Event& e = *s.event;
      if (e.pid != pid) continue;
      if (!header && trace.pids.size() > 1) add_line(out, "  pid %d\n", pid);
      header = true;
      const std::string name = (e.phase == prof::Phase::load ? "load " : "") + e.detail;
      add_line(out, "  %10s %10s  %*s%-32s %s\n", ms(e.start_ns - t0).c_str(), ms(e.dur_ns).c_str(),
               2 * s.depth, "", name.c_str(), s.note.c_str());
    }
  }
}

void timeline_json(std::string& out, const std::vector<Step>& steps) {
  out += ",\"timeline\":[";
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const prof::Event& e = *steps[k].event;
    out += k ? ",\n{\"pid\":" : "\n{\"pid\":";
    out += std::to_string(e.pid) + ",\"phase\":\"" + prof::phase_name(e.phase) + "\",\"name\":";
    append_json_string(out, e.detail);
    out += ",\"start_us\":" + us(e.start_ns) + ",\"dur_us\":" + us(e.dur_ns) + ",\"depth\":" +
           std::to_string(steps[k].depth) + ",\"note\":";
    append_json_string(out, steps[k].note);
    out += "}";
  }
  out += "]";
}

std::string kind_of(const prof::BackendTotal& b) {
  if (b.import_ns > 0 || b.call_ns > 0) return "python";
  if (b.dlopen_ns > 0 || b.init_ns > 0) return "native";
  return "?";
}

}  // namespace

int run_command(const Options& o) {
  TempDir dir;
  if (dir.path.empty()) return fail("cannot create a temporary directory for the traces (set TMPDIR)");
  std::string error;
  std::int64_t wall = 0;
  const int rc = run_traced(o, dir, false, wall, error);
  if (rc < 0) return fail(error);
  std::vector<std::string> problems;
  prof::Trace trace = dir.collect(problems);
  const prof::Summary summary = prof::summarize(trace.events);
  const std::vector<Step> steps = timeline(trace);

  std::unordered_set<std::string> loaded;
  for (const auto& b : summary.backends) loaded.insert(b.name);
  Estimate est;
  std::int64_t eager_wall = 0;
  if (o.eager_estimate) {
    TempDir again;
    const int rc2 = again.path.empty() ? -1 : run_traced(o, again, true, eager_wall, est.error);
    if (rc2 >= 0 && rc2 == rc) {  // it ended as the first run did
      std::vector<std::string> ignored;
      for (const auto& b : prof::summarize(again.collect(ignored).events).backends) {
        if (loaded.count(b.name) != 0) continue;
        ++est.backends;
        est.extra_ns += b.load_ns;
      }
      est.ran = true;
    } else if (rc2 >= 0) {
      est.error = "the eager run exited with status " + std::to_string(rc2) + ", the first with " +
                  std::to_string(rc) + ": not comparable";
    } else if (est.error.empty()) {
      est.error = "cannot create a temporary directory";
    }
  }

  std::string out;
  std::string shown_command;
  for (const std::string& a : o.command) shown_command += (shown_command.empty() ? "" : " ") + a;
  if (o.json) {
    out += "{\"command\":";
    append_json_string(out, shown_command);
    out += ",\"exit_status\":" + std::to_string(rc) + ",\"wall_us\":" + us(wall) + ",\"traced_us\":" +
           us(summary.wall_ns) + ",\"processes\":[";
    for (std::size_t k = 0; k < trace.pids.size(); ++k) {
      out += k ? ",{\"pid\":" : "{\"pid\":";
      out += std::to_string(trace.pids[k]) + ",\"name\":";
      append_json_string(out, trace.process_names[k]);
      out += "}";
    }
    out += "]";
    json_phases(out, summary, trace.counters);
    timeline_json(out, steps);
    out += ",\"loaded\":[";
    for (std::size_t k = 0; k < summary.backends.size(); ++k) {
      const auto& b = summary.backends[k];
      out += k ? ",\n{\"backend\":" : "\n{\"backend\":";
      append_json_string(out, b.name);
      out += ",\"kind\":\"" + kind_of(b) + "\",\"when\":";
      append_json_string(out, when_loaded(steps, b.name));
      out += ",\"loads\":" + std::to_string(b.loads) +
             ",\"resolve_us\":" + us(b.resolve_ns) + ",\"dlopen_us\":" + us(b.dlopen_ns) + ",\"init_us\":" +
             us(b.init_ns) + ",\"import_us\":" + us(b.import_ns) + ",\"call_us\":" + us(b.call_ns) +
             ",\"load_us\":" + us(b.load_ns) + "}";
    }
    out += "],\"eager_estimate\":";
    if (est.ran) {
      out += "{\"backends\":" + std::to_string(est.backends) + ",\"extra_us\":" + us(est.extra_ns) +
             ",\"eager_wall_us\":" + us(eager_wall) +
             ",\"method\":\"measured: the command ran again with EPLOAD_MODE=eager; "
             "the loads of the backends it loaded in addition, summed\"}";
    } else {
      out += "null";
    }
    out += ",\"problems\":[";
    for (std::size_t k = 0; k < problems.size(); ++k) {
      if (k) out += ",";
      append_json_string(out, problems[k]);
    }
    out += "]}\n";
  } else {
    add_line(out, "\nepload profile: '%s' exited with status %d after %s ms (wall)\n", shown_command.c_str(), rc,
             ms(wall).c_str());
    if (trace.pids.empty()) {
      out += "no trace was written: the command did not use epload (or exited without running\n"
             "exit handlers, e.g. os._exit or a crash)\n";
    } else {
      out += "traced processes:";
      for (std::size_t k = 0; k < trace.pids.size(); ++k) {
        add_line(out, " %s (pid %d)", trace.process_names[k].c_str(), trace.pids[k]);
      }
      add_line(out, "; traced span %s ms\n", ms(summary.wall_ns).c_str());
      counters_line(out, trace.counters);
      phase_table(out, summary);
      timeline_text(out, trace, steps);
      add_line(out, "\nbackends loaded: %zu (costliest first; ms)\n", summary.backends.size());
      if (!summary.backends.empty()) {
        add_line(out, "  %-32s %-7s %9s %12s %11s %9s  %s\n", "backend", "kind", "resolve", "dlopen/import",
                 "init/call", "load", "when");
      }
      for (const auto& b : summary.backends) {
        const bool py = kind_of(b) == "python";
        add_line(out, "  %-32s %-7s %9s %12s %11s %9s  %s\n", b.name.c_str(), kind_of(b).c_str(),
                 cell(b.resolve_ns).c_str(), cell(py ? b.import_ns : b.dlopen_ns).c_str(),
                 cell(py ? b.call_ns : b.init_ns).c_str(), cell(b.load_ns).c_str(),
                 when_loaded(steps, b.name).c_str());
      }
    }
    if (est.ran) {
      add_line(out,
               "\neager loading (stock autoload's behaviour) would have loaded %zu more backend(s), costing %s ms\nmore (measured: the "
               "command ran again with EPLOAD_MODE=eager in %s ms wall)\n",
               est.backends, ms(est.extra_ns).c_str(), ms(eager_wall).c_str());
    } else if (!est.error.empty()) {
      add_line(out, "\neager estimate unavailable: %s\n", est.error.c_str());
    } else {
      out += "\neager estimate: not measured for a command (--eager-estimate runs it again with\n"
             "EPLOAD_MODE=eager and compares)\n";
    }
    for (const std::string& p : problems) out += "warning: " + p + "\n";
    if (!o.trace.empty()) out += "trace: " + o.trace + "\n";
  }
  std::string werror;
  const bool outputs_ok = write_outputs(o.trace, o.plot, &trace, werror);
  if (outputs_ok && !o.plot.empty() && !o.json) out += "plot: " + o.plot + "\n";
  write_out(out);
  std::fflush(stdout);
  if (!outputs_ok) {
    fail(werror);
    return rc != 0 ? rc : k_error;
  }
  return rc;
}

}  // namespace epload::cli::profiling
