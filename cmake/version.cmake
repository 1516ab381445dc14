# version.cmake - the version a package carries, from the source revision it is built
# from, so that two builds of different commits never share a version: at a tag vX.Y.Z
# exactly, X.Y.Z; otherwise BASE+git<commit date, UTC, YYYYMMDD>.<short hash> (BASE is
# project()'s version), which sorts after BASE and by date in dpkg and rpm alike; with
# uncommitted changes to tracked files, ".dirty" (or "+dirty" after a tag) at the end.
# Outside a git checkout (a release tarball), BASE. Included by the configure step (for
# its message) and by cpack at packaging time (cmake/cpack-project.cmake), so a build
# folder configured at one commit and packaged at another carries the second's version.
function(mcpnet_package_version out source_dir git base)
  set(version "${base}")
  if(git AND EXISTS "${source_dir}/.git")
    execute_process(COMMAND "${git}" describe --tags --exact-match --match "v[0-9]*" HEAD
                    WORKING_DIRECTORY "${source_dir}" OUTPUT_VARIABLE tag RESULT_VARIABLE tag_rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env TZ=UTC
                            "${git}" log -1 --format=%cd.%h --abbrev=7 --date=format-local:%Y%m%d
                    WORKING_DIRECTORY "${source_dir}" OUTPUT_VARIABLE stamp RESULT_VARIABLE stamp_rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(COMMAND "${git}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${source_dir}" OUTPUT_VARIABLE changes RESULT_VARIABLE status_rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(tag_rc EQUAL 0 AND tag MATCHES "^v([0-9][0-9.]*)$")
      set(version "${CMAKE_MATCH_1}")
      set(dirty "+dirty")
    elseif(stamp_rc EQUAL 0 AND stamp MATCHES "^[0-9]+\\.[0-9a-f]+$")
      set(version "${base}+git${stamp}")
      set(dirty ".dirty")
    endif()
    if(status_rc EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND version "${dirty}")
    endif()
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()
