# The simdjson source package epload compiles in (top-level CMakeLists.txt,
# "simdjson"), one pin per libsimdjson-dev version: the orig tarball of
# Debian's source package, its SHA-256 from Debian's signed .dsc.  Read by
# the configure (which only checks and uses a tarball already at hand) and
# by fetch_deps.cmake (which scripts/setup.sh runs to download it).
set(EPLOAD_SIMDJSON_PINS 3.0.1)  # Debian 12: simdjson 3.0.1-1
set(EPLOAD_SIMDJSON_SHA256_3.0.1 156b1bc5eb0561b2bd166b46d191fd3d95a3e709cc63761477d3b7aec2b6e9ed)

# The default for EPLOAD_DEPS_DIR: a cache outside every checkout, shared by
# all of them, so a build never downloads and never writes into its sources.
if(NOT "$ENV{EPLOAD_DEPS_DIR}" STREQUAL "")
  set(EPLOAD_DEFAULT_DEPS_DIR "$ENV{EPLOAD_DEPS_DIR}")
elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(EPLOAD_DEFAULT_DEPS_DIR "$ENV{XDG_CACHE_HOME}/epload-build")
else()
  set(EPLOAD_DEFAULT_DEPS_DIR "$ENV{HOME}/.cache/epload-build")
endif()

# The tarball's name, and its path in a Debian archive (cmake/apt_archive.cmake).
function(epload_simdjson_tarball version out_name out_pool_path)
  set(${out_name} "simdjson_${version}.orig.tar.gz" PARENT_SCOPE)
  set(${out_pool_path} "pool/main/s/simdjson/simdjson_${version}.orig.tar.gz" PARENT_SCOPE)
endfunction()
