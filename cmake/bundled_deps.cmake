# EPLOAD_BUNDLED_DEPS=ON (release wheels, scripts/wheels.sh): simdjson and
# mimalloc come from their pinned source tarballs in EPLOAD_DEPS_DIR
# (cmake/fetch_bundled.cmake downloads them), never from the system, so the
# build needs no -dev package and its binaries need no library at run time.
# Included by the top-level CMakeLists.txt in place of find_package():
#
#   simdjson::simdjson  an INTERFACE target naming the source package's
#                       single header; simdjson_VERSION is the pinned one,
#                       and the top-level "simdjson" section compiles its
#                       simdjson.cpp in, as it does with Debian's header.
#   mimalloc            an OBJECT library, mimalloc's src/static.c with
#                       MI_MALLOC_OVERRIDE: linked into the `epload` command,
#                       it replaces malloc/free/new/delete for that process
#                       only (never the extension: see python/CMakeLists.txt).
include(${CMAKE_CURRENT_LIST_DIR}/mimalloc_pin.cmake)

function(epload_bundled_tarball what name sha256 out)
  set(file "${EPLOAD_DEPS_DIR}/${name}")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "epload: EPLOAD_BUNDLED_DEPS=ON needs ${file} (${what}): "
                        "run `cmake -DEPLOAD_DEPS_DIR=${EPLOAD_DEPS_DIR} -P cmake/fetch_bundled.cmake` "
                        "(scripts/wheels.sh does).")
  endif()
  file(SHA256 "${file}" have)
  if(NOT have STREQUAL sha256)
    message(FATAL_ERROR "epload: ${file} has SHA-256 ${have}, expected ${sha256}: delete it and fetch it again "
                        "(cmake -DEPLOAD_DEPS_DIR=${EPLOAD_DEPS_DIR} -P cmake/fetch_bundled.cmake).")
  endif()
  set(${out} "${file}" PARENT_SCOPE)
endfunction()

set(epload_bundled_dir "${PROJECT_BINARY_DIR}/bundled")

# ---- simdjson: the single header of the pinned source package -------------
list(GET EPLOAD_SIMDJSON_PINS 0 simdjson_VERSION)
epload_simdjson_tarball(${simdjson_VERSION} epload_name epload_pool_path)
epload_bundled_tarball(simdjson "${epload_name}" "${EPLOAD_SIMDJSON_SHA256_${simdjson_VERSION}}" epload_tarball)
file(ARCHIVE_EXTRACT INPUT "${epload_tarball}" DESTINATION "${epload_bundled_dir}"
     PATTERNS simdjson-${simdjson_VERSION}/singleheader/simdjson.h)
add_library(simdjson::simdjson INTERFACE IMPORTED)
set_target_properties(simdjson::simdjson PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${epload_bundled_dir}/simdjson-${simdjson_VERSION}/singleheader")
set(EPLOAD_SIMDJSON source CACHE STRING "simdjson implementation: auto, source or shared" FORCE)

# ---- mimalloc: one object file that overrides the allocator ---------------
if(NOT EPLOAD_MIMALLOC)
  return()
endif()
epload_mimalloc_tarball(epload_name epload_pool_path)
epload_bundled_tarball(mimalloc "${epload_name}" "${EPLOAD_MIMALLOC_SHA256}" epload_tarball)
set(epload_mimalloc_src "${epload_bundled_dir}/mimalloc-${EPLOAD_MIMALLOC_VERSION}")
file(ARCHIVE_EXTRACT INPUT "${epload_tarball}" DESTINATION "${epload_bundled_dir}"
     PATTERNS mimalloc-${EPLOAD_MIMALLOC_VERSION}/src mimalloc-${EPLOAD_MIMALLOC_VERSION}/include)
add_library(mimalloc OBJECT "${epload_mimalloc_src}/src/static.c")
# The flags mimalloc's own CMakeLists.txt gives its override object
# (MI_OVERRIDE=ON, a release build): initial-exec TLS (an executable's own
# thread-locals), no builtin malloc folding inside the allocator itself.
target_compile_definitions(mimalloc PRIVATE MI_MALLOC_OVERRIDE)
target_compile_options(mimalloc PRIVATE -w -ftls-model=initial-exec -fno-builtin-malloc)
target_include_directories(mimalloc PRIVATE "${epload_mimalloc_src}/include")
message(STATUS "epload: bundled simdjson ${simdjson_VERSION} and mimalloc ${EPLOAD_MIMALLOC_VERSION} from ${EPLOAD_DEPS_DIR}")
