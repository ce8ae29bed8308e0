#pragma once
// The (rows, cols) shapes each family's tests name: the shapes the brief and
// the baselines name, plus edge shapes. FamilyConformanceTest.cpp checks the
// contract on every one of them; the family tests reuse them.

#include <cstdint>
#include <utility>
#include <vector>

namespace hotkernel::kernels::testutil {

using Shapes = std::vector<std::pair<int64_t, int64_t>>;

inline Shapes namedSoftmaxShapes() {
  return {{4096, 32000}, {8192, 128256}, {1, 128256}, {7, 13},    {1, 1},  {16384, 8192}, {64, 24576},
          {1000, 50},    {3, 1001},      {1, 32768},  {2, 32769}, {10, 2}, {5, 1 << 20}};
}

// rms_norm and layer_norm.
inline Shapes namedNormShapes() {
  return {{16384, 8192}, {4096, 4096}, {1, 1},     {7, 13},      {1, 1000003}, {33, 4097}, {8192, 4096},
          {1, 8192},     {4096, 1024}, {32768, 128}, {1000, 50}, {2, 16385},   {64, 24576}, {10, 2},
          {5, 1 << 20},  {1, 16384},   {3, 1001}};
}

inline Shapes namedCrossEntropyShapes() {
  return {{8192, 128256}, {4096, 32000}, {1, 128256}, {32, 128256}, {1, 1},    {7, 13},     {1, 1000003},
          {33, 4097},     {32768, 128},  {1000, 50},  {3, 1001},    {65536, 2}, {263, 8192}, {264, 8192}};
}

inline Shapes namedReduceShapes() {
  return {{4096, 32000}, {8192, 128256}, {32768, 4096}, {32, 128256}, {1, 128256}, {1, 1},    {7, 13},
          {1, 1000000},  {33, 4097},     {32768, 128},  {1000, 50},   {3, 1001},   {65536, 2}, {5, 1}};
}

}  // namespace hotkernel::kernels::testutil
