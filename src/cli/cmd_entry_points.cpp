// cmd_entry_points.cpp — `epload entry-points`: importlib.metadata's
// entry_points() answer, from the cached index.
//
// A distribution whose METADATA cannot be decoded (not UTF-8) or read is
// named by its directory, so entry_points() answers, but importlib raises
// when its `ep.dist.name` or `ep.dist.version` is read.  The index names it
// "" (as it names one without a Name header, None in importlib) and keeps
// no reason, so for such a row the files are read again here: rare, and
// never on the common path.  Its rows stay, their two fields marked as
// unreadable (JSON null and "dist_error"), with one warning per file.

#include <cstdio>         // the warning
#include <string>         // output buffer
#include <unordered_map>  // why each distribution named "" is

#include "cli/cli.hpp"
#include "scan_meta.hpp"  // dist_name_error

namespace epload::cli {
namespace {

const char k_help[] =
    "usage: epload entry-points [index options] [--group G] [--name N] [--json]\n\n"
    "Prints the entry points importlib.metadata.entry_points() would return for\n"
    "the search paths, in its order: groups sorted by name, discovery order\n"
    "within a group.  Fails (exit 1) where importlib would raise, naming the\n"
    "file and line.\n\n"
    "Options:\n"
    "  --group G           only entry points of group G\n"
    "  --name N            only entry points named N\n"
    "  --json              one JSON array of {\"group\",\"name\",\"value\",\"dist\",\"version\"}\n"
    "                      (default: one line per entry point: group name = value  [dist version])\n\n"
    "A distribution whose METADATA is not UTF-8 or cannot be read (importlib\n"
    "raises reading ep.dist.name) keeps its entry points, shown with\n"
    "[unreadable METADATA] (JSON: \"dist\" and \"version\" null, \"dist_error\"\n"
    "naming the file), and a warning on stderr.\n";

int run(std::vector<std::string_view>& args) {
  IndexOptions options;
  std::string group, name;
  bool has_group = false, has_name = false, json = false;
  const int scanned = scan_args("entry-points", args, 0, options, [&](std::string_view a, std::size_t& i) {
    if (int r = take_option("entry-points", args, i, "--group", group)) {
      has_group = true;
      return r;
    }
    if (int r = take_option("entry-points", args, i, "--name", name)) {
      has_name = true;
      return r;
    }
    return take_flag(a, "--json", i, json);
  });
  if (scanned != k_ok) return scanned;
  if (has_group) options.groups = {group};  // a hit then reads only this group
  auto index = open_index_or_report(options);
  if (!index) return k_error;
  if (const Distribution* bad = index->first_error()) {
    // importlib.metadata.entry_points() raises for this distribution whatever
    // the selection, so an exact answer is an error too.
    return fail(std::string(bad->error) +
                "\n(importlib.metadata fails on this distribution as well: fix or remove it)");
  }
  std::span<const EntryPoint> eps = has_group ? index->group(group) : index->entry_points();
  std::unordered_map<const Distribution*, std::string> unreadable;
  auto dist_error = [&unreadable](const Distribution* d) -> const std::string& {
    auto [it, fresh] = unreadable.try_emplace(d);
    if (fresh) {
      it->second = detail::dist_name_error(d->metadata_dir);
      if (!it->second.empty()) {
        std::fprintf(stderr, "epload: warning: %s (ep.dist.name and ep.dist.version raise for its entry points)\n",
                     it->second.c_str());
      }
    }
    return it->second;
  };
  // Written in chunks: a 100 KB answer built whole costs ~25 fresh pages,
  // each a page fault (~2 µs on the VMs measured here).
  constexpr std::size_t k_chunk = 32 * 1024;
  std::string out;
  out.reserve(k_chunk + 4096);
  if (json) out.push_back('[');
  bool first = true;
  for (const EntryPoint& ep : eps) {
    if (has_name && ep.name != name) continue;
    const std::string* why = ep.dist->name.empty() ? &dist_error(ep.dist) : nullptr;
    if (why != nullptr && why->empty()) why = nullptr;
    if (json) {
      if (!first) out.push_back(',');
      out.push_back('\n');
      JsonObject row(out);
      row.str("group", ep.group).str("name", ep.name).str("value", ep.value);
      if (why == nullptr) {
        row.str("dist", ep.dist->name).str("version", ep.dist->version);
      } else {
        row.raw("dist", "null").raw("version", "null").str("dist_error", *why);
      }
      row.close();
    } else {
      out.append(ep.group).append(" ").append(ep.name).append(" = ").append(ep.value);
      if (why == nullptr) {
        out.append("  [").append(ep.dist->name).append(" ").append(ep.dist->version).append("]\n");
      } else {
        out.append("  [unreadable METADATA]\n");
      }
    }
    first = false;
    if (out.size() >= k_chunk) {
      write_out(out);
      out.clear();
    }
  }
  if (json) out += first ? "]\n" : "\n]\n";
  write_out(out);
  keep_until_exit(std::move(index));  // the answer is out: no teardown
  return k_ok;
}

Registration k_registration{{"entry-points", "list entry points (importlib.metadata's answer)",
                             k_help, run}};

}  // namespace
}  // namespace epload::cli
