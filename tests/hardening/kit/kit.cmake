# The hardening kit: gtest-free helpers shared by tests/hardening and fuzz/
# (included from both; defined once).
#   moegrad_hardening_kit - exact-size strided tensors, SPEC oracles,
#                           scoped environment variables (scoped_env.h), the
#                           adversarial runner and the grad-x fuzz case; the
#                           layer operators' oracles, runner, sentinel-guarded
#                           outputs and fuzz case.
#   moegrad_hardening_npy - the .npy fuzz case over the CLI's own reader
#                           (cli/npy.h API; its sources built here, never copied).
if(NOT TARGET moegrad_hardening_kit)
  add_library(moegrad_hardening_kit STATIC
    ${CMAKE_CURRENT_LIST_DIR}/tensor.cpp
    ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
    ${CMAKE_CURRENT_LIST_DIR}/runner.cpp
    ${CMAKE_CURRENT_LIST_DIR}/problem.cpp
    ${CMAKE_CURRENT_LIST_DIR}/grad_x_case.cpp
    ${CMAKE_CURRENT_LIST_DIR}/guarded_output.cpp
    ${CMAKE_CURRENT_LIST_DIR}/ops_reference.cpp
    ${CMAKE_CURRENT_LIST_DIR}/ops_runner.cpp
    ${CMAKE_CURRENT_LIST_DIR}/ops_case_decode.cpp
    ${CMAKE_CURRENT_LIST_DIR}/ops_case.cpp)
  target_include_directories(moegrad_hardening_kit PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(moegrad_hardening_kit PUBLIC moegrad_static)

  # The reader's sources: npy.cpp and, following its #include "..." lines
  # through cli/, the .cpp of every cli header it reaches. So the list follows
  # the CLI however it is split, and nothing else of the CLI is built here.
  set(MOEGRAD_CLI_SOURCES "")
  set(pending npy.h)
  set(seen "")
  while(pending)
    list(POP_FRONT pending name)
    if(name IN_LIST seen OR NOT EXISTS ${PROJECT_SOURCE_DIR}/cli/${name})
      continue()
    endif()
    list(APPEND seen ${name})
    string(REGEX REPLACE "\\.h$" ".cpp" impl ${name})
    set(files ${PROJECT_SOURCE_DIR}/cli/${name})
    if(NOT impl STREQUAL name AND EXISTS ${PROJECT_SOURCE_DIR}/cli/${impl})
      list(APPEND MOEGRAD_CLI_SOURCES ${PROJECT_SOURCE_DIR}/cli/${impl})
      list(APPEND files ${PROJECT_SOURCE_DIR}/cli/${impl})
    endif()
    foreach(f ${files})
      set_property(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
      file(STRINGS ${f} includes REGEX "^#include \"[^\"/]+\"")
      foreach(line ${includes})
        string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
        list(APPEND pending ${inc})
      endforeach()
    endforeach()
  endwhile()
  if(EXISTS ${PROJECT_SOURCE_DIR}/cli/npy.h AND MOEGRAD_CLI_SOURCES)
    list(REMOVE_DUPLICATES MOEGRAD_CLI_SOURCES)
    add_library(moegrad_hardening_cli STATIC ${MOEGRAD_CLI_SOURCES})
    target_include_directories(moegrad_hardening_cli PUBLIC ${PROJECT_SOURCE_DIR}/cli)
    target_link_libraries(moegrad_hardening_cli PUBLIC moegrad_static)
    add_library(moegrad_hardening_npy STATIC ${CMAKE_CURRENT_LIST_DIR}/npy_case.cpp)
    target_include_directories(moegrad_hardening_npy PUBLIC ${CMAKE_CURRENT_LIST_DIR})
    target_link_libraries(moegrad_hardening_npy PUBLIC moegrad_hardening_cli)
  else()
    message(STATUS "moegrad hardening: cli/npy.h not found, the .npy checks are off")
  endif()
endif()
