# The mimalloc source package a release build compiles in (cmake/bundled_deps.cmake):
# the orig tarball of Debian 12's source package mimalloc 2.0.9+ds-2 (the
# version libmimalloc-dev installs there), its SHA-256 from Debian's signed .dsc.
set(EPLOAD_MIMALLOC_VERSION 2.0.9+ds)
set(EPLOAD_MIMALLOC_SHA256 cbc9d207ff105ad1f0cb739c378076143a6452b8d0624309cea0abfb040e972b)

# The tarball's name, and its path in a Debian archive (cmake/apt_archive.cmake).
function(epload_mimalloc_tarball out_name out_pool_path)
  set(${out_name} "mimalloc_${EPLOAD_MIMALLOC_VERSION}.orig.tar.xz" PARENT_SCOPE)
  set(${out_pool_path} "pool/main/m/mimalloc/mimalloc_${EPLOAD_MIMALLOC_VERSION}.orig.tar.xz" PARENT_SCOPE)
endfunction()
