/*
 * The CUDA driver API commands the shim wraps (Note [Flush before foreign
 * commands] in CommandHook.h): one signature per entry point as
 * cuGetProcAddress names it (Note [Opaque command signatures]), and every
 * exported name of each (the _v2 and per-thread default stream _ptsz / _ptds
 * versions that libcuda exports and that the runtime, cuBLAS, cuDNN and NCCL
 * ask cuGetProcAddress for). libc only; included by DriverInterpose.c and
 * the tests' fake libcuda.
 *
 * HK_SIG_<entry point>: its command kind, its parameter count, its types.
 * HK_DRIVER_FAMILIES(X): X(entry point) for each.
 * HK_DRIVER_EXPORTS(Y): Y(exported name, entry point) for each exported name.
 */
#ifndef HOTKERNEL_DRIVER_COMMANDS_H
#define HOTKERNEL_DRIVER_COMMANDS_H

#include "CommandSignature.h"
#include "hotkernel/hotkernel_shim.h"

/* f, grid xyz, block xyz, sharedMemBytes, stream, kernelParams, extra */
#define HK_SIG_cuLaunchKernel HOTKERNEL_COMMAND_LAUNCH, 11, (HkPtr, HkU32, HkU32, HkU32, HkU32, HkU32, HkU32, HkU32, HkPtr, HkPtr, HkPtr)
/* config, f, kernelParams, extra */
#define HK_SIG_cuLaunchKernelEx HOTKERNEL_COMMAND_LAUNCH, 4, (HkPtr, HkPtr, HkPtr, HkPtr)
/* f, grid xyz, block xyz, sharedMemBytes, stream, kernelParams */
#define HK_SIG_cuLaunchCooperativeKernel HOTKERNEL_COMMAND_LAUNCH, 10, (HkPtr, HkU32, HkU32, HkU32, HkU32, HkU32, HkU32, HkU32, HkPtr, HkPtr)
/* launchParamsList, numDevices, flags */
#define HK_SIG_cuLaunchCooperativeKernelMultiDevice HOTKERNEL_COMMAND_LAUNCH, 3, (HkPtr, HkU32, HkU32)
/* f */
#define HK_SIG_cuLaunch HOTKERNEL_COMMAND_LAUNCH, 1, (HkPtr)
/* f, width, height */
#define HK_SIG_cuLaunchGrid HOTKERNEL_COMMAND_LAUNCH, 3, (HkPtr, HkInt, HkInt)
/* f, width, height, stream */
#define HK_SIG_cuLaunchGridAsync HOTKERNEL_COMMAND_LAUNCH, 4, (HkPtr, HkInt, HkInt, HkPtr)
/* stream, fn, userData */
#define HK_SIG_cuLaunchHostFunc HOTKERNEL_COMMAND_HOST_CALLBACK, 3, (HkPtr, HkPtr, HkPtr)
/* stream, callback, userData, flags */
#define HK_SIG_cuStreamAddCallback HOTKERNEL_COMMAND_HOST_CALLBACK, 4, (HkPtr, HkPtr, HkPtr, HkU32)
/* graphExec, stream */
#define HK_SIG_cuGraphLaunch HOTKERNEL_COMMAND_GRAPH_LAUNCH, 2, (HkPtr, HkPtr)
/* dst, src, bytes */
#define HK_SIG_cuMemcpy HOTKERNEL_COMMAND_COPY, 3, (HkU64, HkU64, HkSize)
/* dst, src, bytes, stream */
#define HK_SIG_cuMemcpyAsync HOTKERNEL_COMMAND_COPY, 4, (HkU64, HkU64, HkSize, HkPtr)
/* dst, dstContext, src, srcContext, bytes */
#define HK_SIG_cuMemcpyPeer HOTKERNEL_COMMAND_COPY, 5, (HkU64, HkPtr, HkU64, HkPtr, HkSize)
/* dst, dstContext, src, srcContext, bytes, stream */
#define HK_SIG_cuMemcpyPeerAsync HOTKERNEL_COMMAND_COPY, 6, (HkU64, HkPtr, HkU64, HkPtr, HkSize, HkPtr)
/* dstDevice, srcHost, bytes */
#define HK_SIG_cuMemcpyHtoD HOTKERNEL_COMMAND_COPY, 3, (HkU64, HkPtr, HkSize)
/* dstHost, srcDevice, bytes */
#define HK_SIG_cuMemcpyDtoH HOTKERNEL_COMMAND_COPY, 3, (HkPtr, HkU64, HkSize)
/* dstDevice, srcDevice, bytes */
#define HK_SIG_cuMemcpyDtoD HOTKERNEL_COMMAND_COPY, 3, (HkU64, HkU64, HkSize)
/* dstArray, dstOffset, srcDevice, bytes */
#define HK_SIG_cuMemcpyDtoA HOTKERNEL_COMMAND_COPY, 4, (HkPtr, HkSize, HkU64, HkSize)
/* dstDevice, srcArray, srcOffset, bytes */
#define HK_SIG_cuMemcpyAtoD HOTKERNEL_COMMAND_COPY, 4, (HkU64, HkPtr, HkSize, HkSize)
/* dstArray, dstOffset, srcHost, bytes */
#define HK_SIG_cuMemcpyHtoA HOTKERNEL_COMMAND_COPY, 4, (HkPtr, HkSize, HkPtr, HkSize)
/* dstHost, srcArray, srcOffset, bytes */
#define HK_SIG_cuMemcpyAtoH HOTKERNEL_COMMAND_COPY, 4, (HkPtr, HkPtr, HkSize, HkSize)
/* dstArray, dstOffset, srcArray, srcOffset, bytes */
#define HK_SIG_cuMemcpyAtoA HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkSize, HkPtr, HkSize, HkSize)
/* copy */
#define HK_SIG_cuMemcpy2D HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* copy */
#define HK_SIG_cuMemcpy2DUnaligned HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* copy */
#define HK_SIG_cuMemcpy3D HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* copy */
#define HK_SIG_cuMemcpy3DPeer HOTKERNEL_COMMAND_COPY, 1, (HkPtr)
/* dstDevice, srcHost, bytes, stream */
#define HK_SIG_cuMemcpyHtoDAsync HOTKERNEL_COMMAND_COPY, 4, (HkU64, HkPtr, HkSize, HkPtr)
/* dstHost, srcDevice, bytes, stream */
#define HK_SIG_cuMemcpyDtoHAsync HOTKERNEL_COMMAND_COPY, 4, (HkPtr, HkU64, HkSize, HkPtr)
/* dstDevice, srcDevice, bytes, stream */
#define HK_SIG_cuMemcpyDtoDAsync HOTKERNEL_COMMAND_COPY, 4, (HkU64, HkU64, HkSize, HkPtr)
/* dstArray, dstOffset, srcHost, bytes, stream */
#define HK_SIG_cuMemcpyHtoAAsync HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkSize, HkPtr, HkSize, HkPtr)
/* dstHost, srcArray, srcOffset, bytes, stream */
#define HK_SIG_cuMemcpyAtoHAsync HOTKERNEL_COMMAND_COPY, 5, (HkPtr, HkPtr, HkSize, HkSize, HkPtr)
/* copy, stream */
#define HK_SIG_cuMemcpy2DAsync HOTKERNEL_COMMAND_COPY, 2, (HkPtr, HkPtr)
/* copy, stream */
#define HK_SIG_cuMemcpy3DAsync HOTKERNEL_COMMAND_COPY, 2, (HkPtr, HkPtr)
/* copy, stream */
#define HK_SIG_cuMemcpy3DPeerAsync HOTKERNEL_COMMAND_COPY, 2, (HkPtr, HkPtr)
/* dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx (v1 only; v2 has stream here), stream */
#define HK_SIG_cuMemcpyBatchAsync HOTKERNEL_COMMAND_COPY, 9, (HkPtr, HkPtr, HkPtr, HkSize, HkPtr, HkPtr, HkSize, HkPtr, HkPtr)
/* numOps, opList, failIdx (v1 only), flags, stream */
#define HK_SIG_cuMemcpy3DBatchAsync HOTKERNEL_COMMAND_COPY, 5, (HkSize, HkPtr, HkPtr, HkU64, HkPtr)
/* dstDevice, value, count */
#define HK_SIG_cuMemsetD8 HOTKERNEL_COMMAND_SET, 3, (HkU64, HkU32, HkSize)
/* dstDevice, value, count */
#define HK_SIG_cuMemsetD16 HOTKERNEL_COMMAND_SET, 3, (HkU64, HkU32, HkSize)
/* dstDevice, value, count */
#define HK_SIG_cuMemsetD32 HOTKERNEL_COMMAND_SET, 3, (HkU64, HkU32, HkSize)
/* dstDevice, dstPitch, value, width, height */
#define HK_SIG_cuMemsetD2D8 HOTKERNEL_COMMAND_SET, 5, (HkU64, HkSize, HkU32, HkSize, HkSize)
/* dstDevice, dstPitch, value, width, height */
#define HK_SIG_cuMemsetD2D16 HOTKERNEL_COMMAND_SET, 5, (HkU64, HkSize, HkU32, HkSize, HkSize)
/* dstDevice, dstPitch, value, width, height */
#define HK_SIG_cuMemsetD2D32 HOTKERNEL_COMMAND_SET, 5, (HkU64, HkSize, HkU32, HkSize, HkSize)
/* dstDevice, value, count, stream */
#define HK_SIG_cuMemsetD8Async HOTKERNEL_COMMAND_SET, 4, (HkU64, HkU32, HkSize, HkPtr)
/* dstDevice, value, count, stream */
#define HK_SIG_cuMemsetD16Async HOTKERNEL_COMMAND_SET, 4, (HkU64, HkU32, HkSize, HkPtr)
/* dstDevice, value, count, stream */
#define HK_SIG_cuMemsetD32Async HOTKERNEL_COMMAND_SET, 4, (HkU64, HkU32, HkSize, HkPtr)
/* dstDevice, dstPitch, value, width, height, stream */
#define HK_SIG_cuMemsetD2D8Async HOTKERNEL_COMMAND_SET, 6, (HkU64, HkSize, HkU32, HkSize, HkSize, HkPtr)
/* dstDevice, dstPitch, value, width, height, stream */
#define HK_SIG_cuMemsetD2D16Async HOTKERNEL_COMMAND_SET, 6, (HkU64, HkSize, HkU32, HkSize, HkSize, HkPtr)
/* dstDevice, dstPitch, value, width, height, stream */
#define HK_SIG_cuMemsetD2D32Async HOTKERNEL_COMMAND_SET, 6, (HkU64, HkSize, HkU32, HkSize, HkSize, HkPtr)
/* event, stream */
#define HK_SIG_cuEventRecord HOTKERNEL_COMMAND_EVENT_RECORD, 2, (HkPtr, HkPtr)
/* event, stream, flags */
#define HK_SIG_cuEventRecordWithFlags HOTKERNEL_COMMAND_EVENT_RECORD, 3, (HkPtr, HkPtr, HkU32)
/* stream, event, flags */
#define HK_SIG_cuStreamWaitEvent HOTKERNEL_COMMAND_STREAM_WAIT, 3, (HkPtr, HkPtr, HkU32)
/* stream */
#define HK_SIG_cuStreamSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 1, (HkPtr)
/* context (v2 only) */
#define HK_SIG_cuCtxSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 1, (HkPtr)
/* event */
#define HK_SIG_cuEventSynchronize HOTKERNEL_COMMAND_SYNCHRONIZE, 1, (HkPtr)
/* stream */
#define HK_SIG_cuStreamQuery HOTKERNEL_COMMAND_QUERY, 1, (HkPtr)
/* stream, address, value, flags */
#define HK_SIG_cuStreamWaitValue32 HOTKERNEL_COMMAND_STREAM_MEMORY_OP, 4, (HkPtr, HkU64, HkU32, HkU32)
/* stream, address, value, flags */
#define HK_SIG_cuStreamWaitValue64 HOTKERNEL_COMMAND_STREAM_MEMORY_OP, 4, (HkPtr, HkU64, HkU64, HkU32)
/* stream, address, value, flags */
#define HK_SIG_cuStreamWriteValue32 HOTKERNEL_COMMAND_STREAM_MEMORY_OP, 4, (HkPtr, HkU64, HkU32, HkU32)
/* stream, address, value, flags */
#define HK_SIG_cuStreamWriteValue64 HOTKERNEL_COMMAND_STREAM_MEMORY_OP, 4, (HkPtr, HkU64, HkU64, HkU32)
/* stream, count, paramArray, flags */
#define HK_SIG_cuStreamBatchMemOp HOTKERNEL_COMMAND_STREAM_MEMORY_OP, 4, (HkPtr, HkU32, HkPtr, HkU32)
/* stream, mode (v2) */
#define HK_SIG_cuStreamBeginCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkU32)
/* stream, graph, dependencies, dependencyData, numDependencies, mode */
#define HK_SIG_cuStreamBeginCaptureToGraph HOTKERNEL_COMMAND_CAPTURE, 6, (HkPtr, HkPtr, HkPtr, HkPtr, HkSize, HkU32)
/* stream, graph out */
#define HK_SIG_cuStreamEndCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkPtr)

