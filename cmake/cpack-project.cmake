# cpack-project.cmake - read by cpack (CPACK_PROJECT_CONFIG_FILE) for every package it
# makes: the version is taken from the source revision now, when the package is made,
# not when the build folder was configured (cmake/version.cmake).
include("${CPACK_MCPNET_SOURCE_DIR}/cmake/version.cmake")
mcpnet_package_version(CPACK_PACKAGE_VERSION "${CPACK_MCPNET_SOURCE_DIR}" "${CPACK_MCPNET_GIT}"
                       "${CPACK_MCPNET_BASE_VERSION}")
set(CPACK_DEBIAN_PACKAGE_VERSION "${CPACK_PACKAGE_VERSION}")
set(CPACK_RPM_PACKAGE_VERSION "${CPACK_PACKAGE_VERSION}")
# The .deb synopsis is each description's first line (cmake/packaging.cmake); CPack would
# otherwise put the project's one-line description in front of both packages'.
if(CPACK_GENERATOR STREQUAL "DEB")
  unset(CPACK_PACKAGE_DESCRIPTION_SUMMARY)
endif()
# An .rpm without a debuginfo package (a source path too short for CPack's in-place
# rewrite, cmake/packaging.cmake) is stripped by CPack instead.
if(CPACK_GENERATOR STREQUAL "RPM" AND CPACK_MCPNET_RPM_STRIP)
  set(CPACK_STRIP_FILES ON)
endif()
