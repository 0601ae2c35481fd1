// profile_common.hpp — what the two forms of `epload profile` share
// (cmd_profile.cpp: the native host path; profile_command.cpp: a traced
// command): options, formatting, child processes, temporary trace
// directories, the report tables and the trace / plot outputs.
#pragma once

#include <cstdint>  // nanoseconds
#include <string>   // output
#include <string_view>  // JSON keys
#include <utility>  // pair
#include <vector>   // arguments

#include "cli/cli.hpp"
#include "epload/profile.hpp"
#include "profile_imports.hpp"  // the imports of traced Python processes
#include "profile_trace.hpp"    // reading, merging, summaries

namespace epload::cli::profiling {

namespace prof = epload::profile;

/// `epload profile`'s options (both forms).
struct Options {
  IndexOptions index;
  std::string group = "torch.backends";
  std::vector<std::string> devices;
  std::string mode_text;
  std::string trace, plot;
  bool json = false;
  bool estimate = true;
  bool eager_estimate = false;  // second form
  std::vector<std::string> command;
};

/// What eager loading would add, as measured (see each form).
struct Estimate {
  bool ran = false;
  std::string error;                 ///< why it could not be measured
  std::size_t backends = 0;          ///< backends the eager run loaded in addition
  std::int64_t extra_ns = 0;         ///< their loads, summed
  /// The eager run's time: the native form's child's whole `loader start`
  /// span; the command form's wall time of the second run.
  std::int64_t eager_ns = 0;
};

/// Milliseconds / microseconds with fixed decimals; "-" for zero (cell).
std::string ms(std::int64_t ns);
std::string us(std::int64_t ns);
std::string cell(std::int64_t ns);
/// printf-style append.
void add_line(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));

/// This executable's path (/proc/self/exe).
std::string self_exe();
/// How a child process ended, beyond its status (run_process).
struct ProcessEnd {
  int signal = 0;       ///< the signal that killed it, else 0
  int spawn_error = 0;  ///< errno when it could not be started (ENOENT, EACCES, ...)
};
/// Runs argv with `env`; stdout to `out_fd` when >= 0 (else inherited),
/// stderr inherited.  Returns the exit status (128+signal when killed, as
/// shells do), or -1 (with `error` set) when it cannot be started.  With
/// `shield`, this process ignores SIGINT and SIGQUIT while the child runs
/// (the child keeps their default action), as system() does: a Ctrl-C ends
/// the command, and the caller still reports and cleans up.
int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd,
                std::string& error, ProcessEnd* end = nullptr, bool shield = false);
/// This process's environment with NAME=VALUE pairs set (replacing existing ones).
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& set);

/// A private temporary directory, removed (with the files in it) by the
/// destructor.  `path` is empty when it could not be created.
struct TempDir {
  std::string path;
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Every trace-*.json in it, merged; unreadable ones go to `problems`.
  prof::Trace collect(std::vector<std::string>& problems) const;
};

/// The per-phase table, the system-call line, and their JSON members.
void phase_table(std::string& out, const prof::Summary& s);
void counters_line(std::string& out, const std::uint64_t* counters);
void json_phases(std::string& out, const prof::Summary& s, const std::uint64_t* counters);
/// The report's "eager_estimate" member: null when not measured, else the
/// backends loaded in addition, their cost, est.eager_ns as `time_key` and
/// how it was measured (`method`).
template <std::size_t N>
void json_estimate(JsonObject& report, const Estimate& est, const char (&time_key)[N], std::string_view method) {
  if (!est.ran) {
    report.raw("eager_estimate", "null");
    return;
  }
  JsonObject(report.member("eager_estimate"))
      .raw("backends", std::to_string(est.backends))
      .raw("extra_us", us(est.extra_ns))
      .raw(time_key, us(est.eager_ns))
      .str("method", method)
      .close();
}

/// Writes --trace (this process's spans, or `trace` when given) and draws
/// --plot (titled `title`) with the package's plot module.  False with
/// `error` set on failure; the trace is written even when the plot fails.
bool write_outputs(const std::string& trace_path, const std::string& plot_path, const prof::Trace* trace,
                   std::string& error, const std::string& title = {});

/// The imports part of a command's report (profile_imports_report.cpp): the
/// processes' imports and the slowest by self and cumulative time; the
/// imports each loaded backend caused; the same as JSON members.
void imports_text(std::string& out, const prof::Trace& trace, const prof::ImportSummary& s);
void backend_imports_text(std::string& out, const prof::Summary& summary, const prof::ImportSummary& s);
void imports_json(JsonObject& report, const prof::ImportSummary& s);
void backend_imports_json(JsonObject& backend, const prof::ImportSummary& s, const std::string& name);

/// `argv` as a shell would need it typed: words quoted where needed.
std::string shell_quoted(const std::vector<std::string>& argv);

/// The second form: runs o.command with EPLOAD_TRACE set and reports.
int run_command(const Options& o);

}  // namespace epload::cli::profiling
