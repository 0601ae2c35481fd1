// cmd_entry_points.cpp — `epload entry-points`: importlib.metadata's
// entry_points() answer, from the cached index.

#include <string>  // output buffer

#include "cli/cli.hpp"

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
    "                      (default: one line per entry point: group name = value  [dist version])\n";

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
  // Written in chunks: a 100 KB answer built whole costs ~25 fresh pages,
  // each a page fault (~2 µs on the VMs measured here).
  constexpr std::size_t k_chunk = 32 * 1024;
  std::string out;
  out.reserve(k_chunk + 4096);
  if (json) out.push_back('[');
  bool first = true;
  for (const EntryPoint& ep : eps) {
    if (has_name && ep.name != name) continue;
    if (json) {
      if (!first) out.push_back(',');
      out.push_back('\n');
      JsonObject(out)
          .str("group", ep.group)
          .str("name", ep.name)
          .str("value", ep.value)
          .str("dist", ep.dist->name)
          .str("version", ep.dist->version)
          .close();
    } else {
      out.append(ep.group).append(" ").append(ep.name).append(" = ").append(ep.value);
      out.append("  [").append(ep.dist->name).append(" ").append(ep.dist->version).append("]\n");
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
