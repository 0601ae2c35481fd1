// cmd_load.cpp — `epload load DEVICE`: what a host does at start and at the
// first use of a device, timed: open the index, create the loader, start it
// (hooks; everything in eager mode), look the device up.  Reports which
// backends were loaded and what each cost.
#include <time.h>  // clock_gettime

#include <cstdio>  // fprintf
#include <map>     // loaded backends
#include <optional>  // the loader prepared during validation
#include <string>  // output buffer

#include "cli/cli.hpp"
#include "cli/host_options.hpp"
#include "elf.hpp"  // device_name_problem
#include "epload/loader.hpp"

namespace epload::cli {
namespace {

const char k_help[] =
    "usage: epload load DEVICE [index options] [--group G] [--mode lazy|eager|off] [--json]\n\n"
    "Loads what DEVICE needs, as a C++ host would: lazy (default) loads only the\n"
    "backend providing DEVICE (and the hooks); eager loads every backend of\n"
    "group G in index order first, as PyTorch does; off loads nothing.\n"
    "Prints which backends were loaded, in order, and what each cost (dlopen,\n"
    "init, whole load, in microseconds), and the time of each phase.\n"
    "Without --mode: EPLOAD_MODE, else lazy; TORCH_DEVICE_BACKEND_AUTOLOAD\n"
    "set to anything but 1 means off.  EPLOAD_ENABLE / EPLOAD_DISABLE apply.\n"
    "Native (C ABI) backends only: a Python backend loads in Python, on the\n"
    "first use of its device (the torch hook, or epload.autoload(group, host=...)).\n"
    "Exit status 1 when DEVICE cannot be loaded (the message says why).\n\n"
    "Options:\n"
    "  --group G           the autoload group (default: torch.backends)\n"
    "  --mode MODE         lazy, eager or off (overrides the environment)\n"
    "  --json              {\"device\",\"ok\",\"mode\",\"backend\",\"error\",\"index_us\",\n"
    "                       \"create_us\",\"start_us\",\"lookup_us\",\"total_us\",\n"
    "                       \"create_overlapped\",\"loaded\":\n"
    "                       [{\"backend\",\"library\",\"state\",\"dlopen_us\",\"init_us\",\n"
    "                       \"load_us\",\"error\"}]}\n"
    "                      create_overlapped: the loader was created while the\n"
    "                      cached index's files were checked on the other CPU\n"
    "                      (its time is then inside index_us)\n";

double now_us() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

std::string fixed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// What `epload load` was asked.
struct LoadArgs {
  IndexOptions options;
  std::string group = "torch.backends", mode_text, device;
  bool json = false;
};

// Parses the arguments into `a`: k_ok, or k_usage after the usage error.
int parse_args(std::vector<std::string_view>& args, LoadArgs& a) {
  bool has_device = false;
  const int scanned = scan_args("load", args, 0, a.options, [&](std::string_view arg, std::size_t& i) {
    if (int r = take_option("load", args, i, "--group", a.group)) return r;
    if (int r = take_option("load", args, i, "--mode", a.mode_text)) {
      if (r < 0 || parse_load_mode(a.mode_text)) return r;
      usage_error("load", "--mode takes lazy, eager or off, not '" + a.mode_text + "'");
      return -1;
    }
    if (int r = take_flag(arg, "--json", i, a.json)) return r;
    if (arg.starts_with("-") || has_device) return 0;
    a.device.assign(arg);
    has_device = true;
    ++i;
    return 1;
  });
  if (scanned != k_ok) return scanned;
  if (!has_device) return usage_error("load", "which DEVICE? (see 'epload devices')");
  if (std::string why = detail::device_name_problem(a.device); !why.empty()) return usage_error("load", why);
  return k_ok;
}

// The clock at the end of each phase (microseconds), from t0 at the start.
struct Times {
  double t0 = 0, index = 0, create = 0, start = 0, lookup = 0;
  bool overlapped = false;  ///< the loader was created during the index's check
};

// Opens the index and creates the loader.  On a cache hit under `full`, the
// loader is created while the index's stat calls run on the other CPU; it is
// kept only if the index is.  Null (the error printed) on failure.
std::unique_ptr<Loader> open_and_create(LoadArgs& a, std::shared_ptr<const Index>& index, Times& t) {
  CacheOptions co;
  a.options.groups = {a.group, std::string(k_devices_group)};  // the loader needs these only
  std::shared_ptr<const Index> prepared_for;
  std::optional<Result<std::unique_ptr<Loader>>> prepared;
  auto prepare = [&](const CacheOptions& c, const std::shared_ptr<const Index>& candidate) {
    auto lo = host_loader_options(c, a.group, a.mode_text);
    if (!lo) return;  // reported below
    prepared_for = candidate;
    prepared.emplace(Loader::create(candidate, lo.value()));
  };
  index = open_index_or_report(a.options, &co, prepare);
  if (!index) return nullptr;
  t.index = now_us();
  t.overlapped = prepared && prepared_for == index;
  auto created = [&]() -> Result<std::unique_ptr<Loader>> {
    if (t.overlapped) return std::move(*prepared);
    auto lo = host_loader_options(co, a.group, a.mode_text);
    if (!lo) return lo.error();
    return Loader::create(index, lo.value());
  }();
  prepared.reset();  // a loader of a stale index, if any
  if (!created) {
    fail(created.error().message);
    return nullptr;
  }
  t.create = now_us();
  return std::move(created).value();
}

// What the report shows of the loader after the lookup.
struct Outcome {
  const LoadArgs& args;
  const Loader& loader;
  const Result<void*>& found;
  std::string provider;                         ///< the device's backend, when found
  std::vector<std::size_t> order;               ///< backends loaded, in order
  std::map<std::size_t, BackendStatus> loaded;  ///< their status
  Times t;
};

std::string json_report(const Outcome& o) {
  const Times& t = o.t;
  std::string out;
  JsonObject top(out);
  top.str("device", o.args.device)
      .boolean("ok", o.found.ok())
      .str("mode", to_string(o.loader.mode()))
      .str_or_null("backend", o.provider)
      .str_or_null("error", o.found ? "" : o.found.error().message)
      .raw("index_us", fixed(t.index - t.t0))
      .raw("create_us", fixed(t.create - t.index))
      .raw("start_us", fixed(t.start - t.create))
      .raw("lookup_us", fixed(t.lookup - t.start))
      .raw("total_us", fixed(t.lookup - t.t0))
      .boolean("create_overlapped", t.overlapped)
      .member("loaded") += '[';
  for (std::size_t k = 0; k < o.order.size(); ++k) {
    const BackendStatus& b = o.loaded.at(o.order[k]);
    out += k ? ",\n" : "\n";
    JsonObject(out)
        .str("backend", b.name)
        .str("library", b.library)
        .str("state", to_string(b.state))
        .raw("dlopen_us", fixed(static_cast<double>(b.dlopen_ns) / 1e3))
        .raw("init_us", fixed(static_cast<double>(b.init_ns) / 1e3))
        .raw("load_us", fixed(static_cast<double>(b.load_ns) / 1e3))
        .str_or_null("error", b.error)
        .close();
  }
  out += ']';
  top.close();
  out += '\n';
  return out;
}

std::string text_report(const Outcome& o) {
  const Times& t = o.t;
  std::string out;
  if (o.found) {
    out += "device " + o.args.device + ": ready (backend " + o.provider + ", mode " + to_string(o.loader.mode()) +
           ")\n";
  }
  double sum = 0;
  for (std::size_t k : o.order) sum += static_cast<double>(o.loaded.at(k).load_ns) / 1e3;
  if (o.order.empty()) {
    out += "loaded no backend\n";
  } else {
    out += "loaded " + std::to_string(o.order.size()) + " backend(s), " + fixed(sum) + " us in all:\n";
  }
  char line[1024];
  std::size_t shown = 0;
  for (std::size_t k : o.order) {
    const BackendStatus& b = o.loaded.at(k);
    if (++shown > 50 && o.order.size() > 60) continue;  // eager at 1,000: keep it readable
    std::snprintf(line, sizeof line, "  %-28s %-7s dlopen %9.1f us  init %9.1f us  total %9.1f us\n",
                  b.name.c_str(), to_string(b.state), static_cast<double>(b.dlopen_ns) / 1e3,
                  static_cast<double>(b.init_ns) / 1e3, static_cast<double>(b.load_ns) / 1e3);
    out += line;
  }
  if (o.order.size() > 60) out += "  ... (" + std::to_string(o.order.size() - 50) + " more; --json lists all)\n";
  out += "phases: index " + fixed(t.index - t.t0) + " us, loader " + fixed(t.create - t.index) +
         (t.overlapped ? " us (created while the index was checked, inside the index's time)" : " us") +
         ", start " + fixed(t.start - t.create) + " us, lookup " + fixed(t.lookup - t.start) + " us, total " +
         fixed(t.lookup - t.t0) + " us\n";
  return out;
}

int run(std::vector<std::string_view>& args) {
  Times t;
  t.t0 = now_us();
  LoadArgs a;
  if (int r = parse_args(args, a); r != k_ok) return r;
  std::shared_ptr<const Index> index;
  std::unique_ptr<Loader> created = open_and_create(a, index, t);
  if (!created) return k_error;
  Loader& loader = *created;
  loader.start();
  t.start = now_us();
  auto found = loader.lookup(a.device);
  t.lookup = now_us();
  if (a.options.verbose && !loader.store_note().empty()) {
    std::fprintf(stderr, "epload: learned-devices store: %s\n", loader.store_note().c_str());
  }

  // Only the backends that were loaded: a listing of all 1,000 would cost
  // more than the lazy load it reports on.
  Outcome o{a, loader, found, {}, loader.load_order(), {}, t};
  for (std::size_t k : o.order) o.loaded.emplace(k, loader.backend(k));
  if (auto p = loader.provider(a.device); p && found) o.provider = loader.backend(*p).name;
  write_out(a.json ? json_report(o) : text_report(o));
  keep_until_exit(std::move(created));  // the answer is out: no teardown
  keep_until_exit(std::move(index));
  if (!found) return fail(found.error().message);
  return k_ok;
}

Registration k_registration{{"load", "load the backend of a device (lazy or eager) and time it",
                             k_help, run}};

}  // namespace
}  // namespace epload::cli