#define HK_DRIVER_FAMILIES(X) \
  X(cuLaunchKernel) \
  X(cuLaunchKernelEx) \
  X(cuLaunchCooperativeKernel) \
  X(cuLaunchCooperativeKernelMultiDevice) \
  X(cuLaunch) \
  X(cuLaunchGrid) \
  X(cuLaunchGridAsync) \
  X(cuLaunchHostFunc) \
  X(cuStreamAddCallback) \
  X(cuGraphLaunch) \
  X(cuMemcpy) \
  X(cuMemcpyAsync) \
  X(cuMemcpyPeer) \
  X(cuMemcpyPeerAsync) \
  X(cuMemcpyHtoD) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyDtoD) \
  X(cuMemcpyDtoA) \
  X(cuMemcpyAtoD) \
  X(cuMemcpyHtoA) \
  X(cuMemcpyAtoH) \
  X(cuMemcpyAtoA) \
  X(cuMemcpy2D) \
  X(cuMemcpy2DUnaligned) \
  X(cuMemcpy3D) \
  X(cuMemcpy3DPeer) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemcpyHtoAAsync) \
  X(cuMemcpyAtoHAsync) \
  X(cuMemcpy2DAsync) \
  X(cuMemcpy3DAsync) \
  X(cuMemcpy3DPeerAsync) \
  X(cuMemcpyBatchAsync) \
  X(cuMemcpy3DBatchAsync) \
  X(cuMemsetD8) \
  X(cuMemsetD16) \
  X(cuMemsetD32) \
  X(cuMemsetD2D8) \
  X(cuMemsetD2D16) \
  X(cuMemsetD2D32) \
  X(cuMemsetD8Async) \
  X(cuMemsetD16Async) \
  X(cuMemsetD32Async) \
  X(cuMemsetD2D8Async) \
  X(cuMemsetD2D16Async) \
  X(cuMemsetD2D32Async) \
  X(cuEventRecord) \
  X(cuEventRecordWithFlags) \
  X(cuStreamWaitEvent) \
  X(cuStreamSynchronize) \
  X(cuCtxSynchronize) \
  X(cuEventSynchronize) \
  X(cuStreamQuery) \
  X(cuStreamWaitValue32) \
  X(cuStreamWaitValue64) \
  X(cuStreamWriteValue32) \
  X(cuStreamWriteValue64) \
  X(cuStreamBatchMemOp) \
  X(cuStreamBeginCapture) \
  X(cuStreamBeginCaptureToGraph) \
  X(cuStreamEndCapture)

