// main.cpp — `epload`: dispatches to the subcommands registered by the
// cmd_*.cpp files.  Links mimalloc (see CMakeLists.txt): the CLI is a short
// process that allocates many small strings while scanning, which is exactly
// what mimalloc is good at; the library itself never replaces malloc.
#include <signal.h>  // sigaction
#include <unistd.h>  // write

#include <cerrno>       // errno
#include <cstdio>       // printf
#include <cstring>      // strerror
#include <string_view>  // argv views
#include <vector>       // args

#include "cli/cli.hpp"
#include "memory.hpp"

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

/// The CLI reads its cache files through mappings of them (see
/// memory.hpp).  Should another program truncate such a file in place while
/// it is mapped, the next touch of a lost page raises SIGBUS: say what that
/// means before the signal ends the process as it would have.
void on_bus_error(int) {
  static const char k_message[] =
      "epload: bus error: a file mapped into memory lost pages while in use (a cache file truncated in\n"
      "place by another program, or a loaded backend's library overwritten); epload replaces its own\n"
      "files only whole, by rename, so none is left half-written; run the command again\n";
  (void)!::write(STDERR_FILENO, k_message, sizeof k_message - 1);
  ::raise(SIGBUS);  // the default action again (SA_RESETHAND), not blocked (SA_NODEFER)
}

void explain_bus_errors() {
  struct sigaction sa {};
  sa.sa_handler = on_bus_error;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  (void)::sigaction(SIGBUS, &sa, nullptr);
}

/// A file-size limit (ulimit -f) is met like a full disk: the write that
/// would pass it fails with EFBIG, which every writer handles (a cache file
/// not written, with a warning; output that cannot be written, an error),
/// instead of SIGXFSZ ending the process with a temporary file left
/// behind.  A handler rather than SIG_IGN: programs this one runs get the
/// default action back at exec, as they would without it.
void on_file_size_limit(int) {}

void meet_file_size_limits_as_errors() {
  struct sigaction sa {};
  sa.sa_handler = on_file_size_limit;
  sigemptyset(&sa.sa_mask);
  (void)::sigaction(SIGXFSZ, &sa, nullptr);
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
    std::printf("epload %s (%s)\n", EPLOAD_VERSION, EPLOAD_BUILD_DESCRIPTION);  // see CMakeLists.txt
    return k_ok;
  }
  for (const auto& c : commands()) {
    if (name != c.name) continue;
    std::vector<std::string_view> args(argv + 2, argv + argc);
    for (std::string_view a : args) {
      if (c.help == nullptr) break;  // a command that answers --help itself
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
  explain_bus_errors();
  meet_file_size_limits_as_errors();
  epload::detail::map_cache_files();  // a short-lived process (memory.hpp)
  return flushed(run(argc, argv));
}
