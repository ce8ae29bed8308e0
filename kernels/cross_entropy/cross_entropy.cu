// cross entropy of class logits against integer labels, one row per sample,
// over a contiguous [rows, cols] tensor of logits and a contiguous [rows]
// int64 labels:
//   loss[r] = logsumexp_c(x[r, c]) - x[r, labels[r]]      (0 where labels[r] == ignoreIndex)
//   reduction none: out[r] = loss[r]                       ([rows], the logits' dtype)
//             sum:  out    = sum_r loss[r]                 (a scalar, the logits' dtype)
//             mean: out    = sum_r loss[r] / #{r : labels[r] != ignoreIndex}
// the semantics of aten::cross_entropy_loss(x, labels, weight=None, reduction,
// ignore_index, label_smoothing=0.0) for 2-D x on CUDA, i.e. of
// nll_loss(log_softmax(x, 1), labels) as ATen computes it (Note [What ATen's
// cross_entropy_loss computes] in kernels/src/CrossEntropyFamily.cpp).
//
// Compiled by NVRTC with the defines below (CrossEntropyFamily::compileOptions).
// Its one include, hk_prelude.cuh (element type, conversions, exp, online
// pairs, cluster helpers: what the family templates share), is expanded in
// place by CrossEntropyFamily::source().
//   HK_DTYPE      0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS    threads per CTA, a power of two in [32, 1024]
//   HK_ROWS       rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC        elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_UNROLL     vectors each thread loads before it uses the first (loads in flight), 1 to 8
//   HK_CLUSTER    (optional, default 1) 2, 4, 8 or 16 (16: non-portable, the launcher opts in):
//                 a thread-block cluster serves each row, each CTA a slice of it (HK_ROWS == 1,
//                 sm_90+): Note [Cross entropy over a cluster]
//   HK_REDUCTION  0 none, 1 mean, 2 sum (at::Reduction's values)
// A row is served by HK_ROW_THREADS = HK_THREADS / HK_ROWS threads.
//
// Entry point:
//   extern "C" __global__ void hk_cross_entropy(const void* logits, const long long* labels, void* out,
//                                               float* work, long long rows, long long cols,
//                                               long long ignoreIndex)
// `work` (reductions sum and mean only; ignored for none) holds `rows` floats,
// the rows' losses, followed by one 32-bit counter that must be 0 at launch
// whenever the grid holds more than one CTA, or clusters (CrossEntropyFamily::
// needsCounter); the kernel leaves it 0 again. With rows == 1 the kernel does
// not touch `work`, which may then be null (Note [One row needs no reduction
// pass]; CrossEntropyFamily::workspaceFloats is 0).
//
// Preconditions (checked on the host by CrossEntropyFamily's guards, not here):
//   cols % HK_VEC == 0; `logits` aligned to HK_VEC * sizeof(element); `labels`
//   aligned to 8, `out` to sizeof(element), `work` to 4; 1 <= cols <= 2^30;
//   1 <= rows <= 2^24 (counts stay exact in float32, like ATen's total_weight).
//
// Note [Cross entropy in one read]
// A thread streams its vectors of the row once, keeping a running (max, sum)
// pair (Note [Online pairs]), rescaled once per batch of HK_UNROLL vectors;
// the pairs merge across the row (then across the cluster) in a fixed order.
// The label's logit is one extra scalar load issued by the row's first
// thread before the stream, so it overlaps it. Then, in fp32 and in ATen's
// order of operations (log_softmax's epilogue, then nll_loss's negation):
//   v = (x[t] - max) - log(sum);  loss = -v, rounded to the logits' dtype.
// Reductions accumulate the ROUNDED per-row losses in fp32 (ATen's nll_loss
// reads log_softmax's 16-bit output) and round the result once.
//
// Note [Cross entropy special values]
// Like ATen: a row holding NaN or +inf, or of only -inf, has a NaN loss; a
// label's logit of -inf (others finite) a loss of +inf; an ignored row's loss
// is 0 whatever its logits hold, and it is left out of sum and mean. Mean over
// rows that are all ignored is 0 / 0 = NaN (ATen's 2-D kernel). A label
// outside [0, cols) that is not ignoreIndex makes ATen's kernel trip a device
// assert (the CUDA context is lost); this kernel writes NaN as that row's loss
// instead (and so a NaN sum or mean): loud, never a plausible number.
//
// Note [Deterministic cross entropy reduction]
// No float atomics: every row's loss goes to work[row] (float32), then one CTA
// sums work[] in a fixed order: thread i adds rows i, i + HK_THREADS, ... in
// order, then an xor butterfly within warps and across the warps' partials.
// That CTA is the last to finish: each CTA, after its last row, takes a
// ticket from the counter at work[rows] with one acquire-release atomic after
// a barrier (no full fences: 0.3 us of a 10.7 us decode call, 1.4 us at
// [4096, 32000] on the H200); the one holding the last ticket reduces, then
// resets the counter. A grid of one CTA (HK_CLUSTER == 1) needs no counter:
// it wrote every loss and reduces after a barrier. The order depends on
// HK_THREADS but not on the grid or on timing: bitwise reproducible. The
// cluster kernel takes a ticket a row instead and its last warp sums (Note
// [Cluster rows take their own tickets]): an order that depends on nothing.

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || !defined(HK_UNROLL) || \
    !defined(HK_REDUCTION)
