# `cmake --install <build> [--prefix P] [--component C]`: what a user of the
# library, the command or the Python package gets, in the GNU layout.
#
#   Runtime      lib/libmoegrad.so.<version> and its soname link, bin/moegrad,
#                lib/moegrad/moegrad_bench_onednn.so (bench's oneDNN baseline)
#   Development  include/moegrad/*, lib/libmoegrad.so, lib/libmoegrad.a,
#                lib/cmake/moegrad/ (find_package(moegrad) ->
#                moegrad::moegrad, moegrad::moegrad_static),
#                lib/pkgconfig/moegrad.pc
#   Python       the moegrad package, in MOEGRAD_INSTALL_PYTHONDIR (python/)
#
# The shared library exports the C API only. The archive holds the same
# objects; its global symbols are the C API and names in moegrad's own
# namespace (install_test.sh checks both).
# tests/install/install_test.sh installs into a temporary prefix and builds
# and runs a consumer through each route.
include(CMakePackageConfigHelpers)

set(MOEGRAD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/moegrad CACHE STRING
    "Where moegradConfig.cmake goes, relative to the prefix")
install(TARGETS moegrad EXPORT moegradTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development)
install(TARGETS moegrad_static EXPORT moegradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/moegrad DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT Development FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(TARGETS moegrad_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
# The oneDNN baseline `moegrad bench` loads, when built (bench/CMakeLists.txt).
if(TARGET moegrad_bench_onednn)
  install(TARGETS moegrad_bench_onednn LIBRARY DESTINATION ${MOEGRAD_INSTALL_BENCH_MODULE_DIR} COMPONENT Runtime)
endif()

# A relocatable package: the exported paths are relative to the config file.
install(EXPORT moegradTargets NAMESPACE moegrad:: DESTINATION ${MOEGRAD_INSTALL_CMAKEDIR}
        COMPONENT Development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/moegradConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/moegradConfig.cmake
                              INSTALL_DESTINATION ${MOEGRAD_INSTALL_CMAKEDIR})
# Before 1.0 a minor release may change the API, so only the same major.minor
# satisfies a request (find_package(moegrad 0.1) takes 0.1.x).
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/moegradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/moegradConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/moegradConfigVersion.cmake
        DESTINATION ${MOEGRAD_INSTALL_CMAKEDIR} COMPONENT Development)

# pkg-config: the DLPack header directory goes into Cflags unless the C
# compiler searches it anyway (DLPack ships no .pc file to name in Requires).
get_target_property(MOEGRAD_PC_DLPACK_INCLUDES dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
set(MOEGRAD_PC_CFLAGS "-I\${includedir}")
foreach(dir ${MOEGRAD_PC_DLPACK_INCLUDES})
  if(NOT dir IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND MOEGRAD_PC_CFLAGS " -I${dir}")
  endif()
endforeach()
# The prefix is found from the file's own place (${pcfiledir}), so the .pc,
# like the CMake package, stays right for `cmake --install --prefix P` and
# after the tree is moved.
# (An absolute libdir fixes the .pc's place, and then the prefix too.)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MOEGRAD_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" up "${up}")
  set(MOEGRAD_PC_PREFIX "\${pcfiledir}/${up}")
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(MOEGRAD_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(MOEGRAD_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/moegrad.pc.in ${CMAKE_CURRENT_BINARY_DIR}/moegrad.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/moegrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT Development)
