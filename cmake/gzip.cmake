# gzip.cmake - compress one file the way Debian wants man pages and changelogs
# compressed: gzip -9n (best compression, no name or time stamp in the header, so the
# same input always gives the same bytes).
#   cmake -DIN=file -DOUT=file.gz -P gzip.cmake
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
execute_process(COMMAND gzip -9n -c "${IN}" OUTPUT_FILE "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip -9n ${IN} failed (${rc})")
endif()
