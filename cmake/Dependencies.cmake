# Every dependency is found, none is downloaded at build time.
# tools/setup.sh installs them (Debian packages + the project venv's torch).
find_package(Threads REQUIRED)
find_package(CUDAToolkit 12 REQUIRED)       # headers for the driver API and NVRTC; both are dlopen'ed at run time
find_package(nlohmann_json 3 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(TBB REQUIRED)
# hiredis (Debian libhiredis-dev): the shared tier on Redis (cache/remote). Required like SQLite: it is one
# small C library, and a build without it would serve without the tier it was configured for.
find_path(HIREDIS_INCLUDE_DIR hiredis.h PATH_SUFFIXES hiredis REQUIRED)
find_library(HIREDIS_LIBRARY hiredis REQUIRED)
add_library(hiredis::hiredis UNKNOWN IMPORTED)
set_target_properties(hiredis::hiredis PROPERTIES IMPORTED_LOCATION ${HIREDIS_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${HIREDIS_INCLUDE_DIR})
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${CLI11_INCLUDE_DIR})
endif()
if(HOTKERNEL_ENABLE_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(HOTKERNEL_ENABLE_TORCH)
  # Torch's CMake config adds CUDA language requirements we do not need; we only
  # link the libraries and use the headers of the torch the process will load.
  find_package(Torch REQUIRED)
  find_library(TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
endif()