#error "cross_entropy.cu needs HK_DTYPE, HK_THREADS, HK_ROWS, HK_VEC, HK_UNROLL and HK_REDUCTION"
#endif
#ifndef HK_CLUSTER
#define HK_CLUSTER 1
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_UNROLL >= 1 && HK_UNROLL <= 8, "HK_UNROLL must be in [1, 8]");
// At most a warp's lanes: rank 0's first warp reads one peer's pair per lane.
static_assert(HK_CLUSTER == 1 || ((HK_CLUSTER == 2 || HK_CLUSTER == 4 || HK_CLUSTER == 8 || HK_CLUSTER == 16) &&
                                  HK_ROWS == 1),
              "HK_CLUSTER must be 1, or 2, 4, 8 or 16 with HK_ROWS == 1");
static_assert(HK_REDUCTION == 0 || HK_REDUCTION == 1 || HK_REDUCTION == 2, "HK_REDUCTION must be 0 (none), 1 (mean) or 2 (sum)");

// Plain accesses: no L2 or L1 hints (Note [Streaming L2 hints] in hk_prelude.cuh).
#define HK_STREAM_HINTS 0
#define HK_STREAM_L1_HINTS 0

#include "hk_prelude.cuh"

// The online pair of vectors [begin, end) of `src`, vector begin + k * stride + tid
// to this thread (k = 0, 1, ...): each warp's accesses are contiguous.
// With `gather`, the thread also reads the label's logit row[t] (t valid)
// into `xt`: issued after the first batch's loads, so that waiting for t
// (loaded just before) never delays the stream; `xt` is 0 otherwise.
__device__ __forceinline__ void hk_stream_pair(const hk_elem* row, int begin, int end, int tid, int stride,
                                               bool gather, long long t, long long cols, float& m, float& s,
                                               float& xt) {
  const hk_pack* src = reinterpret_cast<const hk_pack*>(row);
  hk_elem xraw = hk_from_float(0.0f);
  m = hk_neg_inf();
  s = 0.0f;
  for (int v0 = begin + tid; v0 < end; v0 += stride * HK_UNROLL) {
    hk_pack p[HK_UNROLL];
#pragma unroll
    for (int u = 0; u < HK_UNROLL; ++u) {
      const int v = v0 + u * stride;
      if (v < end) {
        p[u] = src[v];
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_neg_inf_elem();
      }
    }
    if (gather) {
      if (t >= 0 && t < cols) xraw = row[t];
      gather = false;
    }
    hk_pair_fold(m, s, p);
  }
  if (gather && t >= 0 && t < cols) xraw = row[t];  // this thread had no vector of the row
  xt = hk_to_float(xraw);
}

// The row's loss from its merged pair and its label's logit (Note [Cross
// entropy in one read], Note [Cross entropy special values]); `xt` is only
// read for a valid label. Rounded to the logits' dtype, returned as float.
__device__ __forceinline__ float hk_row_loss(long long t, float xt, float m, float s, long long cols,
                                             long long ignoreIndex) {
  if (t == ignoreIndex) return 0.0f;
  if (t < 0 || t >= cols) return hk_nan();
  const float v = (xt - m) - logf(s);
  return hk_to_float(hk_from_float(-v));
}

