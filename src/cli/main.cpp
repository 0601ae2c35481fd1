// main.cpp — `epload`: dispatches to the subcommands registered by the
// cmd_*.cpp files.  Links mimalloc (see CMakeLists.txt): the CLI is a short
// process that allocates many small strings while scanning, which is exactly
// what mimalloc is good at; the library itself never replaces malloc.

#include <cerrno>       // errno
#include <cstdio>       // printf
#include <cstring>      // strerror
#include <string_view>  // argv views
#include <vector>       // args

#include "cli/cli.hpp"

namespace {

void print_help() {
  std::printf(
      "usage: epload <command> [options]\n\n"
      "Fast, cached discovery of Python entry points and lazy loading of the\n"
      "backends they declare.\n\nCommands:\n");
  for (const auto& c : epload::cli::commands()) std::printf("  %-14s %s\n", c.name, c.summary);
  std::printf(
      "\nRun 'epload <command> --help' for a command's options.\n"
      "Exit status: 0 success, 1 error, 2 usage error.\n");
}

/// What a command printed must reach its reader: a failed write to standard
/// output (a full disk, a closed descriptor, a reader gone with SIGPIPE
/// ignored) turns success into an error, with the cause, instead of
/// exiting 0 with the answer lost.
int flushed(int status) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  const int err = epload::cli::write_out_errno() != 0 ? epload::cli::write_out_errno() : errno;
  std::fprintf(stderr, "epload: cannot write to standard output: %s\n",
               err != 0 ? std::strerror(err) : "write error");
  return status == epload::cli::k_ok ? epload::cli::k_error : status;
}

int run(int argc, char** argv) {
  using namespace epload::cli;
  if (argc < 2) {
    print_help();
    return k_usage;
  }
  std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_help();
    return k_ok;
  }
  if (name == "--version") {
    std::printf("epload 0.1.0 (%s)\n", EPLOAD_BUILD_DESCRIPTION);  // see CMakeLists.txt
    return k_ok;
  }
  for (const auto& c : commands()) {
    if (name != c.name) continue;
    std::vector<std::string_view> args(argv + 2, argv + argc);
    for (std::string_view a : args) {
      if (a == "--help" || a == "-h") {
        std::fputs(c.help, stdout);
        std::fputs("\n", stdout);
        std::fputs(k_index_options_help, stdout);
        return k_ok;
      }
      if (a == "--") break;
    }
    return c.run(args);
  }
  std::fprintf(stderr, "epload: unknown command '%s'\nTry 'epload --help'.\n", argv[1]);
  return k_usage;
}

}  // namespace

int main(int argc, char** argv) {
  return flushed(run(argc, argv));
}
