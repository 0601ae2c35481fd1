// cmd_devices.cpp — `epload devices`: every device the backends of a group
// provide, known without loading any of them (declared in the library or
// learned by an earlier run), and the backends whose devices are unknown or
// that cannot load.
#include <cstdio>  // fprintf
#include <string>  // output buffer
#include <vector>  // warnings

#include "cli/cli.hpp"
#include "cli/host_options.hpp"
#include "epload/loader.hpp"
#include "python_front.hpp"  // clash_warnings
#include "torch_rules.hpp"   // the rules of PyTorch's group

namespace epload::cli {
namespace {

const char k_help[] =
    "usage: epload devices [index options] [--group G] [--json]\n\n"
    "Lists the devices provided by the backends of group G (default\n"
    "torch.backends) without loading any backend: device, backend, how it is\n"
    "known (declared: by its distribution's epload.devices entry points;\n"
    "section: in the library's epload_devices ELF section; learned: the backend\n"
    "registered it when an earlier run loaded it, the CLI's or a Python\n"
    "program's), how the backend provided it when learned (KIND: attr, an\n"
    "attribute of the host module; privateuse1, PyTorch's PrivateUse1 name) and\n"
    "the backend's status: ok, failed (it cannot load: see below), last failed\n"
    "(its last load failed), crashed <time> (a process died in its init: lazy\n"
    "loading skips it until its files change or EPLOAD_ENABLE names it),\n"
    "disabled.  Then the backends whose devices are\n"
    "not known until they load,\n"
    "hooks, and backends that cannot load, with the reason.  A backend's last\n"
    "failed load (this command's or a Python program's) is shown with its cause\n"
    "until it loads; it is for display: every process tries the backend again.\n"
    "EPLOAD_ENABLE / EPLOAD_DISABLE apply (disabled backends are listed as such).\n\n"
    "Options:\n"
    "  --group G           the autoload group (default: torch.backends)\n"
    "  --json              {\"devices\": [{\"device\",\"backend\",\"dist\",\"how\",\"kind\",\"state\",\"status\"}],\n"
    "                       \"backends\": [{\"backend\",\"dist\",\"kind\",\"library\",\"state\",\n"
    "                       \"devices_known\",\"hook\",\"devices\",\"alias_of\",\"error\",\"last_failure\",\n"
    "                       \"conflicts\",\"crashed_at\"}], \"warnings\": [...]}\n"
    "Warnings (on stderr too): a device two backends declare, a device type\n"
    "PyTorch has itself (group torch.backends), a native library in\n"
    "torch.backends (PyTorch calls its entry points as Python callables).\n";

const char* how(DeviceSource s) { return to_string(s); }

// How the backend provided device `name`, when learned with a kind; else "".
std::string kind_of(const BackendStatus& b, const std::string& name) {
  std::string kind;
  for (std::size_t j = 0; j < b.devices.size(); ++j) {
    if (b.devices[j] == name) kind = b.kinds[j];
  }
  return kind;
}

// What a listing that loads nothing can say of a backend: what stops it, or
// what its last load did.
std::string status_of(const BackendStatus& b) {
  if (b.state == BackendState::disabled) return "disabled";
  if (!b.crashed_at.empty()) return "crashed " + b.crashed_at;
  if (b.state == BackendState::failed) return "failed";
  if (!b.last_failure.empty()) return "last failed";
  return "ok";
}

// What the listing warns about (also on stderr): devices two backends
// declare, devices that are PyTorch's own types, native libraries in
// PyTorch's group.  One line each, naming both sides.
std::vector<std::string> warnings_of(const Loader& loader, const std::vector<BackendStatus>& backends,
                                     std::string_view group) {
  const bool torch = group == detail::k_torch_group;
  std::vector<std::string> out = clash_warnings(loader, torch);
  for (const BackendStatus& b : backends) {
    if (torch && b.kind == BackendKind::native) {
      out.push_back("backend '" + b.name + "': " + detail::native_in_torch_group(b.name));
    }
  }
  return out;
}

// The listing as JSON (see k_help).
std::string json_listing(const std::vector<BackendStatus>& backends, const std::vector<DeviceStatus>& devices,
                         const std::vector<std::string>& warnings) {
  std::string out;
  out += "{\"devices\":[";
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const DeviceStatus& d = devices[k];
    const BackendStatus& b = backends[d.backend];
    out += k ? ",\n" : "\n";
    JsonObject(out)
        .str("device", d.name)
        .str("backend", b.name)
        .str("dist", b.dist)
        .str("how", how(d.source))
        .str("kind", kind_of(b, d.name))
        .str("state", to_string(b.state))
        .str("status", status_of(b))
        .close();
  }
  out += "],\n\"backends\":[";
  for (std::size_t k = 0; k < backends.size(); ++k) {
    const BackendStatus& b = backends[k];
    out += k ? ",\n" : "\n";
    JsonObject(out)
        .str("backend", b.name)
        .str("dist", b.dist)
        .str("kind", to_string(b.kind))
        .str("library", b.library)
        .str("state", to_string(b.state))
        .boolean("devices_known", b.devices_known)
        .boolean("hook", b.hook)
        .strings("devices", b.devices)
        .str_or_null("alias_of", b.alias_of)
        .str_or_null("error", b.error)
        .str_or_null("last_failure", b.last_failure)
        .strings("conflicts", b.conflicts)
        .str_or_null("crashed_at", b.crashed_at)
        .close();
  }
  out += "],\n\"warnings\":[";
  for (std::size_t k = 0; k < warnings.size(); ++k) {
    if (k) out += ',';
    append_json_string(out, warnings[k]);
  }
  out += "]}\n";
  return out;
}

// The listing as text: a table of devices, then notes on the other backends.
std::string text_listing(const std::vector<BackendStatus>& backends, const std::vector<DeviceStatus>& devices,
                         const std::vector<std::string>& warnings, LoadMode mode) {
  std::string out;
  std::size_t w_dev = 6, w_backend = 7, w_kind = 4;
  for (const DeviceStatus& d : devices) {
    w_dev = std::max(w_dev, d.name.size());
    w_backend = std::max(w_backend, backends[d.backend].name.size());
    w_kind = std::max(w_kind, kind_of(backends[d.backend], d.name).size());
  }
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s  %-*s  %-8s  %-*s  %s\n", static_cast<int>(w_dev), "DEVICE",
                static_cast<int>(w_backend), "BACKEND", "HOW", static_cast<int>(w_kind), "KIND", "STATUS");
  out += line;
  for (const DeviceStatus& d : devices) {
    const BackendStatus& b = backends[d.backend];
    const std::string kind = kind_of(b, d.name);
    std::snprintf(line, sizeof line, "%-*s  %-*s  %-8s  %-*s  %s\n", static_cast<int>(w_dev), d.name.c_str(),
                  static_cast<int>(w_backend), b.name.c_str(), how(d.source), static_cast<int>(w_kind),
                  kind.empty() ? "-" : kind.c_str(), status_of(b).c_str());
    out += line;
  }
  std::string unknown, hooks, broken, other, last, warned;
  for (const BackendStatus& b : backends) {
    if (!b.alias_of.empty()) {
      other += "  " + b.name + ": the same library as " + b.alias_of + "\n";
    } else if (b.state == BackendState::failed || b.state == BackendState::disabled) {
      broken += "  " + b.error + "\n";
    } else if (b.kind == BackendKind::python && !b.devices_known) {
      other += "  " + b.name + ": Python backend (" + b.library + "); the Python layer loads it\n";
    } else if (b.hook) {
      hooks += "  " + b.name + " (" + b.library + ")\n";
    } else if (!b.devices_known) {
      unknown += "  " + b.name + " (" + b.library + ")\n";
    }
    if (!b.last_failure.empty() && b.state != BackendState::failed) {
      last += "  " + b.name + ": " + b.last_failure + "\n";
    }
  }
  for (const std::string& w : warnings) warned += "  " + w + "\n";
  if (!unknown.empty()) out += "\nbackends whose devices are known only after loading them:\n" + unknown;
  if (!hooks.empty()) out += "\nhooks (no device; run at start):\n" + hooks;
  if (!other.empty()) out += "\nnotes:\n" + other;
  if (!warned.empty()) out += "\nwarnings:\n" + warned;
  if (!broken.empty()) out += "\nbackends that cannot load:\n" + broken;
  if (!last.empty()) {
    out += mode == LoadMode::eager
               ? "\nlast failed load (an earlier run's; tried again at every start, eager mode):\n"
               : "\nlast failed load (an earlier run's; tried again at the first use of its device, lazy mode):\n";
    out += last;
  }
  return out;
}