#if HK_REDUCTION != 0
#if HK_CLUSTER == 1  // the cluster kernel reduces in one warp (hk_finish_row)
__device__ __forceinline__ long long hk_warp_count(long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Note [Deterministic cross entropy reduction]: the whole CTA sums work[0, rows)
// and counts the non-ignored labels; thread 0 writes the result. Loads go
// around L1 (ld.global.cg): other CTAs wrote these values.
__device__ void hk_reduce_losses(const float* work, const long long* labels, void* out_, long long rows,
                                 long long ignoreIndex) {
  __shared__ float hk_redSum[HK_THREADS / 32];
  __shared__ long long hk_redCount[HK_THREADS / 32];
  float acc = 0.0f;
  long long count = 0;
  for (long long r = threadIdx.x; r < rows; r += HK_THREADS) {
    acc += __ldcg(work + r);
    count += __ldcg(labels + r) != ignoreIndex ? 1 : 0;
  }
  acc = hk_warp_sum(acc, 32);
  count = hk_warp_count(count);
  if ((threadIdx.x & 31) == 0) {
    hk_redSum[threadIdx.x >> 5] = acc;
    hk_redCount[threadIdx.x >> 5] = count;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < HK_THREADS / 32 ? hk_redSum[threadIdx.x] : 0.0f;
    count = threadIdx.x < HK_THREADS / 32 ? hk_redCount[threadIdx.x] : 0;
    acc = hk_warp_sum(acc, 32);
    count = hk_warp_count(count);
    if (threadIdx.x == 0) {
#if HK_REDUCTION == 1
      // ATen: output_acc / total_weight_acc in float, 0 / 0 = NaN when every row is ignored.
      acc = __fdiv_rn(acc, static_cast<float>(count));
#endif
      *static_cast<hk_elem*>(out_) = hk_from_float(acc);
    }
  }
}

#endif  // HK_CLUSTER == 1

// Note [One row needs no reduction pass]
// With a single row (decode: [1, 128256]) the thread that holds the row's
// loss writes the reduced result itself: no store to work[], fence, barrier
// and re-read by the reduction pass, which sit on the kernel's critical path.
// It computes what hk_reduce_losses computes from one loss, bit for bit:
// 0 + loss (a -0 loss becomes +0, as in the pass's sum from 0), then for mean
// a division by the count, 1 or (row ignored) 0, so 0 / 0 = NaN.
__device__ __forceinline__ void hk_write_one_row(void* out_, float loss, long long t, long long ignoreIndex) {
  float acc = 0.0f + loss;
#if HK_REDUCTION == 1
  acc = __fdiv_rn(acc, t != ignoreIndex ? 1.0f : 0.0f);
#endif
  *static_cast<hk_elem*>(out_) = hk_from_float(acc);
}

#if HK_CLUSTER == 1
// After a CTA's last row: the last CTA of the grid to get here reduces (Note
// [Deterministic cross entropy reduction]). `groups`: CTAs in the grid;
// `first`: this is CTA 0.
__device__ void hk_finish(const float* work, const long long* labels, void* out, long long rows,
                          long long ignoreIndex, unsigned groups, bool first) {
  __shared__ bool hk_last;
  if (groups == 1) {
    if (!first) return;
    __threadfence();
    __syncthreads();
    hk_reduce_losses(work, labels, out, rows, ignoreIndex);
    return;
  }
  unsigned* counter = reinterpret_cast<unsigned*>(const_cast<float*>(work) + rows);
  // Ordering without a full fence (membar): the barrier puts this CTA's loss
  // stores before thread 0's ticket, taken with release semantics, so they are
  // visible to whoever acquires a later ticket; the same atomic acquires, so
  // the last CTA's thread 0 sees every other CTA's losses, and the barrier
  // after it extends that to the whole CTA (the release / acquire pattern of
  // a grid barrier).
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned ticket;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(counter) : "memory");
    hk_last = ticket == gridDim.x - 1;
  }
  __syncthreads();
  if (!hk_last) return;
  hk_reduce_losses(work, labels, out, rows, ignoreIndex);
  if (threadIdx.x == 0) *counter = 0u;  // ready for the next launch on this workspace
}
#else  // HK_CLUSTER > 1
// Note [Cluster rows take their own tickets]
// In the cluster kernel only rank 0's first warp writes losses, one a row, so
// the tickets count rows, not CTAs: right after storing row `row`'s loss, the
// lane that stored it takes a ticket (acquire-release: its own store is
// released, the earlier rows' acquired); the warp that takes ticket rows - 1
// sums work[0, rows) itself (lane i: rows i, i + 32, ... in order, then an
// xor butterfly) and resets the counter. No CTA barrier, and no ticket from
// the CTAs that only push a pair (cluster 16 at [32, 128256]: 32 tickets, not
// 512). Row tickets beat a ticket a CTA after a CTA barrier and a warp that
// polls the other rows' slots (docs/design/cross_entropy.md). The counter is
// used whenever rows > 1, also by a grid of one cluster
// (CrossEntropyFamily::needsCounter).
// Call with the whole warp; `loss` is read from lane 0.
__device__ __forceinline__ void hk_finish_row(float* work, const long long* labels, void* out_, long long rows,
                              long long ignoreIndex, long long row, float loss) {
  const int lane = threadIdx.x & 31;
  unsigned* counter = reinterpret_cast<unsigned*>(work + rows);
  unsigned last = 0;
  if (lane == 0) {
    work[row] = loss;
    unsigned ticket;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(counter) : "memory");
    last = ticket == static_cast<unsigned>(rows - 1) ? 1u : 0u;
  }
  last = __shfl_sync(0xffffffffu, last, 0);
  if (!last) return;
  __syncwarp();  // orders lane 0's acquire before the other lanes' loads
  // Lane i adds rows i, i + 32, ... in order; their loads in batches of 8, one
  // round trip a batch (rows beyond a decode batch: many-row grids).
  const int n = static_cast<int>(rows);  // exact: rows <= 2^24 (the guard)
  float acc = 0.0f;
  int count = 0;
  int r = lane;
