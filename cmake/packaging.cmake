# packaging.cmake - what `cpack` makes from `cmake --install`'s tree: two .deb and two .rpm
# packages, as a distribution would accept them.
#   mcpnet        the plugin, mcpnet-doctor, mcpnet-params, their man pages, the docs
#   mcpnet-bench  mcpnet-bench and mcpnet-cpu-cost (callgrind-based): for measuring, not
#                 for the nodes' images; depends on mcpnet of the same version
# Each with a debug package (-dbgsym .ddeb, -debuginfo .rpm) holding the debug info the
# packaged binaries are stripped of. The version comes from the source revision at
# packaging time (cmake/version.cmake, cmake/cpack-project.cmake). Dependencies are not
# written here: dpkg-shlibdeps and rpmbuild compute them from the binaries, so a build on
# a newer glibc asks for that glibc (libibverbs is dlopened at run time and only
# recommended). Man pages and changelogs are installed gzip -9n; each package's doc folder
# has a machine-readable copyright file. A cross build (CMAKE_SYSTEM_PROCESSOR aarch64)
# makes arm64 packages. test/package-deb.sh (with lintian), test/package-rpm.sh and
# test/package-arm64.sh check the result.

# --- what goes where -----------------------------------------------------------------
set(MCPNET_DOC_runtime "${CMAKE_INSTALL_DATAROOTDIR}/doc/mcpnet")
set(MCPNET_DOC_bench "${CMAKE_INSTALL_DATAROOTDIR}/doc/mcpnet-bench")
set(MCPNET_MAN_bench mcpnet-bench.1 mcpnet-cpu-cost.1)

# The copyright file in Debian's machine-readable format, from LICENSE (MIT, "Expat" in
# Debian's names): its text indented one space, a blank line written as " .".
file(READ "${PROJECT_SOURCE_DIR}/LICENSE" license)
string(REGEX REPLACE "^MIT License\n\n" "" license "${license}")
string(REGEX REPLACE "\n$" "" license "${license}")
string(REPLACE "\n\n" "\n.\n" license "${license}")
string(REPLACE "\n" "\n " license "${license}")
file(WRITE "${PROJECT_BINARY_DIR}/copyright"
     "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
     "Upstream-Name: mcpnet\nSource: ${PROJECT_HOMEPAGE_URL}\n\n"
     "Files: *\nCopyright: 2026 the mcpnet authors\nLicense: Expat\n\n"
     "License: Expat\n ${license}\n")

# Man pages and the changelog, compressed at build time (cmake/gzip.cmake).
set(gz_outputs)
function(mcpnet_gzip in out)
  add_custom_command(OUTPUT "${out}" COMMAND ${CMAKE_COMMAND} -DIN=${in} -DOUT=${out}
                     -P ${PROJECT_SOURCE_DIR}/cmake/gzip.cmake DEPENDS "${in}" VERBATIM)
  set(gz_outputs ${gz_outputs} "${out}" PARENT_SCOPE)
