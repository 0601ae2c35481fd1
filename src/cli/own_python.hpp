// own_python.hpp — the interpreter the command targets when no --python is
// given: the one of its own environment, as a console script's.
#pragma once

#include <string>  // paths

namespace epload::cli {

/// The default --python: `python` (else `python3`) in the directory this
/// executable really lives in (a venv's or conda env's bin/, where pip put
/// the command), else "python3", looked up on PATH as execvp does.
/// Computed once per process.
const std::string& own_python();

/// How own_python() was chosen, for --verbose: "the interpreter beside this
/// command" or "python3 on PATH; none beside this command in DIR".
const std::string& own_python_reason();

}  // namespace epload::cli
