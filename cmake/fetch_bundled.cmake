# Downloads the two source tarballs a release build compiles in (simdjson and
# mimalloc, cmake/bundled_deps.cmake) into DIR, each checked against the
# SHA-256 pinned beside it, from the Debian archives apt is configured with
# (cmake/apt_archive.cmake).  Run by scripts/wheels.sh:
#
#   cmake -DEPLOAD_DEPS_DIR=DIR -P cmake/fetch_bundled.cmake
#
# -DEPLOAD_LIBGCC_S_ARCHES="arm64 ..." also fetches the link-time unwinder of a
# cross build for each (cmake/libgcc_s_pin.cmake).
#
# Unlike fetch_deps.cmake this one fails: a release build has no fallback.
# A file already there with the right hash is kept; nothing half-written is
# left behind.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/simdjson_pin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/mimalloc_pin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/libgcc_s_pin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/apt_archive.cmake)
if(NOT EPLOAD_DEPS_DIR)
  message(FATAL_ERROR "fetch_bundled.cmake: pass -DEPLOAD_DEPS_DIR=DIR")
endif()

function(fetch name pool_path sha256)
  set(file "${EPLOAD_DEPS_DIR}/${name}")
  if(EXISTS "${file}")
    file(SHA256 "${file}" have)
    if(have STREQUAL sha256)
      return()
    endif()
    file(REMOVE "${file}")  # a wrong or truncated copy: fetched again
  endif()
  epload_archive_fetch("${pool_path}" "${file}" "${sha256}" error)
  if(error)
    message(FATAL_ERROR "epload: cannot fetch ${name} (${error}). "
                        "Check the network and apt's sources (or put the file at ${file}) and run again.")
  endif()
endfunction()

list(GET EPLOAD_SIMDJSON_PINS 0 version)
epload_simdjson_tarball(${version} name pool_path)
fetch("${name}" "${pool_path}" "${EPLOAD_SIMDJSON_SHA256_${version}}")
epload_mimalloc_tarball(name pool_path)
fetch("${name}" "${pool_path}" "${EPLOAD_MIMALLOC_SHA256}")
separate_arguments(arches UNIX_COMMAND "${EPLOAD_LIBGCC_S_ARCHES}")
foreach(arch IN LISTS arches)
  if(NOT DEFINED EPLOAD_LIBGCC_S_SHA256_${arch})
    message(FATAL_ERROR "epload: no libgcc_s pinned for '${arch}' (cmake/libgcc_s_pin.cmake)")
  endif()
  epload_libgcc_s_deb(${arch} name pool_path)
  fetch("${name}" "${pool_path}" "${EPLOAD_LIBGCC_S_SHA256_${arch}}")
endforeach()
