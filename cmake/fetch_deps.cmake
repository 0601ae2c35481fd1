# Downloads the simdjson source tarball a build compiles in, into the deps
# cache, checked against its pinned SHA-256, from the Debian archives apt is
# configured with (cmake/apt_archive.cmake).  Run by scripts/setup.sh:
#
#   cmake -DSIMDJSON_VERSION=3.0.1 [-DEPLOAD_DEPS_DIR=DIR] -P cmake/fetch_deps.cmake
#
# Never fails the set-up: without the tarball the build links the shared
# libsimdjson instead (and says so).  Nothing half-written is left behind.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/simdjson_pin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/apt_archive.cmake)
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
epload_simdjson_tarball(${version} name pool_path)
set(tarball "${EPLOAD_DEPS_DIR}/${name}")
if(EXISTS "${tarball}")
  file(SHA256 "${tarball}" have)
  if(have STREQUAL sha256)
    return()  # already there
  endif()
endif()
epload_archive_fetch("${pool_path}" "${tarball}" "${sha256}" error)
if(error)
  message(WARNING "epload: cannot fetch ${name} (${error}). "
                  "The build will link the shared libsimdjson (each epload process starts ~0.8 ms slower); "
                  "put the file at ${tarball} by hand to compile it in.")
endif()
