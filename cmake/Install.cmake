# Note [Installed layout]
# `cmake --install` (and `pip install .`, which installs into the Python
# package's folder) lays out one prefix the way the build tree is laid out:
#   bin/hotkernel, bin/hotkernel-sandbox-compile, bin/hotkernel-sandbox-run,
#   bin/hotkernel-warmup                   the CLI and its helpers
#   lib/libhotkernel_preload.so            the libc-only shim for LD_PRELOAD
#   lib/libhotkernel.so                    the library the shim loads (torch builds)
#   include/hotkernel/hotkernel.h          the C API
#   lib/cmake/hotkernel/                   the CMake package (find_package(hotkernel))
# The library folder is `lib` whatever GNUInstallDirs would pick (lib64,
# lib/<multiarch>): the CLI finds the shim in <bin>/../lib
# (tools/cli/InstallLayout.h), the shim finds libhotkernel.so beside itself,
# the sandbox helpers are found beside the library or in its ../bin
# (findHelperExecutable), and `hotkernel warmup` runs hotkernel-warmup from
# beside the CLI. No installed file links one of ours at run time, so only
# libhotkernel.so and hotkernel-warmup carry a RUNPATH: the lib folder of the
# torch they are built against, then the folder of the CUDA runtime they link
# (libcudart is one of their own needed libraries, searched in their RUNPATH
# before torch's libraries bring in theirs; a Python process has loaded
# torch's already); the others carry none.
include(CMakePackageConfigHelpers)
set(HOTKERNEL_INSTALL_BINDIR bin)
set(HOTKERNEL_INSTALL_LIBDIR lib)
set(HOTKERNEL_INSTALL_INCLUDEDIR include)
set(HOTKERNEL_INSTALL_CMAKEDIR ${HOTKERNEL_INSTALL_LIBDIR}/cmake/hotkernel)

# hotkernel::headers — the C API header alone, for programs that reach the
# loaded library through dlsym (the shim loads it) rather than linking it.
add_library(hotkernel_headers INTERFACE)
target_include_directories(hotkernel_headers INTERFACE
  $<INSTALL_INTERFACE:${HOTKERNEL_INSTALL_INCLUDEDIR}>)
set_target_properties(hotkernel_headers PROPERTIES EXPORT_NAME headers)

# Exported (hotkernel::preload, hotkernel::cli, hotkernel::hotkernel): what a
# consumer links or names in its own build; the helpers are installed beside them.
set_target_properties(hotkernel_preload PROPERTIES EXPORT_NAME preload)
set_target_properties(hotkernel_cli PROPERTIES EXPORT_NAME cli)
set(hotkernel_exported_targets hotkernel_preload hotkernel_headers hotkernel_cli)
set(hotkernel_helper_targets hotkernel_sandbox_compile hotkernel_sandbox_run)
if(TARGET hotkernel)
  # hotkernel::hotkernel — libhotkernel.so and its C API, for libtorch programs
  # that link it and call hotkernel_start() themselves instead of preloading the shim.
  target_include_directories(hotkernel INTERFACE $<INSTALL_INTERFACE:${HOTKERNEL_INSTALL_INCLUDEDIR}>)
  list(APPEND hotkernel_exported_targets hotkernel)
  list(APPEND hotkernel_helper_targets hotkernel_warmup)
  get_target_property(hotkernel_cudart CUDA::cudart IMPORTED_LOCATION)
  if(hotkernel_cudart)
    get_filename_component(hotkernel_cudart_dir "${hotkernel_cudart}" DIRECTORY)
    set_property(TARGET hotkernel hotkernel_warmup APPEND PROPERTY INSTALL_RPATH "${hotkernel_cudart_dir}")
  endif()
endif()

install(TARGETS ${hotkernel_exported_targets}
  EXPORT hotkernelTargets
  RUNTIME DESTINATION ${HOTKERNEL_INSTALL_BINDIR}
  LIBRARY DESTINATION ${HOTKERNEL_INSTALL_LIBDIR})
install(TARGETS ${hotkernel_helper_targets} RUNTIME DESTINATION ${HOTKERNEL_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/interpose/include/hotkernel/hotkernel.h
  DESTINATION ${HOTKERNEL_INSTALL_INCLUDEDIR}/hotkernel)

install(EXPORT hotkernelTargets NAMESPACE hotkernel:: DESTINATION ${HOTKERNEL_INSTALL_CMAKEDIR})
# The torch libhotkernel.so is built against, for the package's users
# (hotkernel_TORCH_VERSION); empty in a build without torch.
if(HOTKERNEL_ENABLE_TORCH)
  set(HOTKERNEL_PACKAGE_TORCH_VERSION "${HOTKERNEL_TORCH_FULL_VERSION}")
else()
  set(HOTKERNEL_PACKAGE_TORCH_VERSION "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hotkernelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/hotkernelConfig.cmake
  INSTALL_DESTINATION ${HOTKERNEL_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the C API, so only the same minor version matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/hotkernelConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/hotkernelConfig.cmake
  ${PROJECT_BINARY_DIR}/package/hotkernelConfigVersion.cmake
  DESTINATION ${HOTKERNEL_INSTALL_CMAKEDIR})