#define HK_DRIVER_EXPORTS(Y) \
  Y(cuLaunchKernel, cuLaunchKernel) Y(cuLaunchKernel_ptsz, cuLaunchKernel) \
  Y(cuLaunchKernelEx, cuLaunchKernelEx) Y(cuLaunchKernelEx_ptsz, cuLaunchKernelEx) \
  Y(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel) Y(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel) \
  Y(cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice) \
  Y(cuLaunch, cuLaunch) \
  Y(cuLaunchGrid, cuLaunchGrid) \
  Y(cuLaunchGridAsync, cuLaunchGridAsync) \
  Y(cuLaunchHostFunc, cuLaunchHostFunc) Y(cuLaunchHostFunc_ptsz, cuLaunchHostFunc) \
  Y(cuStreamAddCallback, cuStreamAddCallback) Y(cuStreamAddCallback_ptsz, cuStreamAddCallback) \
  Y(cuGraphLaunch, cuGraphLaunch) Y(cuGraphLaunch_ptsz, cuGraphLaunch) \
  Y(cuMemcpy, cuMemcpy) Y(cuMemcpy_ptds, cuMemcpy) \
  Y(cuMemcpyAsync, cuMemcpyAsync) Y(cuMemcpyAsync_ptsz, cuMemcpyAsync) \
  Y(cuMemcpyPeer, cuMemcpyPeer) Y(cuMemcpyPeer_ptds, cuMemcpyPeer) \
  Y(cuMemcpyPeerAsync, cuMemcpyPeerAsync) Y(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync) \
  Y(cuMemcpyHtoD, cuMemcpyHtoD) Y(cuMemcpyHtoD_v2, cuMemcpyHtoD) Y(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD) \
  Y(cuMemcpyDtoH, cuMemcpyDtoH) Y(cuMemcpyDtoH_v2, cuMemcpyDtoH) Y(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH) \
  Y(cuMemcpyDtoD, cuMemcpyDtoD) Y(cuMemcpyDtoD_v2, cuMemcpyDtoD) Y(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD) \
  Y(cuMemcpyDtoA, cuMemcpyDtoA) Y(cuMemcpyDtoA_v2, cuMemcpyDtoA) Y(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA) \
  Y(cuMemcpyAtoD, cuMemcpyAtoD) Y(cuMemcpyAtoD_v2, cuMemcpyAtoD) Y(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD) \
  Y(cuMemcpyHtoA, cuMemcpyHtoA) Y(cuMemcpyHtoA_v2, cuMemcpyHtoA) Y(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA) \
  Y(cuMemcpyAtoH, cuMemcpyAtoH) Y(cuMemcpyAtoH_v2, cuMemcpyAtoH) Y(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH) \
  Y(cuMemcpyAtoA, cuMemcpyAtoA) Y(cuMemcpyAtoA_v2, cuMemcpyAtoA) Y(cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA) \
  Y(cuMemcpy2D, cuMemcpy2D) Y(cuMemcpy2D_v2, cuMemcpy2D) Y(cuMemcpy2D_v2_ptds, cuMemcpy2D) \
  Y(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned) Y(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned) Y(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned) \
  Y(cuMemcpy3D, cuMemcpy3D) Y(cuMemcpy3D_v2, cuMemcpy3D) Y(cuMemcpy3D_v2_ptds, cuMemcpy3D) \
  Y(cuMemcpy3DPeer, cuMemcpy3DPeer) Y(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer) \
  Y(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync) Y(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync) Y(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync) \
  Y(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync) Y(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync) Y(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync) \
  Y(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync) Y(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync) Y(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync) \
  Y(cuMemcpyHtoAAsync, cuMemcpyHtoAAsync) Y(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync) Y(cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync) \
  Y(cuMemcpyAtoHAsync, cuMemcpyAtoHAsync) Y(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync) Y(cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync) \
  Y(cuMemcpy2DAsync, cuMemcpy2DAsync) Y(cuMemcpy2DAsync_v2, cuMemcpy2DAsync) Y(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync) \
  Y(cuMemcpy3DAsync, cuMemcpy3DAsync) Y(cuMemcpy3DAsync_v2, cuMemcpy3DAsync) Y(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync) \
  Y(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync) Y(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync) \
  Y(cuMemcpyBatchAsync, cuMemcpyBatchAsync) Y(cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync) Y(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync) Y(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync) \
  Y(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync) Y(cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync) Y(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync) Y(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync) \
  Y(cuMemsetD8, cuMemsetD8) Y(cuMemsetD8_v2, cuMemsetD8) Y(cuMemsetD8_v2_ptds, cuMemsetD8) \
  Y(cuMemsetD16, cuMemsetD16) Y(cuMemsetD16_v2, cuMemsetD16) Y(cuMemsetD16_v2_ptds, cuMemsetD16) \
  Y(cuMemsetD32, cuMemsetD32) Y(cuMemsetD32_v2, cuMemsetD32) Y(cuMemsetD32_v2_ptds, cuMemsetD32) \
  Y(cuMemsetD2D8, cuMemsetD2D8) Y(cuMemsetD2D8_v2, cuMemsetD2D8) Y(cuMemsetD2D8_v2_ptds, cuMemsetD2D8) \
  Y(cuMemsetD2D16, cuMemsetD2D16) Y(cuMemsetD2D16_v2, cuMemsetD2D16) Y(cuMemsetD2D16_v2_ptds, cuMemsetD2D16) \
  Y(cuMemsetD2D32, cuMemsetD2D32) Y(cuMemsetD2D32_v2, cuMemsetD2D32) Y(cuMemsetD2D32_v2_ptds, cuMemsetD2D32) \
  Y(cuMemsetD8Async, cuMemsetD8Async) Y(cuMemsetD8Async_ptsz, cuMemsetD8Async) \
  Y(cuMemsetD16Async, cuMemsetD16Async) Y(cuMemsetD16Async_ptsz, cuMemsetD16Async) \
  Y(cuMemsetD32Async, cuMemsetD32Async) Y(cuMemsetD32Async_ptsz, cuMemsetD32Async) \
  Y(cuMemsetD2D8Async, cuMemsetD2D8Async) Y(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async) \
  Y(cuMemsetD2D16Async, cuMemsetD2D16Async) Y(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async) \
  Y(cuMemsetD2D32Async, cuMemsetD2D32Async) Y(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async) \
  Y(cuEventRecord, cuEventRecord) Y(cuEventRecord_ptsz, cuEventRecord) \
  Y(cuEventRecordWithFlags, cuEventRecordWithFlags) Y(cuEventRecordWithFlags_ptsz, cuEventRecordWithFlags) \
  Y(cuStreamWaitEvent, cuStreamWaitEvent) Y(cuStreamWaitEvent_ptsz, cuStreamWaitEvent) \
  Y(cuStreamSynchronize, cuStreamSynchronize) Y(cuStreamSynchronize_ptsz, cuStreamSynchronize) \
  Y(cuCtxSynchronize, cuCtxSynchronize) Y(cuCtxSynchronize_v2, cuCtxSynchronize) \
  Y(cuEventSynchronize, cuEventSynchronize) \
  Y(cuStreamQuery, cuStreamQuery) Y(cuStreamQuery_ptsz, cuStreamQuery) \
  Y(cuStreamWaitValue32, cuStreamWaitValue32) Y(cuStreamWaitValue32_ptsz, cuStreamWaitValue32) Y(cuStreamWaitValue32_v2, cuStreamWaitValue32) Y(cuStreamWaitValue32_v2_ptsz, cuStreamWaitValue32) \
  Y(cuStreamWaitValue64, cuStreamWaitValue64) Y(cuStreamWaitValue64_ptsz, cuStreamWaitValue64) Y(cuStreamWaitValue64_v2, cuStreamWaitValue64) Y(cuStreamWaitValue64_v2_ptsz, cuStreamWaitValue64) \
  Y(cuStreamWriteValue32, cuStreamWriteValue32) Y(cuStreamWriteValue32_ptsz, cuStreamWriteValue32) Y(cuStreamWriteValue32_v2, cuStreamWriteValue32) Y(cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32) \
  Y(cuStreamWriteValue64, cuStreamWriteValue64) Y(cuStreamWriteValue64_ptsz, cuStreamWriteValue64) Y(cuStreamWriteValue64_v2, cuStreamWriteValue64) Y(cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue64) \
  Y(cuStreamBatchMemOp, cuStreamBatchMemOp) Y(cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp) Y(cuStreamBatchMemOp_v2, cuStreamBatchMemOp) Y(cuStreamBatchMemOp_v2_ptsz, cuStreamBatchMemOp) \
  Y(cuStreamBeginCapture, cuStreamBeginCapture) Y(cuStreamBeginCapture_ptsz, cuStreamBeginCapture) Y(cuStreamBeginCapture_v2, cuStreamBeginCapture) Y(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture) \
  Y(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph) Y(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph) \
  Y(cuStreamEndCapture, cuStreamEndCapture) Y(cuStreamEndCapture_ptsz, cuStreamEndCapture)

#endif
