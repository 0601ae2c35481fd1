# Downloads one file of Debian's archive (a source package's orig tarball,
# named by its path under the archive's root, pool/...) from the archives apt
# is configured with on this machine, so a mirror or proxy set up for apt
# serves the build too and no host is named here.  apt's sources list only
# `deb` lines on a stock system; the pool holds source files beside the
# binary packages all the same.  Included by fetch_deps.cmake and
# fetch_bundled.cmake:
#
#   epload_archive_fetch(POOL_PATH FILE SHA256 OUT_ERROR)
#
# Tries each configured archive (those whose Release file says Origin: Debian
# first) until one gives a file with SHA256, renamed into FILE; OUT_ERROR is
# empty on success, else says what every attempt met.  Nothing half-written
# is left behind.

# The root URIs of apt's configured archives, as `apt-get indextargets` knows
# them (the sources list and its .sources files, APT::* settings included).
function(epload_apt_archives out)
  set(${out} "" PARENT_SCOPE)
  find_program(apt_get apt-get NO_CACHE)
  if(NOT apt_get)
    return()
  endif()
  set(uris "")
  # Origin is known once `apt-get update` has read the Release files; the
  # other archives, and all of them before an update (a container's emptied
  # lists), come after.
  foreach(query "Origin: Debian" "--no-release-info;Created-By: Packages")
    execute_process(COMMAND "${apt_get}" indextargets --format "$(REPO_URI)" ${query}
                    OUTPUT_VARIABLE found ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[^\n]+" found "${found}")
      list(APPEND uris ${found})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES uris)
  set(usable "")
  foreach(uri IN LISTS uris)
    if(uri MATCHES "^(https?|ftp)://")
      list(APPEND usable "${uri}")
    elseif(uri MATCHES "^file:/+(.*)$")  # apt's file:/srv/mirror
      list(APPEND usable "file:///${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${usable}" PARENT_SCOPE)
endfunction()

function(epload_archive_fetch pool_path file sha256 out_error)
  epload_apt_archives(archives)
  if(NOT archives)
    set(${out_error} "apt lists no archive to fetch ${pool_path} from (apt-get indextargets)" PARENT_SCOPE)
    return()
  endif()
  string(RANDOM LENGTH 8 tag)
  set(part "${file}.${tag}.part")  # concurrent fetches never share a file
  set(errors "")
  foreach(archive IN LISTS archives)
    string(REGEX REPLACE "/+$" "" archive "${archive}")
    set(url "${archive}/${pool_path}")
    message(STATUS "epload: fetching ${url}")
    # The hash is checked here rather than by EXPECTED_HASH, so that one
    # archive's failure moves on to the next.
    file(DOWNLOAD "${url}" "${part}" TIMEOUT 120 STATUS st)
    list(GET st 0 code)
    list(GET st 1 text)
    if(code EQUAL 0)
      file(SHA256 "${part}" have)
      if(have STREQUAL sha256)
        file(RENAME "${part}" "${file}")
        set(${out_error} "" PARENT_SCOPE)
        return()
      endif()
      set(text "SHA-256 ${have}, expected ${sha256}")
    endif()
    file(REMOVE "${part}")
    list(APPEND errors "${url}: ${text}")
  endforeach()
  list(JOIN errors "; " errors)
  set(${out_error} "${errors}" PARENT_SCOPE)
endfunction()
