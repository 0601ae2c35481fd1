// cli.hpp — the pieces every `epload` subcommand shares: the command
// registry, argument scanning, the "index options", JSON output and exit codes.
//
// Each subcommand lives in its own cmd_*.cpp and registers itself with a
// static Registration object; main.cpp only dispatches.  The CLI is the one
// place that prints and chooses exit codes: the library never does.
#pragma once

#include <functional>   // Command::run
#include <memory>       // shared_ptr<const Index>
#include <string>       // options
#include <string_view>  // argument views
#include <vector>       // argument lists

#include "cli/own_python.hpp"  // IndexOptions::python's default
#include "epload/cache.hpp"

namespace epload::cli {

/// Exit codes of every command.
enum Exit : int { k_ok = 0, k_error = 1, k_usage = 2 };

/// A subcommand: `epload <name> ...`.
struct Command {
  const char* name;
  const char* summary;  ///< one line for `epload --help`
  /// Full text for `epload <name> --help`; k_index_options_help follows it
  /// (every command takes the index options).  Static text: registering a
  /// command allocates nothing (see Registration).  nullptr: the command
  /// answers --help itself (`bench`, which hands over to Python).
  const char* help;
  int (*run)(std::vector<std::string_view>&);  ///< args after the name
};

/// Registers a command at static-initialisation time.  Nothing here may
/// allocate: these run in every process before main(), and each first
/// allocation of a new size makes the allocator touch fresh pages (a page
/// fault each, ~15 per run when the help texts were concatenated here).
struct Registration {
  explicit Registration(Command command);
};

/// All registered commands, in registration order.
const std::vector<Command>& commands();

/// Usage error: prints "epload <cmd>: <message>" and a hint to stderr and
/// returns k_usage.
int usage_error(std::string_view command, std::string_view message);

/// Error: prints "epload: <message>" to stderr and returns k_error.
int fail(std::string_view message);

/// Writes `data` to standard output (stdio, like printf).  The first write
/// error's errno is kept for main(), which turns any failed write to
/// standard output into exit status 1 with its cause.
void write_out(std::string_view data);
/// errno of the first failed write_out(), or 0.
int write_out_errno();

/// True when `arg` is `option` or `option=VALUE`.
bool is_option(std::string_view arg, std::string_view option);

/// When args[i] is `option` (`--opt VALUE` or `--opt=VALUE`): takes its
/// value into `out` and returns 1, or -1 after the usage error when the
/// value is missing.  0 when args[i] is another argument.
int take_option(std::string_view command, std::vector<std::string_view>& args, std::size_t& i,
                std::string_view option, std::string& out);

/// When `arg` (args[i]) is `flag`: sets `out` to `value`, advances i and
/// returns 1.  0 when it is another argument.
inline int take_flag(std::string_view arg, std::string_view flag, std::size_t& i, bool& out, bool value = true) {
  if (arg != flag) return 0;
  out = value;
  ++i;
  return 1;
}

/// The options every index-consuming command accepts:
///   --path DIR (repeatable)  --python EXE  --cache-dir DIR  --no-cache
///   --validate full|paths    --verbose
struct IndexOptions {
  std::vector<std::string> paths;
  /// --python; default: the interpreter of the command's own environment
  /// (own_python.hpp), else python3 on PATH.
  std::string python = own_python();
  bool python_given = false;  ///< --python was given
  std::string cache_dir;
  bool no_cache = false;
  Validation validation = Validation::full;
  bool validation_given = false;  ///< --validate was given (else EPLOAD_VALIDATE decides)
  bool verbose = false;
  bool given = false;  ///< any of these options was given
  /// The groups the command needs (set by the command, not an option); a
  /// cache hit then reads only those groups' share of the index.  Empty:
  /// the complete index.
  std::vector<std::string> groups;
};

/// The index this run opened last (also while open_index_or_report's
/// `prepare` runs on it), or null: for checks of what the environment names
/// against it (host_options.cpp).
const std::shared_ptr<const Index>& opened_index();

/// Help text for the index options, to append to a command's help.
extern const char* const k_index_options_help;

/// Tries to consume args[i] (and its value) as an index option.  Returns
/// 1 when consumed, 0 when args[i] is not an index option, -1 on a usage
/// error (already printed).
int parse_index_option(std::string_view command, std::vector<std::string_view>& args,
                       std::size_t& i, IndexOptions& options);

/// Scans a command's arguments from args[first]: the index options into
/// `options`, every other argument through `own(arg, i)`, which consumes
/// it (advancing i) and returns 1, returns 0 when it does not know it (an
/// "unknown argument" usage error follows), or -1 after printing its own
/// usage error.  Returns k_ok, or k_usage after a usage error.
template <class Own>
int scan_args(std::string_view command, std::vector<std::string_view>& args, std::size_t first,
              IndexOptions& options, Own&& own) {
  for (std::size_t i = first; i < args.size();) {
    const int r = parse_index_option(command, args, i, options);
    if (r < 0) return k_usage;
    if (r > 0) continue;
    const int o = own(args[i], i);
    if (o < 0) return k_usage;
    if (o == 0) return usage_error(command, "unknown argument '" + std::string(args[i]) + "'");
  }
  return k_ok;
}

/// Fills `out` from the options: search paths from --path, else the sys.path
/// (and identity) of --python; cache settings.  Does not scan.  On error
/// prints the message and returns false.
bool resolve_cache_options(const IndexOptions& options, CacheOptions& out);

/// importlib.machinery.EXTENSION_SUFFIXES of the interpreter the last
/// resolve_cache_options() targeted (--python): remembered with its sys.path,
/// or asked now when --path was given.  When it cannot be asked, a warning
/// and an empty list (resolve.cpp's interpreter-neutral default).
const std::vector<std::string>& target_ext_suffixes();

/// Opens the index the options describe: search paths from --path, else the
/// sys.path of --python; the cache per --cache-dir / --no-cache /
/// --validate.  Prints the cache outcome under --verbose.  On error prints
/// the message and returns nullptr.  `prepare`, when given, is called with
/// the resolved cache options and a cache hit's Index while its `full` check
/// still runs on the other CPU (cache_overlap.hpp): what it
/// builds from that Index is good only if the Index returned is the same.
using PrepareFn = std::function<void(const CacheOptions&, const std::shared_ptr<const Index>&)>;
std::shared_ptr<const Index> open_index_or_report(const IndexOptions& options,
                                                  CacheOptions* used = nullptr,
                                                  const PrepareFn& prepare = {});

/// Writes `s` as a JSON string literal (quotes included) to `out`: valid
/// UTF-8 as it is, each byte that is not (path bytes) as the escape of the
/// lone surrogate Python's surrogateescape makes of it ("\udcXX").
void append_json_string(std::string& out, std::string_view s);

/// Appends one JSON object to `out`, member by member, with the commas:
///   JsonObject(out).str("device", name).boolean("ok", ok).close();
/// Keys are string literals, written as they are (no escaping); string
/// values go through append_json_string.  Inline, and a key costs one
/// append: `epload entry-points --json` writes five members per entry
/// point, and this must cost what hand-written appends cost.
class JsonObject {
 public:
  explicit JsonObject(std::string& out) : m_out(out) { m_out.push_back('{'); }

