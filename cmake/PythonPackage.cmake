# Note [Building against the environment's torch]
# `pip install --no-build-isolation .` (pyproject.toml, scikit-build-core)
# configures this project with SKBUILD set and Python_EXECUTABLE the python
# pip runs for. libhotkernel.so must be compiled against the headers of the
# torch the serving process will load (it refuses any other at start), so the
# torch is the one that python imports: its CMake package
# (torch.utils.cmake_prefix_path) goes first in CMAKE_PREFIX_PATH, and
# HOTKERNEL_PYTHON names that python for cmake/TorchBuildInfo.cmake. Under
# pip's default build isolation that python sees only the build requirements,
# never the environment's torch, and a torch listed there would be whatever
# PyPI serves that day, not the user's: so the build needs
# --no-build-isolation and stops with that advice when torch cannot be imported.
if(NOT Python_EXECUTABLE)
  message(FATAL_ERROR "SKBUILD is set but Python_EXECUTABLE is not: build the Python package with "
                      "`pip install --no-build-isolation .`")
endif()
if(NOT HOTKERNEL_PYTHON)
  set(HOTKERNEL_PYTHON "${Python_EXECUTABLE}")
endif()
if(HOTKERNEL_ENABLE_TORCH)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _hk_torch_prefix ERROR_VARIABLE _hk_torch_error
    RESULT_VARIABLE _hk_torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _hk_torch_rc EQUAL 0)
    string(STRIP "${_hk_torch_error}" _hk_torch_error)
    string(REGEX REPLACE ".*\n" "" _hk_torch_error "${_hk_torch_error}")
    message(FATAL_ERROR
      "hotkernel is built against the torch of the environment it is installed into, but "
      "${Python_EXECUTABLE} cannot import torch (${_hk_torch_error}).\n"
      "pip's default build isolation hides the environment's packages; with torch installed "
      "in the environment, build with:\n"
      "  pip install scikit-build-core\n"
      "  pip install --no-build-isolation .\n"
      "(-C cmake.define.HOTKERNEL_ENABLE_TORCH=OFF builds the shim and the CLI without torch.)")
  endif()
  # A kept build folder (-C build-dir=...) configured against another torch
  # would keep that torch's cached paths.
  if(Torch_DIR)
    string(FIND "${Torch_DIR}" "${_hk_torch_prefix}" _hk_torch_at)
    if(NOT _hk_torch_at EQUAL 0)
      message(FATAL_ERROR "this build folder was configured against the torch at ${Torch_DIR}, not "
                          "${_hk_torch_prefix}: remove it (or use another build-dir)")
    endif()
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${_hk_torch_prefix}")
  message(STATUS "hotkernel: building against the torch of ${Python_EXECUTABLE} (${_hk_torch_prefix})")
endif()
