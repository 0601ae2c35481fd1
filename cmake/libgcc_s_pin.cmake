# The unwinder a cross-built release wheel links against (scripts/wheels.sh,
# aarch64 from an x86-64 machine): libgcc_s.so.1 of Debian 12's libgcc-s1
# 12.2.0-14+deb12u1 for the target architecture, its SHA-256 from Debian's
# signed Packages index of that architecture.  Only the link reads it: the
# wheel binds GCC_3.0-GCC_4.2.0 symbols, in every manylinux policy, and the
# target machine's own copy serves at run time.  Fetched by
# fetch_bundled.cmake when asked for (-DEPLOAD_LIBGCC_S_ARCHES=arm64).
set(EPLOAD_LIBGCC_S_VERSION 12.2.0-14+deb12u1)
set(EPLOAD_LIBGCC_S_SHA256_arm64 576926b283613db80168ddf76380a3bd877602778cf0d226caa7bfbfa71eacf3)

# The package's name, and its path in a Debian archive (cmake/apt_archive.cmake).
function(epload_libgcc_s_deb debian_arch out_name out_pool_path)
  set(name "libgcc-s1_${EPLOAD_LIBGCC_S_VERSION}_${debian_arch}.deb")
  set(${out_name} "${name}" PARENT_SCOPE)
  set(${out_pool_path} "pool/main/g/gcc-12/${name}" PARENT_SCOPE)
endfunction()