endfunction()
file(GLOB MCPNET_MAN_PAGES ${PROJECT_SOURCE_DIR}/docs/man/*.[1-9])
foreach(page ${MCPNET_MAN_PAGES})
  get_filename_component(name ${page} NAME)
  string(REGEX MATCH "[1-9]$" section ${name})
  mcpnet_gzip(${page} ${PROJECT_BINARY_DIR}/man/${name}.gz)
  if(name IN_LIST MCPNET_MAN_bench)
    set(component bench)
  else()
    set(component runtime)
  endif()
  install(FILES ${PROJECT_BINARY_DIR}/man/${name}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT ${component})
endforeach()
add_custom_target(mcpnet_gzip ALL DEPENDS ${gz_outputs})

# Each package's doc folder: the copyright file, and changelog.gz in Debian's format, made
# at install time for the revision installed (cmake/debian-changelog.cmake).
set(MCPNET_MAINTAINER "mcpnet maintainers <mcpnet@example.invalid>")
foreach(component runtime bench)
  install(FILES ${PROJECT_BINARY_DIR}/copyright DESTINATION ${MCPNET_DOC_${component}} COMPONENT ${component})
  if(component STREQUAL "runtime")
    set(package mcpnet)
  else()
    set(package mcpnet-bench)
  endif()
  install(CODE "set(PACKAGE \"${package}\")
    set(DOCDIR \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${MCPNET_DOC_${component}}\")
    set(SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
    set(GIT \"${GIT_EXECUTABLE}\")
    set(BASE \"${PROJECT_VERSION}\")
    set(MAINTAINER \"${MCPNET_MAINTAINER}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/debian-changelog.cmake\")" COMPONENT ${component})
endforeach()
install(FILES README.md CHANGELOG.md DESTINATION ${MCPNET_DOC_runtime} COMPONENT runtime)
file(GLOB MCPNET_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${MCPNET_DOCS} DESTINATION ${MCPNET_DOC_runtime}/docs COMPONENT runtime)
# lintian's overrides, each with its reason (cmake/deb/mcpnet.lintian-overrides).
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/mcpnet.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME mcpnet COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/deb/mcpnet-bench.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME mcpnet-bench COMPONENT bench)

# --- the packages ----------------------------------------------------------------------
# Plain `cpack` builds the .rpm only where rpmbuild is installed (Debian: the rpm package).
find_program(MCPNET_RPMBUILD rpmbuild)
mark_as_advanced(MCPNET_RPMBUILD)
if(MCPNET_RPMBUILD)
  set(CPACK_GENERATOR "DEB;RPM")
else()
  set(CPACK_GENERATOR "DEB")
endif()
set(CPACK_PACKAGE_NAME "mcpnet")
set(CPACK_PACKAGE_VENDOR "the mcpnet authors")
set(CPACK_PACKAGE_CONTACT "${MCPNET_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_COMPONENTS_ALL runtime bench)
set(CPACK_COMPONENT_BENCH_DEPENDS runtime)
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/cpack-project.cmake")
set(CPACK_MCPNET_SOURCE_DIR "${PROJECT_SOURCE_DIR}")
set(CPACK_MCPNET_GIT "${GIT_EXECUTABLE}")
set(CPACK_MCPNET_BASE_VERSION "${PROJECT_VERSION}")

# .deb: one per component, named as Debian names them (mcpnet_VERSION_ARCH.deb).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "mcpnet")
set(CPACK_DEBIAN_BENCH_PACKAGE_NAME "mcpnet-bench")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
# The plugin lies in the loader's folder: dpkg's ldconfig trigger instead of the direct
# ldconfig call CPack would otherwise write into postinst and postrm (cmake/deb/).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/cmake/deb/triggers;${PROJECT_SOURCE_DIR}/cmake/deb/postinst;${PROJECT_SOURCE_DIR}/cmake/deb/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "libibverbs1, ibverbs-providers")
set(CPACK_DEBIAN_BENCH_PACKAGE_RECOMMENDS "perftest, valgrind")
set(CPACK_DEBIAN_BENCH_PACKAGE_SUGGESTS "gnuplot-nox")
# Each description's first line is its package's synopsis (cmake/cpack-project.cmake
# keeps CPack from putting the project's one-line description in front of both).
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "NCCL network plugin over RDMA verbs
mcpnet is an NCCL network plugin (libnccl-net-mcp.so, selected with
NCCL_NET_PLUGIN=mcp) that takes the place of NCCL's built-in IB transport, with
explicit per-rank placement, tenant-aware device filtering and errors that name
both ends and the likely cause. This package also holds mcpnet-doctor, which
checks a node or a whole allocation, and mcpnet-params, which vets an
environment before a job starts.")
set(CPACK_DEBIAN_BENCH_DESCRIPTION "benchmark tools for the mcpnet NCCL network plugin
mcpnet-bench drives an NCCL net plugin the way NCCL's proxy does and compares
it with perftest on the same device; mcpnet-cpu-cost counts the instructions
per message of its data path under callgrind. For measuring, not for the
images of the nodes that run jobs.")

# .rpm: the same split, rpmbuild's own dependency scan, a debuginfo package per
# component. Its source paths are rewritten under a prefix no longer than this tree's.
set(CPACK_RPM_COMPONENT_INSTALL ON)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_RUNTIME_PACKAGE_NAME "mcpnet")
set(CPACK_RPM_BENCH_PACKAGE_NAME "mcpnet-bench")
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE "MIT")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Libraries")
set(CPACK_RPM_PACKAGE_URL "${PROJECT_HOMEPAGE_URL}")
set(CPACK_RPM_PACKAGE_AUTOREQ ON)
# CPack rewrites the source paths in the debug info in place (debugedit), so each of the
# source and build folders' paths must be at least as long as the one it is rewritten to,
# /usr/src/debug/mcpnet/src_N: from a shorter one, the .rpm is made stripped and without a
# debuginfo package, and configure says so.
set(CPACK_RPM_BUILD_SOURCE_DIRS_PREFIX "/usr/src/debug/mcpnet")
set(CPACK_RPM_DEBUGINFO_PACKAGE ON)
set(CPACK_MCPNET_RPM_STRIP OFF)
set(index 0)
foreach(dir "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}")
  string(LENGTH "${dir}" have)
  string(LENGTH "${CPACK_RPM_BUILD_SOURCE_DIRS_PREFIX}/src_${index}" need)
  if(have LESS need)
    set(CPACK_RPM_DEBUGINFO_PACKAGE OFF)
    set(CPACK_MCPNET_RPM_STRIP ON)
    message(STATUS "mcpnet: no RPM debuginfo package from this tree: the path ${dir} is shorter than "
                   "${CPACK_RPM_BUILD_SOURCE_DIRS_PREFIX}/src_${index}, which CPack rewrites it to in place; "
                   "the .rpm's binaries are stripped all the same (the .deb has its -dbgsym package)")
  endif()
  math(EXPR index "${index} + 1")
endforeach()
set(CPACK_RPM_RUNTIME_PACKAGE_SUMMARY "NCCL network plugin over RDMA verbs")
set(CPACK_RPM_BENCH_PACKAGE_SUMMARY "benchmark tools for the mcpnet NCCL network plugin")
set(CPACK_RPM_RUNTIME_PACKAGE_DESCRIPTION "mcpnet replaces NCCL's built-in IB transport with explicit per-rank placement,
tenant-aware device filtering and errors that explain themselves (libnccl-net-mcp.so),
with mcpnet-doctor and mcpnet-params.")
set(CPACK_RPM_BENCH_PACKAGE_DESCRIPTION "mcpnet-bench and mcpnet-cpu-cost: measure an NCCL net plugin as NCCL drives it.")
set(CPACK_RPM_BENCH_PACKAGE_REQUIRES "mcpnet")
# Debian's lintian overrides have no place in an .rpm.
set(CPACK_RPM_RUNTIME_USER_FILELIST "%exclude /usr/share/lintian/overrides/mcpnet")
set(CPACK_RPM_BENCH_USER_FILELIST "%exclude /usr/share/lintian/overrides/mcpnet-bench")
# The man folders belong to the system (the filesystem or man-db package); CPack leaves
# out /usr, /usr/bin, /usr/lib64 ... itself, but not these.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /usr/share/man /usr/share/man/man1 /usr/share/man/man7
    /usr/share/lintian /usr/share/lintian/overrides)

# A cross build packages for its target, not for the machine that builds it.
if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
  endif()
  set(CPACK_RPM_PACKAGE_ARCHITECTURE ${CMAKE_SYSTEM_PROCESSOR})
endif()
include(CPack)
