# Included after onnx's project() by scripts/setup/build_onnx (CMAKE_PROJECT_onnx_INCLUDE). At the end
# of onnx's top-level CMakeLists, its library's sources go into RLFLOW_ONNX_UNITY_GROUPS unity files
# of about equal size instead of one compiler run each: each of onnx's files parses the same protobuf
# and schema headers. Files of one folder go into different groups: onnx's defs.cc and old.cc of an
# op family define file-local names alike (Loop_ver23_doc in controlflow). schema.cc and
# tensor_proto_util.cc stay on their own, as onnx's own unity option has them (an explicit
# specialisation after instantiation).
# The same compiler heap as rlflow's own build (compiler_heap.cmake).
include("${CMAKE_CURRENT_LIST_DIR}/compiler_heap.cmake")

function(rlflow_onnx_unity)
  if(NOT TARGET onnx)
    return()
  endif()
  get_target_property(srcs onnx SOURCES)
  set(keyed)
  foreach(s IN LISTS srcs)
    if(s MATCHES "\\.cc$" AND NOT s MATCHES "/(schema|tensor_proto_util)\\.cc$")
      file(SIZE "${s}" bytes)
      math(EXPR key "1000000000 + ${bytes}")  # fixed width, so the text sort is a numeric one
      list(APPEND keyed "${key}|${s}")
    endif()
  endforeach()
  list(SORT keyed ORDER DESCENDING)
  # Largest first, each into the group with the fewest bytes so far.
  set(load)
  foreach(i RANGE 1 ${RLFLOW_ONNX_UNITY_GROUPS})
    list(APPEND load 0)
  endforeach()
  foreach(entry IN LISTS keyed)
    string(REGEX MATCH "^([0-9]+)\\|(.*)$" _ "${entry}")
    math(EXPR bytes "${CMAKE_MATCH_1} - 1000000000")
    set(s "${CMAKE_MATCH_2}")
    get_filename_component(dir "${s}" DIRECTORY)
    string(MAKE_C_IDENTIFIER "${dir}" dir)
    set(best -1)
    set(i 0)
    foreach(l IN LISTS load)
      if(NOT "${dir}" IN_LIST rlflow_dirs_${i} AND (best EQUAL -1 OR l LESS least))
        set(least ${l})
        set(best ${i})
      endif()
      math(EXPR i "${i} + 1")
    endforeach()
    if(best EQUAL -1)  # more files in one folder than groups (onnx has at most 3 a folder: with two
      # groups, the smallest, a utils.cc, joins group 0 beside its folder's defs.cc or old.cc, and compiles there)
      set(best 0)
      list(GET load 0 least)
    endif()
    list(APPEND rlflow_dirs_${best} "${dir}")
    math(EXPR least "${least} + ${bytes}")
    list(REMOVE_AT load ${best})
    list(INSERT load ${best} ${least})
    set_source_files_properties("${s}" PROPERTIES UNITY_GROUP "rlflow_${best}")
  endforeach()
  set_target_properties(onnx PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  list(LENGTH keyed n)
  message(STATUS "rlflow: onnx's library as ${RLFLOW_ONNX_UNITY_GROUPS} unity files (${n} sources; bytes per file: ${load})")
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL rlflow_onnx_unity)
