# The torch this build compiles against, for the engine's check at start
# (Note [The process's torch], runtime/TorchVersion.h) and `hotkernel doctor`:
#   HOTKERNEL_TORCH_FULL_VERSION  torch.__version__ of HOTKERNEL_PYTHON's torch when
#                                 it is the one Torch's CMake package found
#                                 ("2.11.0+cu130"), else TORCH_VERSION ("2.11.0")
#   HOTKERNEL_TORCH_CUDART        its torch.version.cuda as a CUDA runtime number
#                                 (13000), 0 when unknown
# Configure-time only: nothing built starts python.
set(HOTKERNEL_TORCH_FULL_VERSION "${Torch_VERSION}")
set(HOTKERNEL_TORCH_CUDART 0)
set(_hk_python "${HOTKERNEL_PYTHON}")
if(NOT _hk_python)
  set(_hk_python python3)  # tests/interpose's default for HOTKERNEL_PYTHON
endif()
execute_process(
  COMMAND ${_hk_python} -c "import torch; print(torch.__version__); print(torch.version.cuda or '')"
  OUTPUT_VARIABLE _hk_torch_out RESULT_VARIABLE _hk_torch_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_hk_torch_rc EQUAL 0)
  string(REPLACE "\n" ";" _hk_torch_lines "${_hk_torch_out}")
  list(GET _hk_torch_lines 0 _hk_python_torch)
  if(_hk_python_torch MATCHES "^${Torch_VERSION}([+].*)?$")
    set(HOTKERNEL_TORCH_FULL_VERSION "${_hk_python_torch}")
    list(LENGTH _hk_torch_lines _hk_torch_count)
    if(_hk_torch_count GREATER 1)
      list(GET _hk_torch_lines 1 _hk_torch_cuda)
      if(_hk_torch_cuda MATCHES "^([0-9]+)[.]([0-9]+)")
        math(EXPR HOTKERNEL_TORCH_CUDART "${CMAKE_MATCH_1} * 1000 + ${CMAKE_MATCH_2} * 10")
      endif()
    endif()
  endif()
endif()
