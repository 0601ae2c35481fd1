# What a build from source needs from the system, checked up front so that a
# machine lacking some of it gets ONE message naming every missing Debian
# package and the command that installs them, instead of the first failing
# find_package()'s trace.  Included by the top-level CMakeLists.txt twice:
#
#   before project():  epload_check_compiler() — without a C++ compiler
#                      project() itself would fail; the other packages are
#                      then judged by their headers in the usual places.
#   after project():   epload_check_packages() — find_package() for each,
#                      not REQUIRED; the REQUIRED calls that follow then
#                      only find what is already known to be there.
#
# A release build (EPLOAD_BUNDLED_DEPS=ON) needs neither simdjson nor
# mimalloc from the system.

function(epload_fail_missing missing)
  list(JOIN missing " " names)
  # Indented lines are printed as they are (CMake wraps the others).
  message(FATAL_ERROR
    "epload cannot be built from source here: these build packages are missing:\n"
    "    ${names}\n"
    "Install them (Debian 12 or 13):\n"
    "    sudo apt-get install ${names}\n"
    "or, from a checkout, scripts/setup.sh --deps-only.  A release wheel needs none of them "
    "(README.md, Install).")
endfunction()

macro(epload_check_compiler)
  set(epload_cxx "${CMAKE_CXX_COMPILER}")
  if(NOT epload_cxx)
    set(epload_cxx "$ENV{CXX}")
  endif()
  # A compiler named (CXX, as pip's build sets it from the interpreter's
  # sysconfig: x86_64-linux-gnu-g++ on Debian) must exist; else any on PATH.
  if(epload_cxx)
    string(REGEX REPLACE " .*" "" epload_cxx "${epload_cxx}")  # "ccache g++" style: the first word
    find_program(epload_cxx_found NAMES "${epload_cxx}" NO_CACHE)
  else()
    find_program(epload_cxx_found NAMES c++ g++ clang++ NO_CACHE)
  endif()
  set(epload_cxx "${epload_cxx_found}")
  if(NOT epload_cxx)
    set(epload_missing g++)
    if(NOT EPLOAD_BUNDLED_DEPS)
      foreach(pair "simdjson.h;libsimdjson-dev" "mimalloc.h;libmimalloc-dev")
        list(GET pair 0 header)
        list(GET pair 1 package)
        find_file(epload_header ${header} PATHS /usr/include /usr/local/include NO_CACHE NO_DEFAULT_PATH)
        if(NOT epload_header)
          list(APPEND epload_missing ${package})
        endif()
        unset(epload_header)
      endforeach()
    endif()
    set(epload_py "${Python_EXECUTABLE}")
    if(NOT epload_py)
      set(epload_py "${EPLOAD_PYTHON}")
    endif()
    if(epload_py AND NOT EPLOAD_BUILD_PYTHON STREQUAL "OFF")
      execute_process(COMMAND "${epload_py}" -c "import sysconfig; print(sysconfig.get_paths()['include'])"
                      OUTPUT_VARIABLE epload_pyinc OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0 OR NOT EXISTS "${epload_pyinc}/Python.h")
        list(APPEND epload_missing python3-dev)  # the interpreter's headers
      endif()
    endif()
    epload_fail_missing("${epload_missing}")
  endif()
endmacro()

macro(epload_check_packages)
  set(epload_missing)
  if(EPLOAD_BUILD_PYTHON)
    find_package(Python COMPONENTS Interpreter Development.Module QUIET)
    if(NOT Python_Development.Module_FOUND)
      list(APPEND epload_missing python3-dev)  # the interpreter's headers
    endif()
    set(PYBIND11_FINDPYTHON ON)  # as python/CMakeLists.txt: FindPython's interpreter
    find_package(pybind11 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      list(APPEND epload_missing pybind11-dev)
    endif()
  endif()
  if(NOT EPLOAD_BUNDLED_DEPS)
    find_package(simdjson QUIET)
    if(NOT simdjson_FOUND)
      list(APPEND epload_missing libsimdjson-dev)
    endif()
    if(EPLOAD_MIMALLOC)
      find_package(mimalloc QUIET)
      if(NOT mimalloc_FOUND)
        list(APPEND epload_missing libmimalloc-dev)
      endif()
    endif()
  endif()
  if(EPLOAD_BUILD_TESTS)
    find_package(GTest QUIET)
    if(NOT GTest_FOUND)
      list(APPEND epload_missing libgtest-dev)
    endif()
  endif()
  if(EPLOAD_BUILD_BENCH)
    find_package(benchmark QUIET)
    if(NOT benchmark_FOUND)
      list(APPEND epload_missing libbenchmark-dev)
    endif()
  endif()
  if(epload_missing)
    epload_fail_missing("${epload_missing}")
  endif()
endmacro()
