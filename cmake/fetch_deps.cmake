# Downloads the simdjson source tarball a build compiles in, into the deps
# cache, checked against its pinned SHA-256.  Run by scripts/setup.sh:
#
#   cmake -DSIMDJSON_VERSION=3.0.1 [-DEPLOAD_DEPS_DIR=DIR] -P cmake/fetch_deps.cmake
#
# Never fails the set-up: without the tarball the build links the shared
# libsimdjson instead (and says so).  Nothing half-written is left behind.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/simdjson_pin.cmake)
if(NOT EPLOAD_DEPS_DIR)
  set(EPLOAD_DEPS_DIR "${EPLOAD_DEFAULT_DEPS_DIR}")
endif()
set(version "${SIMDJSON_VERSION}")
if(NOT version IN_LIST EPLOAD_SIMDJSON_PINS)
  message(STATUS "epload: no pinned source for simdjson '${version}' (pinned: ${EPLOAD_SIMDJSON_PINS}); "
                 "the build will link the shared libsimdjson")
  return()
endif()
set(sha256 "${EPLOAD_SIMDJSON_SHA256_${version}}")
epload_simdjson_tarball(${version} name url)
set(tarball "${EPLOAD_DEPS_DIR}/${name}")
if(EXISTS "${tarball}")
  file(SHA256 "${tarball}" have)
  if(have STREQUAL sha256)
    return()  # already there
  endif()
endif()
message(STATUS "epload: fetching ${url} into ${EPLOAD_DEPS_DIR}")
# The hash is checked here rather than by EXPECTED_HASH, which would make a
# failed download an error even though the build has a fallback.
string(RANDOM LENGTH 8 tag)
set(part "${tarball}.${tag}.part")  # concurrent set-ups never share a file
file(DOWNLOAD "${url}" "${part}" TIMEOUT 120 STATUS st)
list(GET st 0 code)
list(GET st 1 text)
if(code EQUAL 0)
  file(SHA256 "${part}" have)
  set(text "SHA-256 ${have}, expected ${sha256}")
endif()
if(NOT code EQUAL 0 OR NOT have STREQUAL sha256)
  file(REMOVE "${part}")
  message(WARNING "epload: cannot fetch ${url}: ${text}. "
                  "The build will link the shared libsimdjson (each epload process starts ~0.8 ms slower); "
                  "put the file at ${tarball} by hand to compile it in.")
  return()
endif()
file(RENAME "${part}" "${tarball}")
