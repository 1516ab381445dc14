# revision.cmake - writes the header that names the source revision a build was made
# from (git describe; "unknown" outside a git checkout), run by the build on every build
# rather than once at configure time: a build directory configured at one commit and
# rebuilt at another must not log the first one's name. The header is rewritten only
# when the text changes, so an unchanged revision recompiles nothing.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... [-DGIT=path/to/git] -P revision.cmake
set(revision unknown)
if(GIT)
  execute_process(COMMAND ${GIT} describe --always --dirty --tags
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE describe RESULT_VARIABLE describe_rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(describe_rc EQUAL 0 AND NOT describe STREQUAL "")
    set(revision "${describe}")
  endif()
endif()
set(text "#define MCPNET_REVISION \"${revision}\"\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
