#pragma once
// The float32 scratch a cross_entropy launch takes (its rows' losses, then a
// ticket counter that must be 0 at launch), and a grid-split norm launch (its
// CTAs' partials, then the grid barrier's counter: Note [Split norm rows over
// a cooperative grid] in kernels/norm/rms_norm.cu), kept per
// (device, stream) so that a served call neither allocates it nor launches a
// fill kernel to zero the counter (Note [A persistent workspace per stream]).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace hotkernel {

// Note [A persistent workspace per stream]
// cross_entropy's mean and sum reductions, with more than one CTA group, count
// finished groups on a counter after the rows' losses in the workspace; the
// last group reduces and sets the counter back to 0 (Note [Deterministic cross
// entropy reduction] in kernels/cross_entropy/cross_entropy.cu; the harness
// fails a candidate that leaves it non-zero). A fresh workspace from the
// allocator holds garbage, so every call used to zero the counter first: one
// more kernel launch on the stream, ~2 us of a ~13 us decode call
// ([32, 128256]).
//
// Here one buffer per (device, stream) is zeroed once and reused: launches on
// one stream run one after the other, so each finds the counter its
// predecessor left at 0. The counter sits at the buffer's last float whatever
// the row count: a launch for `floats` floats gets the buffer's LAST `floats`
// floats (losses, then the counter), so calls with other row counts share the
// same counter and never see a loss where they expect it. A larger request
// replaces the buffer with a zeroed one of twice the size (at least the
// request, at most kMaxPooledFloats); the old one goes back to the caching
// allocator, which reuses it on the same stream only, after the launches
// already enqueued there.
//
// Not pooled (a fresh buffer whose last float is zeroed on the stream, as
// before):
// - while the current stream captures a CUDA graph: the graph would keep the
//   pooled buffer's address, and its replays (on any stream) would then race
//   with eager calls on the capture stream. The fresh buffer comes from the
//   graph's private pool, and the zeroing becomes a node of the graph;
// - requests above kMaxPooledFloats (more than 64 Ki rows), where the fill is
//   a small part of the call and a pinned buffer would hold memory for good.
// Two host threads on one stream share its buffer; the stream orders their
// launches. A stream destroyed while its work still runs, and a new one given
// the same handle at once, would share a counter with that work: torch's pool
// streams are never destroyed; a user stream would have to be, mid-flight.
class StreamWorkspaces {
 public:
  static constexpr int64_t kMaxPooledFloats = int64_t{1} << 16;

  // The process's pools (leaked on purpose: no destructor runs after the
  // CUDA context is gone at exit).
  static StreamWorkspaces& global();

  // `floats` (> 0) float32 values on `options`' device whose last one is 0
  // when a launch enqueued next on `stream` reads it. `capturing`: the stream
  // captures a graph (then never pooled). Precondition: on CUDA, `stream` is
  // the device's current stream (a new buffer is zeroed there). May throw
  // (allocation).
  at::Tensor acquire(int64_t floats, const at::TensorOptions& options, const void* stream, bool capturing);

  // The same for a launch on the current CUDA stream of `like`'s device (its
  // capture status asked of CUDA), or, for a CPU tensor, keyed by a null stream.
  at::Tensor forLaunchLike(int64_t floats, const at::Tensor& like);
  // forLaunchLike for a caller that already holds that stream (the
  // trampoline, which launches on it next). Precondition: `stream` is the
  // current CUDA stream of `like`'s device (null for a CPU tensor).
  at::Tensor forLaunchOn(int64_t floats, const at::Tensor& like, void* stream);

  // How many (device, stream) buffers are held, and the floats of one of them
  // (0 when none): for tests and logs.
  size_t pooledBuffers() const;
  int64_t capacityOf(const at::TensorOptions& options, const void* stream) const;

 private:
  using Key = std::pair<int64_t, const void*>;  // (device type * 1024 + index, stream)
  static Key keyOf(const at::TensorOptions& options, const void* stream);

  mutable std::mutex mu_;
  std::map<Key, at::Tensor> buffers_;  // Precondition: mu_ held. Each buffer's last float is 0 between launches.
};

}  // namespace hotkernel
