/*
 * How the shim writes the signature of a CUDA entry point without a CUDA
 * header: a kind and a list of opaque parameter types, from which the
 * wrappers (and the tests' fakes) are generated. libc only.
 *
 * Note [Opaque command signatures]
 * Every handle, pointer and function pointer is HkPtr; integers keep the
 * width of the current CUDA headers (HkU32 for unsigned int and enums,
 * HkInt, HkSize, HkU64); dim3 and the runtime's by-value structs have
 * their own layout-identical types. An entry point whose parameters
 * changed between versions (cuCtxSynchronize_v2, cuStreamBeginCapture_v2,
 * cuMemcpyBatchAsync_v2, the 32-bit sizes of the _v1 copies) is declared
 * with its widest form: a wrapper reads and passes on every integer or
 * pointer argument in its register or 8-byte stack slot whole, so a caller
 * of a narrower version loses nothing (the callee ignores what it does not
 * take; a 32-bit argument's upper half is unspecified in both the x86-64
 * and the AArch64 calling conventions). No wrapper looks at an argument:
 * they forward and return the callee's result unchanged.
 */
#ifndef HOTKERNEL_COMMAND_SIGNATURE_H
#define HOTKERNEL_COMMAND_SIGNATURE_H

#include <stddef.h>

typedef void* HkPtr;
typedef unsigned int HkU32;
typedef int HkInt;
typedef size_t HkSize;
typedef unsigned long long HkU64;
typedef struct HkDim3 {
  unsigned int x, y, z;
} HkDim3;
typedef struct HkPitchedPtr { /* cudaPitchedPtr */
  void* ptr;
  size_t pitch, xsize, ysize;
} HkPitchedPtr;
typedef struct HkExtent { /* cudaExtent */
  size_t width, height, depth;
} HkExtent;

/* cudaErrorUnknown and CUDA_ERROR_UNKNOWN: a wrapper whose real function cannot be found. */
#define HK_ERROR_NO_REAL_FUNCTION 999

/* HK_PARAMS(n, (T1, ..., Tn)) -> (T1 a1, ..., Tn an); HK_ARGS(n, types) -> (a1, ..., an);
 * HK_EACH(n, M, types) -> M(T1, a1) ... M(Tn, an). */
#define HK_CALL(M, ...) M(__VA_ARGS__)
#define HK_PARAMS(n, types) HK_PARAMS_##n types
#define HK_ARGS(n, types) HK_ARGS_##n types
#define HK_EACH(n, M, types) HK_EACH_CALL(HK_EACH_##n, M, HK_UNPAREN types)
#define HK_EACH_CALL(M, ...) M(__VA_ARGS__) /* not HK_CALL: HK_EACH is used inside HK_CALL's expansion */
#define HK_UNPAREN(...) __VA_ARGS__

#define HK_PARAMS_0() (void)
#define HK_PARAMS_1(T1) (T1 a1)
#define HK_PARAMS_2(T1, T2) (T1 a1, T2 a2)
#define HK_PARAMS_3(T1, T2, T3) (T1 a1, T2 a2, T3 a3)
#define HK_PARAMS_4(T1, T2, T3, T4) (T1 a1, T2 a2, T3 a3, T4 a4)
#define HK_PARAMS_5(T1, T2, T3, T4, T5) (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5)
#define HK_PARAMS_6(T1, T2, T3, T4, T5, T6) (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6)
#define HK_PARAMS_7(T1, T2, T3, T4, T5, T6, T7) (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7)
#define HK_PARAMS_8(T1, T2, T3, T4, T5, T6, T7, T8) (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8)
#define HK_PARAMS_9(T1, T2, T3, T4, T5, T6, T7, T8, T9) \
  (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9)
#define HK_PARAMS_10(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10) \
  (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10)
#define HK_PARAMS_11(T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11) \
  (T1 a1, T2 a2, T3 a3, T4 a4, T5 a5, T6 a6, T7 a7, T8 a8, T9 a9, T10 a10, T11 a11)

#define HK_ARGS_0() ()
#define HK_ARGS_1(...) (a1)
#define HK_ARGS_2(...) (a1, a2)
#define HK_ARGS_3(...) (a1, a2, a3)
#define HK_ARGS_4(...) (a1, a2, a3, a4)
#define HK_ARGS_5(...) (a1, a2, a3, a4, a5)
#define HK_ARGS_6(...) (a1, a2, a3, a4, a5, a6)
#define HK_ARGS_7(...) (a1, a2, a3, a4, a5, a6, a7)
#define HK_ARGS_8(...) (a1, a2, a3, a4, a5, a6, a7, a8)
#define HK_ARGS_9(...) (a1, a2, a3, a4, a5, a6, a7, a8, a9)
#define HK_ARGS_10(...) (a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)
#define HK_ARGS_11(...) (a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)

#define HK_EACH_0(M, ...)
#define HK_EACH_1(M, T1) M(T1, a1)
#define HK_EACH_2(M, T1, T2) M(T1, a1) M(T2, a2)
#define HK_EACH_3(M, T1, T2, T3) HK_EACH_2(M, T1, T2) M(T3, a3)
#define HK_EACH_4(M, T1, T2, T3, T4) HK_EACH_3(M, T1, T2, T3) M(T4, a4)
#define HK_EACH_5(M, T1, T2, T3, T4, T5) HK_EACH_4(M, T1, T2, T3, T4) M(T5, a5)
#define HK_EACH_6(M, T1, T2, T3, T4, T5, T6) HK_EACH_5(M, T1, T2, T3, T4, T5) M(T6, a6)
#define HK_EACH_7(M, T1, T2, T3, T4, T5, T6, T7) HK_EACH_6(M, T1, T2, T3, T4, T5, T6) M(T7, a7)
#define HK_EACH_8(M, T1, T2, T3, T4, T5, T6, T7, T8) HK_EACH_7(M, T1, T2, T3, T4, T5, T6, T7) M(T8, a8)
#define HK_EACH_9(M, T1, T2, T3, T4, T5, T6, T7, T8, T9) \
  HK_EACH_8(M, T1, T2, T3, T4, T5, T6, T7, T8) M(T9, a9)
#define HK_EACH_10(M, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10) \
  HK_EACH_9(M, T1, T2, T3, T4, T5, T6, T7, T8, T9) M(T10, a10)
#define HK_EACH_11(M, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11) \
  HK_EACH_10(M, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10) M(T11, a11)

#endif
