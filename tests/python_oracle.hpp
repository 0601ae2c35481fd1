// python_oracle.hpp — the test interpreter (EPLOAD_TEST_PYTHON) as the
// oracle: tests run a snippet on their inputs and compare its output with
// epload's answers.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>  // mkstemp
#include <unistd.h>  // unlink

#include <cstdio>  // popen
#include <string>

namespace epload {

// Runs `code` with the test interpreter; returns its stdout.  `input` is
// written to a temp file whose path is argv[1].
inline std::string run_python(const std::string& code, const std::string& input = "") {
  char in_path[] = "/tmp/epload-python-input-XXXXXX";
  const int fd = ::mkstemp(in_path);
  EXPECT_GE(fd, 0);
  FILE* f = ::fdopen(fd, "wb");
  std::fwrite(input.data(), 1, input.size(), f);
  std::fclose(f);
  char code_path[] = "/tmp/epload-python-code-XXXXXX";
  const int cfd = ::mkstemp(code_path);
  FILE* cf = ::fdopen(cfd, "wb");
  std::fwrite(code.data(), 1, code.size(), cf);
  std::fclose(cf);
  const std::string cmd =
      std::string(EPLOAD_TEST_PYTHON) + " -I -S " + code_path + " " + in_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << "python failed: " << cmd;
  ::unlink(in_path);
  ::unlink(code_path);
  return out;
}

}  // namespace epload
