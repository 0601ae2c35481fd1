// profile_imports_report.cpp — the imports part of `epload profile --
// COMMAND`'s report: the slowest imports by self and by cumulative time, the
// imports of each process, and those each backend's load caused; as text
// and as JSON members.  The figures come from profile_imports.hpp.
#include <algorithm>  // min

#include "cli/profile_common.hpp"

namespace epload::cli::profiling {

namespace {

constexpr std::size_t k_text_rows = 12;      // per table of the text report
constexpr std::size_t k_json_cumulative = 40;  // by_cumulative's length (by_self lists all)
constexpr std::size_t k_direct_shown = 4;      // per backend, in the text report

void import_json(std::string& out, const prof::ImportTotal& t) {
  JsonObject(out)
      .str("module", t.module)
      .raw("self_us", us(t.self_ns))
      .raw("cumulative_us", us(t.cumulative_ns))
      .raw("count", std::to_string(t.count))
      .close();
}

}  // namespace

const prof::BackendImports* imports_of(const prof::ImportSummary& s, const std::string& backend) {
  for (const prof::BackendImports& b : s.backends) {
    if (b.backend == backend) return &b;
  }
  return nullptr;
}

void imports_text(std::string& out, const prof::Trace& trace, const prof::ImportSummary& s) {
  if (s.modules == 0) return;
  add_line(out, "\nimports: %llu module(s) in %zu process(es)", static_cast<unsigned long long>(s.modules),
           s.processes.size());
  out += ":";
  for (const prof::ProcessImports& p : s.processes) {
    std::string name = "pid";
    for (std::size_t k = 0; k < trace.pids.size(); ++k) {
      if (trace.pids[k] == p.pid && !trace.process_names[k].empty()) name = trace.process_names[k];
    }
    add_line(out, "\n  %s (pid %d): %llu modules, %s ms importing", name.c_str(), p.pid,
             static_cast<unsigned long long>(p.modules), ms(p.ns).c_str());
  }
  out += "\n";
  add_line(out, "\nslowest imports by self time (ms; the imports nested inside excluded):\n");
  add_line(out, "  %10s %11s  %s\n", "self", "cumulative", "module");
  for (std::size_t k = 0; k < std::min(k_text_rows, s.by_self.size()); ++k) {
    const prof::ImportTotal& t = s.by_self[k];
    add_line(out, "  %10s %11s  %s%s\n", ms(t.self_ns).c_str(), ms(t.cumulative_ns).c_str(), t.module.c_str(),
             t.count > 1 ? (" (x" + std::to_string(t.count) + ")").c_str() : "");
  }
  add_line(out, "\nslowest imports by cumulative time (ms; what they imported included):\n");
  add_line(out, "  %11s %10s  %s\n", "cumulative", "self", "module");
  for (std::size_t k = 0; k < std::min(k_text_rows, s.by_cumulative.size()); ++k) {
    const prof::ImportTotal& t = s.by_cumulative[k];
    add_line(out, "  %11s %10s  %s%s\n", ms(t.cumulative_ns).c_str(), ms(t.self_ns).c_str(), t.module.c_str(),
             t.count > 1 ? (" (x" + std::to_string(t.count) + ")").c_str() : "");
  }
}

void backend_imports_text(std::string& out, const prof::Summary& summary, const prof::ImportSummary& s) {
  bool header = false;
  for (const prof::BackendTotal& b : summary.backends) {
    const prof::BackendImports* bi = imports_of(s, b.name);
    if (bi == nullptr) continue;
    if (!header) out += "\nimports each backend's load caused (ms):\n";
    header = true;
    add_line(out, "  %s: %llu module(s), %s ms:", b.name.c_str(), static_cast<unsigned long long>(bi->modules),
             ms(bi->ns).c_str());
    for (std::size_t k = 0; k < std::min(k_direct_shown, bi->direct.size()); ++k) {
      add_line(out, "%s %s %s", k ? "," : "", bi->direct[k].module.c_str(), ms(bi->direct[k].cumulative_ns).c_str());
    }
    if (bi->direct.size() > k_direct_shown) add_line(out, ", ... %zu more", bi->direct.size() - k_direct_shown);
    out += "\n";
  }
}

void backend_imports_json(JsonObject& backend, const prof::ImportSummary& s, const std::string& name) {
  const prof::BackendImports* bi = imports_of(s, name);
  if (bi == nullptr) {
    backend.raw("imports", "null");
    return;
  }
  JsonObject o(backend.member("imports"));
  o.raw("modules", std::to_string(bi->modules)).raw("us", us(bi->ns));
  std::string& out = o.member("direct");
  out += '[';
  for (std::size_t k = 0; k < bi->direct.size(); ++k) {
    if (k) out += ',';
    import_json(out, bi->direct[k]);
  }
  out += ']';
  o.close();
}

void imports_json(JsonObject& top, const prof::ImportSummary& s) {
  JsonObject o(top.member("imports"));
  o.raw("modules", std::to_string(s.modules));
  std::string& out = o.member("processes");
  out += '[';
  for (std::size_t k = 0; k < s.processes.size(); ++k) {
    if (k) out += ',';
    JsonObject(out)
        .raw("pid", std::to_string(s.processes[k].pid))
        .raw("modules", std::to_string(s.processes[k].modules))
        .raw("us", us(s.processes[k].ns))
        .close();
  }
  out += ']';
  o.member("by_self") += '[';
  for (std::size_t k = 0; k < s.by_self.size(); ++k) {
    out += k ? ",\n" : "\n";
    import_json(out, s.by_self[k]);
  }
  out += ']';
  o.member("by_cumulative") += '[';
  for (std::size_t k = 0; k < std::min(k_json_cumulative, s.by_cumulative.size()); ++k) {
    out += k ? ",\n" : "\n";
    import_json(out, s.by_cumulative[k]);
  }
  out += ']';
  o.close();
}

}  // namespace epload::cli::profiling
