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
    "Loads what DEVICE needs, as a host would: lazy (default) loads only the\n"
    "backend providing DEVICE (and the hooks); eager loads every backend of\n"
    "group G in index order first, as PyTorch does; off loads nothing.\n"
    "Prints which backends were loaded, in order, and what each cost (dlopen,\n"
    "init, whole load, in microseconds), and the time of each phase.\n"
    "Without --mode: EPLOAD_MODE, else lazy; TORCH_DEVICE_BACKEND_AUTOLOAD\n"
    "set to anything but 1 means off.  EPLOAD_ENABLE / EPLOAD_DISABLE apply.\n"
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

int run(std::vector<std::string_view>& args) {
  const double t0 = now_us();
  IndexOptions options;
  std::string group = "torch.backends", mode_text, device;
  bool json = false, has_device = false;
  for (std::size_t i = 0; i < args.size();) {
    int r = parse_index_option("load", args, i, options);
    if (r < 0) return k_usage;
    if (r > 0) continue;
    std::string_view a = args[i];
    if (a == "--group" || a.starts_with("--group=")) {
      if (!take_value("load", args, i, "--group", group)) return k_usage;
    } else if (a == "--mode" || a.starts_with("--mode=")) {
      if (!take_value("load", args, i, "--mode", mode_text)) return k_usage;
      if (!parse_load_mode(mode_text)) {
        return usage_error("load", "--mode takes lazy, eager or off, not '" + mode_text + "'");
      }
    } else if (a == "--json") {
      json = true;
      ++i;
    } else if (!a.starts_with("-") && !has_device) {
      device.assign(a);
      has_device = true;
      ++i;
    } else {
      return usage_error("load", "unknown argument '" + std::string(a) + "'");
    }
  }
  if (!has_device) return usage_error("load", "which DEVICE? (see 'epload devices')");
  if (std::string why = detail::device_name_problem(device); !why.empty()) return usage_error("load", why);

  CacheOptions co;
  options.groups = {group, std::string(k_devices_group)};  // the loader needs these only
  // On a cache hit under `full`, the loader is created while the index's
  // stat calls run on the other CPU; it is kept only if the index is.
  std::shared_ptr<const Index> prepared_for;
  std::optional<Result<std::unique_ptr<Loader>>> prepared;
  auto prepare = [&](const CacheOptions& c, const std::shared_ptr<const Index>& candidate) {
    auto lo = host_loader_options(c, group, mode_text);
    if (!lo) return;  // reported below
    prepared_for = candidate;
    prepared.emplace(Loader::create(candidate, lo.value()));
  };
  auto index = open_index_or_report(options, &co, prepare);
  if (!index) return k_error;
  const double t_index = now_us();
  const bool overlapped = prepared && prepared_for == index;
  auto created = [&]() -> Result<std::unique_ptr<Loader>> {
    if (overlapped) return std::move(*prepared);
    auto lo = host_loader_options(co, group, mode_text);
    if (!lo) return lo.error();
    return Loader::create(index, lo.value());
  }();
  prepared.reset();  // a loader of a stale index, if any
  if (!created) return fail(created.error().message);
  Loader& loader = *created.value();
  const double t_create = now_us();
  loader.start();
  const double t_start = now_us();
  auto found = loader.lookup(device);
  const double t_lookup = now_us();
  if (options.verbose && !loader.store_note().empty()) {
    std::fprintf(stderr, "epload: learned-devices store: %s\n", loader.store_note().c_str());
  }

  // Only the backends that were loaded: a listing of all 1,000 would cost
  // more than the lazy load it reports on.
  const auto order = loader.load_order();
  std::map<std::size_t, BackendStatus> backends;
  for (std::size_t k : order) backends.emplace(k, loader.backend(k));
  std::string provider;
  if (auto p = loader.provider(device); p && found) provider = loader.backend(*p).name;
  std::string out;
  if (json) {
    out += "{\"device\":";
    append_json_string(out, device);
    out += found ? ",\"ok\":true" : ",\"ok\":false";
    out += ",\"mode\":\"";
    out += to_string(loader.mode());
    out += "\",\"backend\":";
    if (provider.empty()) {
      out += "null";
    } else {
      append_json_string(out, provider);
    }
    out += ",\"error\":";
    if (found) {
      out += "null";
    } else {
      append_json_string(out, found.error().message);
    }
    out += ",\"index_us\":" + fixed(t_index - t0) + ",\"create_us\":" + fixed(t_create - t_index) +
           ",\"start_us\":" + fixed(t_start - t_create) + ",\"lookup_us\":" + fixed(t_lookup - t_start) +
           ",\"total_us\":" + fixed(t_lookup - t0) +
           ",\"create_overlapped\":" + (overlapped ? "true" : "false") + ",\"loaded\":[";
    for (std::size_t k = 0; k < order.size(); ++k) {
      const BackendStatus& b = backends.at(order[k]);
      out += k ? ",\n" : "\n";
      out += "{\"backend\":";
      append_json_string(out, b.name);
      out += ",\"library\":";
      append_json_string(out, b.library);
      out += ",\"state\":\"";
      out += to_string(b.state);
      out += "\",\"dlopen_us\":" + fixed(static_cast<double>(b.dlopen_ns) / 1e3) +
             ",\"init_us\":" + fixed(static_cast<double>(b.init_ns) / 1e3) +
             ",\"load_us\":" + fixed(static_cast<double>(b.load_ns) / 1e3) + ",\"error\":";
      if (b.error.empty()) {
        out += "null";
      } else {
        append_json_string(out, b.error);
      }
      out += "}";
    }
    out += "]}\n";
  } else {
    if (found) {
      out += "device " + device + ": ready (backend " + provider + ", mode " + to_string(loader.mode()) + ")\n";
    }
    double sum = 0;
    for (std::size_t k : order) sum += static_cast<double>(backends.at(k).load_ns) / 1e3;
    out += "loaded " + std::to_string(order.size()) + " backend(s), " + fixed(sum) + " us in all:\n";
    char line[1024];
    std::size_t shown = 0;
    for (std::size_t k : order) {
      const BackendStatus& b = backends.at(k);
      if (++shown > 50 && order.size() > 60) continue;  // eager at 1,000: keep it readable
      std::snprintf(line, sizeof line, "  %-28s %-7s dlopen %9.1f us  init %9.1f us  total %9.1f us\n",
                    b.name.c_str(), to_string(b.state), static_cast<double>(b.dlopen_ns) / 1e3,
                    static_cast<double>(b.init_ns) / 1e3, static_cast<double>(b.load_ns) / 1e3);
      out += line;
    }
    if (order.size() > 60) out += "  ... (" + std::to_string(order.size() - 50) + " more; --json lists all)\n";
    out += "phases: index " + fixed(t_index - t0) + " us, loader " + fixed(t_create - t_index) +
           (overlapped ? " us (created while the index was checked, inside the index's time)" : " us") +
           ", start " + fixed(t_start - t_create) + " us, lookup " + fixed(t_lookup - t_start) +
           " us, total " + fixed(t_lookup - t0) + " us\n";
  }
  write_out(out);
  keep_until_exit(std::move(created.value()));  // the answer is out: no teardown
  keep_until_exit(std::move(index));
  if (!found) return fail(found.error().message);
  return k_ok;
}

Registration k_registration{{"load", "load the backend of a device (lazy or eager) and time it",
                             k_help, run}};

}  // namespace
}  // namespace epload::cli
