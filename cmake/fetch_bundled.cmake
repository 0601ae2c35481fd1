# Downloads the two source tarballs a release build compiles in (simdjson and
# mimalloc, cmake/bundled_deps.cmake) into DIR, each checked against the
# SHA-256 pinned beside it.  Run by scripts/wheels.sh:
#
#   cmake -DEPLOAD_DEPS_DIR=DIR -P cmake/fetch_bundled.cmake
#
# Unlike fetch_deps.cmake this one fails: a release build has no fallback.
# A file already there with the right hash is kept; nothing half-written is
# left behind.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/simdjson_pin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/mimalloc_pin.cmake)
if(NOT EPLOAD_DEPS_DIR)
  message(FATAL_ERROR "fetch_bundled.cmake: pass -DEPLOAD_DEPS_DIR=DIR")
endif()

function(fetch name url sha256)
  set(file "${EPLOAD_DEPS_DIR}/${name}")
  if(EXISTS "${file}")
    file(SHA256 "${file}" have)
    if(have STREQUAL sha256)
      return()
    endif()
    file(REMOVE "${file}")  # a wrong or truncated copy: fetched again
  endif()
  message(STATUS "epload: fetching ${url}")
  string(RANDOM LENGTH 8 tag)
  set(part "${file}.${tag}.part")
  file(DOWNLOAD "${url}" "${part}" TIMEOUT 120 STATUS st)
  list(GET st 0 code)
  list(GET st 1 text)
  if(code EQUAL 0)
    file(SHA256 "${part}" have)
    if(NOT have STREQUAL sha256)
      set(code 1)
      set(text "SHA-256 ${have}, expected ${sha256}")
    endif()
  endif()
  if(NOT code EQUAL 0)
    file(REMOVE "${part}")
    message(FATAL_ERROR "epload: cannot fetch ${url}: ${text}. Check the network (or put the file at ${file}) and run again.")
  endif()
  file(RENAME "${part}" "${file}")
endfunction()

list(GET EPLOAD_SIMDJSON_PINS 0 version)
epload_simdjson_tarball(${version} name url)
fetch("${name}" "${url}" "${EPLOAD_SIMDJSON_SHA256_${version}}")
epload_mimalloc_tarball(name url)
fetch("${name}" "${url}" "${EPLOAD_MIMALLOC_SHA256}")
