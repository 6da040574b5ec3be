# Installation: the shared library with its soname, the public headers,
# distrun, a pkg-config file and a CMake package config.
include(CMakePackageConfigHelpers)

install(TARGETS libdist EXPORT libdistTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# dist/internal/: core's interface to the bundled parts, never installed.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/dist
  ${PROJECT_SOURCE_DIR}/wrapper_pg/include/dist
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  PATTERN internal EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tracer/include/dist
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET distrun)
  install(TARGETS distrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_file(${PROJECT_SOURCE_DIR}/cmake/libdist.pc.in
  ${PROJECT_BINARY_DIR}/libdist.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/libdist.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(EXPORT libdistTargets NAMESPACE libdist::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libdist)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/libdistConfig.cmake.in
  ${PROJECT_BINARY_DIR}/libdistConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libdist)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/libdistConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/libdistConfig.cmake
  ${PROJECT_BINARY_DIR}/libdistConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libdist)
