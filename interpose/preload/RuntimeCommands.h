/*
 * The CUDA runtime API commands the shim wraps (Note [Flush before foreign
 * commands] in CommandHook.h): one signature per entry point (Note [Opaque
 * command signatures]) and every name libcudart exports for it (the
 * per-thread default stream _ptsz / _ptds versions). libc only; included by
 * RuntimeInterpose.c and the tests' fake libcudart.
 *
 * HK_SIG_<entry point>: its command kind, its parameter count, its types.
 * HK_RUNTIME_EXPORTS(Y): Y(exported name, entry point) for each exported name.
 */
#ifndef HOTKERNEL_RUNTIME_COMMANDS_H
#define HOTKERNEL_RUNTIME_COMMANDS_H

#include "CommandSignature.h"
#include "hotkernel/hotkernel_shim.h"

/* kernel handle, grid, block, args, sharedMem, stream (what nvcc 13's <<<>>> calls) */
#define HK_SIG___cudaLaunchKernel HOTKERNEL_COMMAND_LAUNCH, 6, (HkPtr, HkDim3, HkDim3, HkPtr, HkSize, HkPtr)
/* func, grid, block, args, sharedMem, stream */
#define HK_SIG_cudaLaunchKernel HOTKERNEL_COMMAND_LAUNCH, 6, (HkPtr, HkDim3, HkDim3, HkPtr, HkSize, HkPtr)
/* config, func, args */
#define HK_SIG_cudaLaunchKernelExC HOTKERNEL_COMMAND_LAUNCH, 3, (HkPtr, HkPtr, HkPtr)
/* func, grid, block, args, sharedMem, stream */
#define HK_SIG_cudaLaunchCooperativeKernel HOTKERNEL_COMMAND_LAUNCH, 6, (HkPtr, HkDim3, HkDim3, HkPtr, HkSize, HkPtr)
/* stream, fn, userData */
#define HK_SIG_cudaLaunchHostFunc HOTKERNEL_COMMAND_HOST_CALLBACK, 3, (HkPtr, HkPtr, HkPtr)
/* stream, callback, userData, flags */
#define HK_SIG_cudaStreamAddCallback HOTKERNEL_COMMAND_HOST_CALLBACK, 4, (HkPtr, HkPtr, HkPtr, HkU32)
/* graphExec, stream */
#define HK_SIG_cudaGraphLaunch HOTKERNEL_COMMAND_GRAPH_LAUNCH, 2, (HkPtr, HkPtr)
/* dst, src, count, kind */
#define HK_SIG_cudaMemcpy HOTKERNEL_COMMAND_COPY, 4, (HkPtr, HkPtr, HkSize, HkU32)
/* dst, src, count, kind, stream */
#define HK_SIG_cudaMemcpyAsync HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkPtr, HkSize, HkU32, HkPtr)
/* dst, dstDevice, src, srcDevice, count */
#define HK_SIG_cudaMemcpyPeer HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkInt, HkPtr, HkInt, HkSize)
/* dst, dstDevice, src, srcDevice, count, stream */
#define HK_SIG_cudaMemcpyPeerAsync HOTKERNEL_COMMAND_COPY, 6, (HkPtr, HkInt, HkPtr, HkInt, HkSize, HkPtr)
/* dst, dpitch, src, spitch, width, height, kind */
#define HK_SIG_cudaMemcpy2D HOTKERNEL_COMMAND_COPY, 7, (HkPtr, HkSize, HkPtr, HkSize, HkSize, HkSize, HkU32)
/* dst, dpitch, src, spitch, width, height, kind, stream */
#define HK_SIG_cudaMemcpy2DAsync HOTKERNEL_COMMAND_COPY, 8, (HkPtr, HkSize, HkPtr, HkSize, HkSize, HkSize, HkU32, HkPtr)
/* parms */
#define HK_SIG_cudaMemcpy3D HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* parms, stream */
#define HK_SIG_cudaMemcpy3DAsync HOTKERNEL_COMMAND_COPY, 2, (HkPtr, HkPtr)
/* parms */
#define HK_SIG_cudaMemcpy3DPeer HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* parms, stream */
#define HK_SIG_cudaMemcpy3DPeerAsync HOTKERNEL_COMMAND_COPY, 2, (HkPtr, HkPtr)
/* symbol, src, count, offset, kind */
#define HK_SIG_cudaMemcpyToSymbol HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkPtr, HkSize, HkSize, HkU32)
/* dst, symbol, count, offset, kind */
#define HK_SIG_cudaMemcpyFromSymbol HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkPtr, HkSize, HkSize, HkU32)
/* symbol, src, count, offset, kind, stream */
#define HK_SIG_cudaMemcpyToSymbolAsync HOTKERNEL_COMMAND_COPY, 6, (HkPtr, HkPtr, HkSize, HkSize, HkU32, HkPtr)
/* dst, symbol, count, offset, kind, stream */
#define HK_SIG_cudaMemcpyFromSymbolAsync HOTKERNEL_COMMAND_COPY, 6, (HkPtr, HkPtr, HkSize, HkSize, HkU32, HkPtr)
/* dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx (12.x; 13 has stream here), stream */
#define HK_SIG_cudaMemcpyBatchAsync HOTKERNEL_COMMAND_COPY, 9, (HkPtr, HkPtr, HkPtr, HkSize, HkPtr, HkPtr, HkSize, HkPtr, HkPtr)
/* numOps, opList, failIdx (12.x only), flags, stream */
#define HK_SIG_cudaMemcpy3DBatchAsync HOTKERNEL_COMMAND_COPY, 5, (HkSize, HkPtr, HkPtr, HkU64, HkPtr)
/* dst, wOffset, hOffset, src, count, kind */
#define HK_SIG_cudaMemcpyToArray HOTKERNEL_COMMAND_COPY, 6, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkU32)
/* dst, wOffset, hOffset, src, count, kind, stream */
#define HK_SIG_cudaMemcpyToArrayAsync HOTKERNEL_COMMAND_COPY, 7, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkU32, HkPtr)
/* dst, src, wOffset, hOffset, count, kind */
#define HK_SIG_cudaMemcpyFromArray HOTKERNEL_COMMAND_COPY, 6, (HkPtr, HkPtr, HkSize, HkSize, HkSize, HkU32)
/* dst, src, wOffset, hOffset, count, kind, stream */
#define HK_SIG_cudaMemcpyFromArrayAsync HOTKERNEL_COMMAND_COPY, 7, (HkPtr, HkPtr, HkSize, HkSize, HkSize, HkU32, HkPtr)
/* dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind */
#define HK_SIG_cudaMemcpyArrayToArray HOTKERNEL_COMMAND_COPY, 8, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkSize, HkSize, HkU32)
/* dst, wOffset, hOffset, src, spitch, width, height, kind */
#define HK_SIG_cudaMemcpy2DToArray HOTKERNEL_COMMAND_COPY, 8, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkSize, HkSize, HkU32)
/* dst, wOffset, hOffset, src, spitch, width, height, kind, stream */
#define HK_SIG_cudaMemcpy2DToArrayAsync HOTKERNEL_COMMAND_COPY, 9, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkSize, HkSize, HkU32, HkPtr)
/* dst, dpitch, src, wOffset, hOffset, width, height, kind */
#define HK_SIG_cudaMemcpy2DFromArray HOTKERNEL_COMMAND_COPY, 8, (HkPtr, HkSize, HkPtr, HkSize, HkSize, HkSize, HkSize, HkU32)
/* dst, dpitch, src, wOffset, hOffset, width, height, kind, stream */
#define HK_SIG_cudaMemcpy2DFromArrayAsync HOTKERNEL_COMMAND_COPY, 9, (HkPtr, HkSize, HkPtr, HkSize, HkSize, HkSize, HkSize, HkU32, HkPtr)
/* dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind */
#define HK_SIG_cudaMemcpy2DArrayToArray HOTKERNEL_COMMAND_COPY, 9, (HkPtr, HkSize, HkSize, HkPtr, HkSize, HkSize, HkSize, HkSize, HkU32)
/* devPtr, value, count */
#define HK_SIG_cudaMemset HOTKERNEL_COMMAND_SET, 3, (HkPtr, HkInt, HkSize)
/* devPtr, value, count, stream */
#define HK_SIG_cudaMemsetAsync HOTKERNEL_COMMAND_SET, 4, (HkPtr, HkInt, HkSize, HkPtr)
/* devPtr, pitch, value, width, height */
#define HK_SIG_cudaMemset2D HOTKERNEL_COMMAND_SET, 5, (HkPtr, HkSize, HkInt, HkSize, HkSize)
/* devPtr, pitch, value, width, height, stream */
#define HK_SIG_cudaMemset2DAsync HOTKERNEL_COMMAND_SET, 6, (HkPtr, HkSize, HkInt, HkSize, HkSize, HkPtr)
/* pitchedDevPtr, value, extent (structs by value) */
#define HK_SIG_cudaMemset3D HOTKERNEL_COMMAND_SET, 3, (HkPitchedPtr, HkInt, HkExtent)
/* pitchedDevPtr, value, extent, stream */
#define HK_SIG_cudaMemset3DAsync HOTKERNEL_COMMAND_SET, 4, (HkPitchedPtr, HkInt, HkExtent, HkPtr)
/* event, stream */
#define HK_SIG_cudaEventRecord HOTKERNEL_COMMAND_EVENT_RECORD, 2, (HkPtr, HkPtr)
/* event, stream, flags */
#define HK_SIG_cudaEventRecordWithFlags HOTKERNEL_COMMAND_EVENT_RECORD, 3, (HkPtr, HkPtr, HkU32)
/* stream, event, flags */
#define HK_SIG_cudaStreamWaitEvent HOTKERNEL_COMMAND_STREAM_WAIT, 3, (HkPtr, HkPtr, HkU32)
/* stream */
#define HK_SIG_cudaStreamSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 1, (HkPtr)
/* no parameters */
#define HK_SIG_cudaDeviceSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 0, ()
/* event */
#define HK_SIG_cudaEventSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 1, (HkPtr)
/* stream */
#define HK_SIG_cudaStreamQuery HOTKERNEL_COMMAND_QUERY, 1, (HkPtr)
/* stream, mode (the plain name is CaptureInterpose.c's) */
#define HK_SIG_cudaStreamBeginCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkU32)
/* stream, graph, dependencies, dependencyData, numDependencies, mode */
#define HK_SIG_cudaStreamBeginCaptureToGraph HOTKERNEL_COMMAND_CAPTURE, 6, (HkPtr, HkPtr, HkPtr, HkPtr, HkSize, HkU32)
/* stream, graph out (the plain name is CaptureInterpose.c's) */
#define HK_SIG_cudaStreamEndCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkPtr)