  /// Writes the separator and `"key":`, and returns `out` for the value
  /// (for a nested array or object the caller writes itself).
  template <std::size_t N>
  std::string& member(const char (&key)[N]) {
    char text[N + 3] = {',', '"'};  // `,"key":`; the first member without the comma
    for (std::size_t k = 0; k + 1 < N; ++k) text[k + 2] = key[k];
    text[N + 1] = '"';
    text[N + 2] = ':';
    const std::size_t skip = m_first ? 1 : 0;
    m_first = false;
    return m_out.append(text + skip, N + 3 - skip);
  }
  /// `"key":"value"`.
  template <std::size_t N>
  JsonObject& str(const char (&key)[N], std::string_view value) {
    append_json_string(member(key), value);
    return *this;
  }
  /// `"key":"value"`, or `"key":null` when `value` is empty.
  template <std::size_t N>
  JsonObject& str_or_null(const char (&key)[N], std::string_view value) {
    if (value.empty()) return raw(key, "null");
    return str(key, value);
  }
  /// `"key":json`, where `json` is already JSON (a number, null, ...).
  template <std::size_t N>
  JsonObject& raw(const char (&key)[N], std::string_view json) {
    member(key) += json;
    return *this;
  }
  template <std::size_t N>
  JsonObject& boolean(const char (&key)[N], bool value) {
    return raw(key, value ? "true" : "false");
  }
  /// `"key":["a","b",...]`.
  template <std::size_t N>
  JsonObject& strings(const char (&key)[N], const std::vector<std::string>& values) {
    member(key).push_back('[');
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (k) m_out.push_back(',');
      append_json_string(m_out, values[k]);
    }
    m_out.push_back(']');
    return *this;
  }
  /// Closes the object.
  void close() { m_out.push_back('}'); }

 private:
  std::string& m_out;
  bool m_first = true;
};

/// Keeps `object` alive until the process ends and never destroys it.  A
/// command hands its index or loader here once its answer is written: the
/// process exits right after, and destroying 1,000 backend slots or the
/// index's strings first is pure cost (`epload load` at 1,000 backends:
/// ~0.07 ms of a ~3 ms run).  Reachable from a static, so leak checkers do
/// not report it; nothing that must happen at exit (the learned-devices
/// store is written when a backend loads, never on destruction) is skipped.
void keep_until_exit(std::shared_ptr<const void> object);

}  // namespace epload::cli