#pragma unroll 1
  for (; r + 7 * 32 < n; r += 8 * 32) {
    float w[8];
    bool kept[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      w[u] = __ldcg(work + r + 32 * u);
      kept[u] = __ldcg(labels + r + 32 * u) != ignoreIndex;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      acc += w[u];
      count += kept[u] ? 1 : 0;
    }
  }
#pragma unroll 1  // unrolled, ptxas spills some vec-1 points to fit 32 registers
  for (; r < n; r += 32) {
    acc += __ldcg(work + r);
    count += __ldcg(labels + r) != ignoreIndex ? 1 : 0;
  }
  acc = hk_warp_sum(acc, 32);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
  if (lane == 0) {
#if HK_REDUCTION == 1
    acc = __fdiv_rn(acc, static_cast<float>(count));  // as hk_reduce_losses
#endif
    *static_cast<hk_elem*>(out_) = hk_from_float(acc);
    *counter = 0u;  // ready for the next launch on this workspace
  }
}
#endif
#endif

#if HK_CLUSTER == 1
extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_cross_entropy(const void* logits_, const long long* labels, void* out_, float* work, long long rows,
                     long long cols, long long ignoreIndex) {
  __shared__ float hk_buf[2][HK_THREADS / 32];
  const hk_elem* logits = static_cast<const hk_elem*>(logits_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows

  for (long long first = static_cast<long long>(blockIdx.x) * HK_ROWS; first < rows;
       first += static_cast<long long>(gridDim.x) * HK_ROWS) {
    const long long row = first + sub;
    const bool live = row < rows;
    const hk_elem* rowPtr = logits + (live ? row : first) * cols;
    const bool gather = live && tid == 0;  // the row's first thread reads the row's label and its logit
    const long long t = gather ? labels[row] : ignoreIndex;
    float m, s, xt;
    hk_stream_pair(rowPtr, 0, live ? nvec : 0, tid, HK_ROW_THREADS, gather, t, cols, m, s, xt);
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
    if (live && tid == 0) {
      const float loss = hk_row_loss(t, xt, m, s, cols, ignoreIndex);
#if HK_REDUCTION == 0
      static_cast<hk_elem*>(out_)[row] = hk_from_float(loss);
#else
      if (rows == 1) {
        hk_write_one_row(out_, loss, t, ignoreIndex);  // Note [One row needs no reduction pass]
      } else {
        work[row] = loss;
      }
#endif
    }
#if HK_ROW_THREADS > 32
    // The next rows write hk_buf again: wait until every warp has read it.
    if (first + static_cast<long long>(gridDim.x) * HK_ROWS < rows) __syncthreads();
#endif
  }
#if HK_REDUCTION != 0
  if (rows > 1) hk_finish(work, labels, out_, rows, ignoreIndex, gridDim.x, blockIdx.x == 0);
#endif
}
#endif  // HK_CLUSTER == 1

#if HK_CLUSTER > 1
// Note [Cross entropy over a cluster]
// For few rows (decode: [1, 128256] gives one SM a 250 KB row) a thread-block
// cluster serves each row: CTA k streams vectors [k * chunk, (k + 1) * chunk)
// to an online pair and pushes it into rank 0's shared memory (Note [Pushed
// cluster pairs] in hk_prelude.cuh); rank 0's first warp waits for the
// HK_CLUSTER pairs, merges them (flat, in a fixed order) and writes the row's
// loss (its thread 0 read the label's logit; sum and mean: then its ticket,
// Note [Cluster rows take their own tickets]). Only rank 0's shared memory is
// written by peers, and rank 0 exits only after every push has landed. A
// cluster with a next row (never with the launcher's grid: a cluster a row)
// first meets at a cluster barrier, so rank 0 has read the previous pairs.
// Pushes are faster than cluster barriers here (docs/design/cross_entropy.md).
extern "C" __global__ void __cluster_dims__(HK_CLUSTER, 1, 1) __launch_bounds__(HK_THREADS)
    hk_cross_entropy(const void* logits_, const long long* labels, void* out_, float* work, long long rows,
                     long long cols, long long ignoreIndex) {
  __shared__ float hk_buf[2][HK_THREADS / 32];
  __shared__ hk_pushed_pairs hk_pairs;  // rank 0's: the cluster's pairs (Note [Pushed cluster pairs])
  const hk_elem* logits = static_cast<const hk_elem*>(logits_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int chunk = (nvec + HK_CLUSTER - 1) / HK_CLUSTER;
  const unsigned rank = hk_cluster_rank();
  const int begin = min(nvec, static_cast<int>(rank) * chunk);
  const int end = min(nvec, begin + chunk);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  // Clusters are HK_CLUSTER consecutive CTAs; the grid is a multiple of HK_CLUSTER.
  const long long clusters = gridDim.x / HK_CLUSTER;
  hk_pushed_init(hk_pairs);
  int k = 0;  // this CTA's rows so far
  for (long long row = blockIdx.x / HK_CLUSTER; row < rows; row += clusters) {
    // A next row (grids of more rows than clusters only; the launcher gives
    // each row its own cluster): rank 0 has read the previous row's pairs,
    // and every warp hk_buf, before anybody pushes or writes again.
    if (k > 0) {
      hk_cluster_arrive();
      hk_cluster_wait();
    }
    const hk_elem* rowPtr = logits + row * cols;
    const bool gather = rank == 0 && tid == 0;  // rank 0's first thread reads the row's label and its logit
    const long long t = gather ? labels[row] : ignoreIndex;
    float m, s, xt;
    hk_stream_pair(rowPtr, begin, end, tid, HK_THREADS, gather, t, cols, m, s, xt);
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
    if (k == 0) hk_pushed_wait_init();
    if (rank == 0 && tid == 0) hk_pushed_expect(hk_pairs, k);
    if (tid == 0) hk_pushed_push(hk_pairs, m, s, rank, k, 0);
    if (rank == 0 && tid < 32) {
      hk_pushed_wait(hk_pairs, k);
      float pm = hk_neg_inf(), ps = 0.0f;
      if (lane < HK_CLUSTER) {
        pm = hk_pairs.slot[k & 1][lane][0];
        ps = hk_pairs.slot[k & 1][lane][1];
      }
      hk_warp_pair_flat(pm, ps, HK_CLUSTER);  // every lane gets the cluster's pair
      // Lane 0 read the labels and its logit: its loss is the row's.
      const float loss = lane == 0 ? hk_row_loss(t, xt, pm, ps, cols, ignoreIndex) : 0.0f;
#if HK_REDUCTION == 0
      if (lane == 0) static_cast<hk_elem*>(out_)[row] = hk_from_float(loss);
#else
      if (rows == 1) {
        if (lane == 0) hk_write_one_row(out_, loss, t, ignoreIndex);  // Note [One row needs no reduction pass]
      } else {
        hk_finish_row(work, labels, out_, rows, ignoreIndex, row, loss);  // Note [Cluster rows take their own tickets]
      }
#endif
    }
    ++k;
  }
  if (k == 0) hk_pushed_wait_init();  // no row: the arrive of hk_pushed_init still needs its wait
}
#endif  // HK_CLUSTER > 1