int run(std::vector<std::string_view>& args) {
  IndexOptions options;
  std::string group = "torch.backends";
  bool json = false;
  const int scanned = scan_args("devices", args, 0, options, [&](std::string_view a, std::size_t& i) {
    if (int r = take_option("devices", args, i, "--group", group)) return r;
    return take_flag(a, "--json", i, json);
  });
  if (scanned != k_ok) return scanned;
  CacheOptions co;
  options.groups = {group, std::string(k_devices_group)};  // the loader needs these only
  auto index = open_index_or_report(options, &co);
  if (!index) return k_error;
  auto options_of_host = host_loader_options(co, group, "");
  if (!options_of_host) return fail(options_of_host.error().message);
  LoaderOptions lo = std::move(options_of_host.value());
  lo.check_libraries = true;  // a listing must be current: stat every library
  auto loader = Loader::create(index, lo);
  if (!loader) return fail(loader.error().message);
  if (options.verbose && !loader.value()->store_note().empty()) {
    std::fprintf(stderr, "epload: learned-devices store: %s\n", loader.value()->store_note().c_str());
  }
  const auto backends = loader.value()->backends();
  const auto devices = loader.value()->devices();

  const std::vector<std::string> warnings = warnings_of(*loader.value(), backends, group);
  // On stderr too, a screenful at most (the listing has them all).
  for (std::size_t k = 0; k < warnings.size() && k < 10; ++k) {
    std::fprintf(stderr, "epload: warning: %s\n", warnings[k].c_str());
  }
  if (warnings.size() > 10) {
    std::fprintf(stderr, "epload: warning: ... and %zu more (listed under \"warnings\")\n", warnings.size() - 10);
  }
  const std::string out = json ? json_listing(backends, devices, warnings)
                               : text_listing(backends, devices, warnings, loader.value()->mode());
  write_out(out);
  return k_ok;
}

Registration k_registration{{"devices", "list the devices backends provide, without loading them",
                             k_help, run}};

}  // namespace
}  // namespace epload::cli
