# What installs, and how: three packages, one per library a program links.
#
#   stagger        libstagger (the core): include/stagger/*.h except the
#                  parts' headers, stagger.pc, CMake target stagger::stagger
#   stagger-curl   libstagger-curl: include/stagger/curl.h (and
#                  include/stagger/curl/*.h), stagger-curl.pc, component
#                  `curl`, target stagger::curl
#   stagger-redis  libstagger-redis: include/stagger/redis.h (and
#                  include/stagger/redis/*.h), stagger-redis.pc, component
#                  `redis`, target stagger::redis
#
# Headers are taken by name, never listed one by one: a new core header
# (redact.h, events.h, ...) installs with the core without an edit here; a
# header named after a part (STG_PARTS) belongs to that part and installs
# only with it, so a part that is not installed (batch, store, server, sim,
# proxy) cannot leak a header into the core package.
#
# Each installed part is a shared library with SOVERSION STG_ABI_VERSION
# (docs/ABI.md) built from the same sources as the part's static library,
# which the build tree itself uses. The parts' own CMakeLists stay about
# building; this file is the one place that says what ships.

set(STG_PARTS curl redis batch store server sim proxy)

# The .pc files find the prefix from their own place (${pcfiledir}), so an
# install moved or made with `cmake --install --prefix` stays usable.
file(RELATIVE_PATH STG_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")

# Headers of `part` ("core" for the core) into OUT.
function(stg_part_headers part out)
  set(hs)
  if(part STREQUAL "core")
    file(GLOB all CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/stagger/*.h)
    foreach(h ${all})
      get_filename_component(n ${h} NAME_WE)
      if(NOT n IN_LIST STG_PARTS)
        list(APPEND hs ${h})
      endif()
    endforeach()
  else()
    file(GLOB hs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/stagger/${part}.h)
  endif()
  set(${out} ${hs} PARENT_SCOPE)
endfunction()

# A shared library built from the sources, include directories and
# definitions of the static library `static`; ARGN are its
# target_link_libraries arguments.
function(stg_shared_twin static shared output)
  get_target_property(srcs ${static} SOURCES)
  get_target_property(dir ${static} SOURCE_DIR)
  set(abs)
  foreach(s ${srcs})
    if(NOT IS_ABSOLUTE "${s}")
      set(s "${dir}/${s}")
    endif()
    list(APPEND abs "${s}")
  endforeach()
  add_library(${shared} SHARED ${abs})
  foreach(p INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS)
    get_target_property(v ${static} ${p})
    if(v)
      set_property(TARGET ${shared} PROPERTY ${p} "${v}")
    endif()
  endforeach()
  set_target_properties(${shared} PROPERTIES OUTPUT_NAME ${output}
    VERSION ${PROJECT_VERSION} SOVERSION ${STG_ABI_VERSION})
  target_include_directories(${shared} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${shared} ${ARGN})
endfunction()

# Install one package: its headers, its libraries (exported to CMake as
# stagger::<export name>), its .pc file from <pc>.pc.in, and for a part the
# CMake file stagger-<part>Targets.cmake that the `part` component loads.
function(stg_install_package part pc)
  cmake_parse_arguments(A "" "" "TARGETS" ${ARGN})
  stg_part_headers(${part} hs)
  install(FILES ${hs} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stagger)
  if(NOT part STREQUAL "core" AND IS_DIRECTORY ${PROJECT_SOURCE_DIR}/include/stagger/${part})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stagger/${part}
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stagger)
  endif()
  if(part STREQUAL "core")
    set(export staggerTargets)
  else()
    set(export stagger-${part}Targets)
  endif()
  install(TARGETS ${A_TARGETS} EXPORT ${export}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ${export} NAMESPACE stagger::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stagger)
  configure_file(${PROJECT_SOURCE_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