#define HK_RUNTIME_EXPORTS(Y) \
  Y(__cudaLaunchKernel, __cudaLaunchKernel) Y(__cudaLaunchKernel_ptsz, __cudaLaunchKernel) \
  Y(cudaLaunchKernel, cudaLaunchKernel) Y(cudaLaunchKernel_ptsz, cudaLaunchKernel) \
  Y(cudaLaunchKernelExC, cudaLaunchKernelExC) Y(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC) \
  Y(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel) Y(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel) \
  Y(cudaLaunchHostFunc, cudaLaunchHostFunc) Y(cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc) \
  Y(cudaStreamAddCallback, cudaStreamAddCallback) Y(cudaStreamAddCallback_ptsz, cudaStreamAddCallback) \
  Y(cudaGraphLaunch, cudaGraphLaunch) Y(cudaGraphLaunch_ptsz, cudaGraphLaunch) \
  Y(cudaMemcpy, cudaMemcpy) Y(cudaMemcpy_ptds, cudaMemcpy) \
  Y(cudaMemcpyAsync, cudaMemcpyAsync) Y(cudaMemcpyAsync_ptsz, cudaMemcpyAsync) \
  Y(cudaMemcpyPeer, cudaMemcpyPeer) \
  Y(cudaMemcpyPeerAsync, cudaMemcpyPeerAsync) \
  Y(cudaMemcpy2D, cudaMemcpy2D) Y(cudaMemcpy2D_ptds, cudaMemcpy2D) \
  Y(cudaMemcpy2DAsync, cudaMemcpy2DAsync) Y(cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync) \
  Y(cudaMemcpy3D, cudaMemcpy3D) Y(cudaMemcpy3D_ptds, cudaMemcpy3D) \
  Y(cudaMemcpy3DAsync, cudaMemcpy3DAsync) Y(cudaMemcpy3DAsync_ptsz, cudaMemcpy3DAsync) \
  Y(cudaMemcpy3DPeer, cudaMemcpy3DPeer) Y(cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeer) \
  Y(cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerAsync) Y(cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerAsync) \
  Y(cudaMemcpyToSymbol, cudaMemcpyToSymbol) Y(cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol) \
  Y(cudaMemcpyFromSymbol, cudaMemcpyFromSymbol) Y(cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol) \
  Y(cudaMemcpyToSymbolAsync, cudaMemcpyToSymbolAsync) Y(cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync) \
  Y(cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync) Y(cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync) \
  Y(cudaMemcpyBatchAsync, cudaMemcpyBatchAsync) Y(cudaMemcpyBatchAsync_ptsz, cudaMemcpyBatchAsync) \
  Y(cudaMemcpy3DBatchAsync, cudaMemcpy3DBatchAsync) Y(cudaMemcpy3DBatchAsync_ptsz, cudaMemcpy3DBatchAsync) \
  Y(cudaMemcpyToArray, cudaMemcpyToArray) Y(cudaMemcpyToArray_ptds, cudaMemcpyToArray) \
  Y(cudaMemcpyToArrayAsync, cudaMemcpyToArrayAsync) Y(cudaMemcpyToArrayAsync_ptsz, cudaMemcpyToArrayAsync) \
  Y(cudaMemcpyFromArray, cudaMemcpyFromArray) Y(cudaMemcpyFromArray_ptds, cudaMemcpyFromArray) \
  Y(cudaMemcpyFromArrayAsync, cudaMemcpyFromArrayAsync) Y(cudaMemcpyFromArrayAsync_ptsz, cudaMemcpyFromArrayAsync) \
  Y(cudaMemcpyArrayToArray, cudaMemcpyArrayToArray) Y(cudaMemcpyArrayToArray_ptds, cudaMemcpyArrayToArray) \
  Y(cudaMemcpy2DToArray, cudaMemcpy2DToArray) Y(cudaMemcpy2DToArray_ptds, cudaMemcpy2DToArray) \
  Y(cudaMemcpy2DToArrayAsync, cudaMemcpy2DToArrayAsync) Y(cudaMemcpy2DToArrayAsync_ptsz, cudaMemcpy2DToArrayAsync) \
  Y(cudaMemcpy2DFromArray, cudaMemcpy2DFromArray) Y(cudaMemcpy2DFromArray_ptds, cudaMemcpy2DFromArray) \
  Y(cudaMemcpy2DFromArrayAsync, cudaMemcpy2DFromArrayAsync) Y(cudaMemcpy2DFromArrayAsync_ptsz, cudaMemcpy2DFromArrayAsync) \
  Y(cudaMemcpy2DArrayToArray, cudaMemcpy2DArrayToArray) Y(cudaMemcpy2DArrayToArray_ptds, cudaMemcpy2DArrayToArray) \
  Y(cudaMemset, cudaMemset) Y(cudaMemset_ptds, cudaMemset) \
  Y(cudaMemsetAsync, cudaMemsetAsync) Y(cudaMemsetAsync_ptsz, cudaMemsetAsync) \
  Y(cudaMemset2D, cudaMemset2D) Y(cudaMemset2D_ptds, cudaMemset2D) \
  Y(cudaMemset2DAsync, cudaMemset2DAsync) Y(cudaMemset2DAsync_ptsz, cudaMemset2DAsync) \
  Y(cudaMemset3D, cudaMemset3D) Y(cudaMemset3D_ptds, cudaMemset3D) \
  Y(cudaMemset3DAsync, cudaMemset3DAsync) Y(cudaMemset3DAsync_ptsz, cudaMemset3DAsync) \
  Y(cudaEventRecord, cudaEventRecord) Y(cudaEventRecord_ptsz, cudaEventRecord) \
  Y(cudaEventRecordWithFlags, cudaEventRecordWithFlags) Y(cudaEventRecordWithFlags_ptsz, cudaEventRecordWithFlags) \
  Y(cudaStreamWaitEvent, cudaStreamWaitEvent) Y(cudaStreamWaitEvent_ptsz, cudaStreamWaitEvent) \
  Y(cudaStreamSynchronize, cudaStreamSynchronize) Y(cudaStreamSynchronize_ptsz, cudaStreamSynchronize) \
  Y(cudaDeviceSynchronize, cudaDeviceSynchronize) \
  Y(cudaEventSynchronize, cudaEventSynchronize) \
  Y(cudaStreamQuery, cudaStreamQuery) Y(cudaStreamQuery_ptsz, cudaStreamQuery) \
  Y(cudaStreamBeginCapture_ptsz, cudaStreamBeginCapture) \
  Y(cudaStreamBeginCaptureToGraph, cudaStreamBeginCaptureToGraph) Y(cudaStreamBeginCaptureToGraph_ptsz, cudaStreamBeginCaptureToGraph) \
  Y(cudaStreamEndCapture_ptsz, cudaStreamEndCapture)

#endif
