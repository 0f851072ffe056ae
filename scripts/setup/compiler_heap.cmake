# GCC frees its own memory by garbage collection while it compiles, first when its heap reaches
# ggc-min-heapsize (at most 128 MB by default) and then each time the heap has doubled. A unity file
# of rlflow or onnx grows to 0.7-2 GB, so GCC collects several times per file: about 12-17% of its
# CPU time (measured on the 2-core VM, 2026-11-29, docs/build.md: pipeline's first unity file 26-28
# CPU-s against 23-24, exec's 37 against 30, rl's 90 against 78). Where the machine has memory to
# spare for each parallel job, the first collection moves to 4 GB, past what any of these files
# needs (rl's largest peaks at 2.6 GB instead of 2.0). Code generation is unchanged: the parameter
# only decides when GCC frees memory.
#
# Included by rlflow's CMakeLists.txt and, through scripts/setup/onnx_unity.cmake, by onnx's build.
# RLFLOW_GCC_HEAP: AUTO (on when the machine has at least 4 GB of memory per logical core), ON or OFF.
set(RLFLOW_GCC_HEAP "AUTO" CACHE STRING "Let GCC grow its heap to 4 GB before collecting garbage: AUTO (at least 4 GB of memory per core), ON, OFF")
set_property(CACHE RLFLOW_GCC_HEAP PROPERTY STRINGS AUTO ON OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT RLFLOW_GCC_HEAP STREQUAL "OFF")
  set(rlflow_heap_on ${RLFLOW_GCC_HEAP})
  if(RLFLOW_GCC_HEAP STREQUAL "AUTO")
    cmake_host_system_information(RESULT rlflow_mem_mb QUERY TOTAL_PHYSICAL_MEMORY)
    cmake_host_system_information(RESULT rlflow_cores QUERY NUMBER_OF_LOGICAL_CORES)
    math(EXPR rlflow_mb_per_core "${rlflow_mem_mb} / ${rlflow_cores}")
    set(rlflow_heap_on OFF)
    if(rlflow_mb_per_core GREATER_EQUAL 4096)
      set(rlflow_heap_on ON)
    endif()
  endif()
  if(rlflow_heap_on)
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:--param=ggc-min-heapsize=4194304;--param=ggc-min-expand=100>")
    message(STATUS "rlflow: GCC collects garbage from a 4 GB heap on (RLFLOW_GCC_HEAP=${RLFLOW_GCC_HEAP})")
  endif()
endif()
