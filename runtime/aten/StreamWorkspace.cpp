#include "hotkernel/runtime/StreamWorkspace.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

StreamWorkspaces& StreamWorkspaces::global() {
  static StreamWorkspaces* pools = new StreamWorkspaces();  // leaked on purpose (see the header)
  return *pools;
}

StreamWorkspaces::Key StreamWorkspaces::keyOf(const at::TensorOptions& options, const void* stream) {
  const c10::Device d = options.device();
  return {static_cast<int64_t>(d.type()) * 1024 + (d.has_index() ? d.index() : 0), stream};
}

at::Tensor StreamWorkspaces::acquire(int64_t floats, const at::TensorOptions& options, const void* stream,
                                     bool capturing) {
  HOTKERNEL_CHECK(floats > 0, "a workspace of ", floats, " floats");
  const at::TensorOptions opts = options.dtype(at::kFloat);
  if (capturing || floats > kMaxPooledFloats) {
    // Note [A persistent workspace per stream]: not pooled.
    at::Tensor work = at::empty({floats}, opts);
    work.narrow(0, floats - 1, 1).zero_();
    return work;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Key key = keyOf(opts, stream);
  auto it = buffers_.find(key);
  if (it == buffers_.end() || it->second.numel() < floats) {
    const int64_t held = it == buffers_.end() ? 0 : it->second.numel();
    const int64_t capacity = std::min(kMaxPooledFloats, std::max<int64_t>({floats, 2 * held, 1024}));
    at::Tensor fresh = at::zeros({capacity}, opts);  // zeroed on `stream` (the precondition), before any use
    // The old buffer, if any, goes back to the caching allocator, stream-ordered.
    it = buffers_.insert_or_assign(key, std::move(fresh)).first;
  }
  const at::Tensor& buffer = it->second;
  return buffer.narrow(0, buffer.numel() - floats, floats);  // ends at the buffer's counter
}

at::Tensor StreamWorkspaces::forLaunchLike(int64_t floats, const at::Tensor& like) {
  // The stream the launch goes to (like's device may not be the current one).
  return forLaunchOn(floats, like,
                     like.is_cuda() ? c10::cuda::getCurrentCUDAStream(like.device().index()).stream() : nullptr);
}

at::Tensor StreamWorkspaces::forLaunchOn(int64_t floats, const at::Tensor& like, void* stream_) {
  if (!like.is_cuda()) return acquire(floats, like.options(), nullptr, false);
  const auto stream = static_cast<cudaStream_t>(stream_);
  // When CUDA cannot say, it is treated as capturing: not pooled.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err != cudaSuccess) (void)cudaGetLastError();  // our failed query must not linger as the thread's last error
  const bool capturing = err != cudaSuccess || status != cudaStreamCaptureStatusNone;
  return acquire(floats, like.options(), stream, capturing);
}

size_t StreamWorkspaces::pooledBuffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buffers_.size();
}

int64_t StreamWorkspaces::capacityOf(const at::TensorOptions& options, const void* stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(keyOf(options.dtype(at::kFloat), stream));
  return it == buffers_.end() ? 0 : it->second.numel();
}

}  // namespace hotkernel
