# debian-changelog.cmake - run at install time (install(CODE) in cmake/packaging.cmake):
# writes DOCDIR/changelog.gz as Debian wants it in a native package, one entry for the
# revision being installed, naming its version and commit date and pointing at
# CHANGELOG.md for what changed. Computed when installed, so a package made by cpack at
# a later commit than the build folder was configured at names that commit.
#   include()d with PACKAGE, DOCDIR (absolute, DESTDIR included), SOURCE_DIR, GIT, BASE
#   and MAINTAINER set.
include("${SOURCE_DIR}/cmake/version.cmake")
mcpnet_package_version(version "${SOURCE_DIR}" "${GIT}" "${BASE}")
set(date "")
set(rev "")
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env TZ=UTC LC_ALL=C "${GIT}" log -1 --format=%cd
                          --date=format-local:%a,\ %d\ %b\ %Y\ %H:%M:%S\ +0000
                  WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE date OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND "${GIT}" log -1 --format=%h --abbrev=7 WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(date STREQUAL "")
  set(date "Thu, 01 Jan 1970 00:00:00 +0000") # a tarball: no commit to date it by
  set(what "Built from a source tree without its git history.")
else()
  set(what "Built from source revision ${rev}.")
endif()
file(MAKE_DIRECTORY "${DOCDIR}")
file(WRITE "${DOCDIR}/changelog"
     "${PACKAGE} (${version}) unstable; urgency=medium\n\n"
     "  * ${what} What changed for users is in\n"
     "    /usr/share/doc/mcpnet/CHANGELOG.md.\n\n"
     " -- ${MAINTAINER}  ${date}\n")
execute_process(COMMAND gzip -9nf "${DOCDIR}/changelog" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip -9n ${DOCDIR}/changelog failed (${rc})")
endif()
