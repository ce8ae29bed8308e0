// What the kernel family templates share: the element type and its
// conversions, vector accesses, warp and row reductions, online (max, sum)
// pairs and the thread-block cluster helpers.
//
// Not a header NVRTC reads: a family's source() (kernels::expandPrelude)
// puts this text in place of the template's one include line (of this file),
// so every program NVRTC compiles, and every source an external agent gets,
// is one self-contained text. Embedded like the templates, so its hash is
// part of the cache's fingerprint: editing it invalidates every cached kernel.
//
// The template defines (or NVRTC's options give) before the include:
//   HK_DTYPE          0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_VEC            elements per vector access
//   HK_STREAM_HINTS   1: hk_load / hk_store with L2 eviction hints (16-byte vectors only); 0: plain
//   HK_STREAM_L1_HINTS  1: the streaming accesses with L1 hints too (Note [Streaming L1 hints]); 0: not
// and optionally:
//   HK_ROW_THREADS, HK_ROW_WARPS  threads / warps serving one row: the row reductions
//   HK_CLUSTER        > 1: the thread-block cluster helpers (sm_90+)

#if !defined(HK_DTYPE) || !defined(HK_VEC) || !defined(HK_STREAM_HINTS) || !defined(HK_STREAM_L1_HINTS)
#error "hk_prelude.cuh needs HK_DTYPE, HK_VEC, HK_STREAM_HINTS and HK_STREAM_L1_HINTS"
#endif

#if HK_DTYPE == 0
typedef float hk_elem;
#define HK_ELEM_BYTES 4
#elif HK_DTYPE == 1 || HK_DTYPE == 2
typedef unsigned short hk_elem;  // the bits of a float16 / bfloat16
#define HK_ELEM_BYTES 2
#else
#error "HK_DTYPE must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif
#define HK_PACK_BYTES (HK_VEC * HK_ELEM_BYTES)

static_assert(HK_VEC >= 1 && (HK_VEC & (HK_VEC - 1)) == 0 && HK_PACK_BYTES <= 16,
              "HK_VEC must be a power of two of at most 16 bytes");

// One vector access: HK_VEC elements, aligned to its size so that the compiler
// emits a single ld/st.global.v4.u32 (16 bytes), .v2 (8) or scalar access.
struct alignas(HK_PACK_BYTES) hk_pack {
  hk_elem v[HK_VEC];
};

// Note [Streaming L2 hints]
// A streaming kernel reads each row twice and relies on the second read
// hitting L2. Its first read asks L2 to keep the lines (evict_last), its
// second read and its stores to drop them first (evict_first), so the output
// stream does not push out rows still to be re-read. Measured on H200 (softmax
// bf16 [8192, 128256], 512 threads, vec 8): 1644 -> 1511 us; neutral to +12% on
// the other 16-byte streaming points; but slower with narrower accesses and in
// the register-resident variant, which therefore use plain accesses.
#if HK_STREAM_HINTS
static_assert(HK_PACK_BYTES == 16, "L2 hints take 16-byte vectors");
__device__ __forceinline__ unsigned long long hk_policy_evict_last() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ unsigned long long hk_policy_evict_first() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// A 16-byte load with an L2 policy, and `l1` (an L1 eviction qualifier, or "").
#define HK_DEFINE_HINTED_LOAD(name, l1)                                              \
  __device__ __forceinline__ hk_pack name(const hk_pack* a, unsigned long long policy) { \
    hk_pack p;                                                                       \
    unsigned int* r = reinterpret_cast<unsigned int*>(&p);                           \
    asm("ld.global" l1 ".L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"             \
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                             \
        : "l"(a), "l"(policy));                                                      \
    return p;                                                                        \
  }
HK_DEFINE_HINTED_LOAD(hk_load, "")
__device__ __forceinline__ void hk_store(hk_pack* a, const hk_pack& p, unsigned long long policy) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(&p);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(a), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3]), "l"(policy)
               : "memory");
}
#else
__device__ __forceinline__ unsigned long long hk_policy_evict_last() { return 0; }
__device__ __forceinline__ unsigned long long hk_policy_evict_first() { return 0; }
__device__ __forceinline__ hk_pack hk_load(const hk_pack* a, unsigned long long) { return *a; }
__device__ __forceinline__ void hk_store(hk_pack* a, const hk_pack& p, unsigned long long) { *a = p; }
#endif

// Note [Streaming L1 hints]
// A streaming kernel's accesses: hk_load_first for the first read of a row it
// reads again (policy: hk_policy_evict_last), hk_load_again for that re-read
// and hk_store_stream for its output (policy: hk_policy_evict_first). With
// HK_STREAM_L1_HINTS the loads also tell L1 to keep the first read
// (L1::evict_last) and to drop the re-read (L1::evict_first), and the stores
// go without an L2 hint: torch.compile's accesses for rms_norm, which let the
// re-read of a CTA's row hit L1 instead of L2. Not for split softmax
// streaming, whose output must stay out of the L2 its rows are re-read from
// (evict_first stores). Without HK_STREAM_L1_HINTS these are hk_load / hk_store
// (Note [Streaming L2 hints]); without HK_STREAM_HINTS, plain accesses.
#if HK_STREAM_HINTS && HK_STREAM_L1_HINTS
HK_DEFINE_HINTED_LOAD(hk_load_first, ".L1::evict_last")
HK_DEFINE_HINTED_LOAD(hk_load_again, ".L1::evict_first")
__device__ __forceinline__ void hk_store_stream(hk_pack* a, const hk_pack& p, unsigned long long) { *a = p; }
#else
__device__ __forceinline__ hk_pack hk_load_first(const hk_pack* a, unsigned long long policy) {
  return hk_load(a, policy);
}
__device__ __forceinline__ hk_pack hk_load_again(const hk_pack* a, unsigned long long policy) {
  return hk_load(a, policy);
}
__device__ __forceinline__ void hk_store_stream(hk_pack* a, const hk_pack& p, unsigned long long policy) {
  hk_store(a, p, policy);
}
#endif

__device__ __forceinline__ float hk_neg_inf() { return __int_as_float(0xff800000); }
// -inf in the element type, as a constant (no conversion instruction).
__device__ __forceinline__ hk_elem hk_neg_inf_elem() {
#if HK_DTYPE == 0
  return hk_neg_inf();
#elif HK_DTYPE == 1
  return 0xfc00;
#else
  return 0xff80;
#endif
}
__device__ __forceinline__ float hk_nan() { return __int_as_float(0x7fffffff); }

__device__ __forceinline__ float hk_to_float(hk_elem x) {
#if HK_DTYPE == 0
  return x;
#elif HK_DTYPE == 1
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
#else
  return __uint_as_float(static_cast<unsigned int>(x) << 16);
#endif
}

// A vector's elements as floats. bfloat16 straight from the 32-bit words (the
// low element shifted up, the high one masked: one instruction each), not an
// extraction and a shift per element.
__device__ __forceinline__ void hk_unpack(const hk_pack& p, float (&f)[HK_VEC]) {
#if HK_DTYPE == 2 && HK_PACK_BYTES >= 4
  const unsigned* w = reinterpret_cast<const unsigned*>(&p);
#pragma unroll
  for (int k = 0; k < HK_VEC / 2; ++k) {
    f[2 * k] = __uint_as_float(w[k] << 16);
    f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
#else
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) f[j] = hk_to_float(p.v[j]);
#endif
}

__device__ __forceinline__ hk_elem hk_from_float(float f) {
#if HK_DTYPE == 0
  return f;
#elif HK_DTYPE == 1
  hk_elem h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  // sm_80+: one cvt, round to nearest even, NaN to the canonical NaN.
  // Measured on H200 side by side against the integer round-to-nearest-even
  // it replaced (softmax bf16, every point): 12-17% faster where the kernel
  // is close to the roofline ([4096, 32000] 193 -> 168 us, [8192, 128256]
  // streaming 1672 -> 1434 us): the conversion was the issue bottleneck.
  hk_elem h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}

// An element as ATen's warp shuffles pass it between lanes: float32 and
// float16 by their bits, bfloat16 through float (every value and a zero's
// sign kept; a NaN becomes cvt.rn.bf16.f32's canonical NaN, 0x7FFF).
// max.dim / min.dim's values (Note [Value and index pairs] in ReduceFamily.cpp).
__device__ __forceinline__ hk_elem hk_through_float(hk_elem x) {
#if HK_DTYPE == 2
  return hk_from_float(hk_to_float(x));
#else
  return x;
#endif
}

#if HK_DTYPE != 0
// Two floats to two 16-bit elements, packed in one 32-bit word (`lo` the
// lower half, the element at the lower address), by one cvt.rn.{bf16x2,
// f16x2}.f32 (sm_80+): half the conversions of two hk_from_float, the same
// rounding (to nearest even, NaN to the canonical NaN).
__device__ __forceinline__ unsigned hk_from_float2(float lo, float hi) {
  unsigned r;
#if HK_DTYPE == 2
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}
#endif

// Note [Family exp]
// float32 uses expf, the function ATen's std::exp compiles to (about 2 ulp,
// with the range reduction split in two fmas), so each term matches ATen's
// bit for bit and only the summation order differs. The 16-bit types use
// 2^(d * log2(e)) by one ex2.approx.ftz (MUFU.EX2, max relative error
// 2^-22): one rounding of the product (relative error below |d| * 2^-24) and
// the approximation are invisible after rounding to 8 or 11 mantissa bits.
// .ftz flushes results below 2^-126 to 0 (|error| < 1.2e-38, far below every
// tolerance); without it ptxas wraps each MUFU in a denormal fix-up (a
// compare, two multiplies and a select), and the kernels close to the memory
// roofline are issue-bound (Note [Lean softmax] in softmax_lastdim.cu).
// Measured before: exp2f instead of expf, softmax bf16 [4096, 32000] 203 -> 191 us.
#define HK_LOG2E 1.4426950408889634f
__device__ __forceinline__ float hk_ex2(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

__device__ __forceinline__ float hk_exp(float d) {
#if HK_DTYPE == 0
  return expf(d);
#else
  return hk_ex2(d * HK_LOG2E);
#endif
}

#if HK_DTYPE != 0
// Note [Packed maximum]
// The largest of a 16-bit vector's elements without converting each one: a
// max.{bf16,f16}x2 (sm_80+) per 32-bit word of the vector, one word kept as
// the running pair, converted once (hk_pair_max). Like fmaxf, a NaN operand
// yields the other one (the softmax row max ignores NaN; the sum then
// propagates it: Note [Softmax special values match ATen]).
#if HK_DTYPE == 2
#define HK_NEG_INF2 0xff80ff80u
#else
#define HK_NEG_INF2 0xfc00fc00u
#endif
__device__ __forceinline__ unsigned hk_max2(unsigned a, unsigned b) {
  unsigned r;
#if HK_DTYPE == 2
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
#else
  asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
#endif
  return r;
}
#if HK_PACK_BYTES >= 4
__device__ __forceinline__ unsigned hk_pack_max2(unsigned acc, const hk_pack& p) {
  const unsigned* w = reinterpret_cast<const unsigned*>(&p);
#pragma unroll
  for (int k = 0; k < HK_PACK_BYTES / 4; ++k) acc = hk_max2(acc, w[k]);
  return acc;
}
#endif
__device__ __forceinline__ float hk_pair_max(unsigned acc) {
  return fmaxf(hk_to_float(static_cast<hk_elem>(acc & 0xffffu)), hk_to_float(static_cast<hk_elem>(acc >> 16)));
}
#endif

// Xor butterflies over `width` lanes (a power of two <= 32): every lane of an
// aligned group of `width` lanes gets the same bits.
__device__ __forceinline__ float hk_warp_max(float v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float hk_warp_sum(float v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Note [Online pairs]
// A pair (m, s) stands for s * exp(-m) summed over its elements: m the largest
// element seen, s = sum exp(x - m). While m is -inf (nothing but -inf seen) the
// pair is rescaled against 0 instead, so that s stays 0 rather than
// exp(-inf - -inf) = NaN; a row that is -inf throughout still ends as NaN in
// the output pass, like ATen. The merge is commutative bit for bit (no fma
// contraction: __fmul_rn / __fadd_rn), so a butterfly gives every lane the
// same bits (Note [Deterministic reductions] in softmax_lastdim.cu).
__device__ __forceinline__ float hk_pair_base(float m) { return m == hk_neg_inf() ? 0.0f : m; }

__device__ __forceinline__ void hk_pair_merge(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  const float base = hk_pair_base(nm);
  s = __fadd_rn(__fmul_rn(s, hk_exp(m - base)), __fmul_rn(os, hk_exp(om - base)));
  m = nm;
}

// Folds a batch of N vectors (masked slots hold -inf) into the running pair
// (m, s): the batch's maximum first (Note [Packed maximum] for 16-bit data),
// s rescaled once to it, then each element's term. The streaming kernels'
// inner step (softmax's first pass, cross_entropy's one pass).
template <int N>
__device__ __forceinline__ void hk_pair_fold(float& m, float& s, const hk_pack (&p)[N]) {
#if HK_DTYPE != 0 && HK_PACK_BYTES >= 4
  unsigned bm2 = HK_NEG_INF2;
#pragma unroll
  for (int u = 0; u < N; ++u) bm2 = hk_pack_max2(bm2, p[u]);
  const float bm = fmaxf(m, hk_pair_max(bm2));
#else
  float bm = m;
#pragma unroll
  for (int u = 0; u < N; ++u) {
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) bm = fmaxf(bm, hk_to_float(p[u].v[j]));
  }
#endif
  const float base = hk_pair_base(bm);
  s *= hk_exp(m - base);
#pragma unroll
  for (int u = 0; u < N; ++u) {
    float f[HK_VEC];
    hk_unpack(p[u], f);
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) s += hk_exp(f[j] - base);
  }
  m = bm;
}

// Note [Flat pair merge]
// The merge of the pairs held by each aligned group of `width` lanes, in two
// flat steps instead of log2(width) dependent pair merges: the group's
// maximum M by a max butterfly, then sum s * exp(m - M) by a sum butterfly
// (one exponential a lane, none on the butterfly's chain). Every lane of a
// group gets the same bits (both butterflies are; Note [Deterministic
// reductions] in softmax_lastdim.cu). The special values behave as in
// hk_pair_merge: (-inf, 0) pairs add 0, and a group of only -inf keeps
// s = 0. Used by the row reductions (hk_row_pair) and where a cluster's pairs
// meet (Note [Split rows over a cluster]): there the merge sits between the
// last load and the first store, on the critical path of a decode row, and
// the flat form shortens that path.
__device__ __forceinline__ void hk_warp_pair_flat(float& m, float& s, int width) {
  const float top = hk_warp_max(m, width);
  s = hk_warp_sum(s * hk_exp(m - hk_pair_base(top)), width);
  m = top;
}

#if defined(HK_ROW_THREADS) && defined(HK_ROW_WARPS)
// Row-wide max / sum / pair; every thread of the row gets the result. When a
// row spans warps, `buf` (and `bufM`, `bufS`) hold one float per warp and must
// not be reused before the next __syncthreads(). When rows are within a warp,
// the butterfly of width HK_ROW_THREADS stays inside each row's aligned group
// of lanes.
__device__ __forceinline__ float hk_row_max(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  return hk_warp_max(v, HK_ROW_THREADS);
#else
  v = hk_warp_max(v, 32);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return hk_warp_max(buf[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

__device__ __forceinline__ float hk_row_sum(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  return hk_warp_sum(v, HK_ROW_THREADS);
#else
  v = hk_warp_sum(v, 32);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return hk_warp_sum(buf[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

__device__ __forceinline__ void hk_row_pair(float& m, float& s, float* bufM, float* bufS) {
#if HK_ROW_THREADS <= 32
  hk_warp_pair_flat(m, s, HK_ROW_THREADS);
#else
  hk_warp_pair_flat(m, s, 32);
  if ((threadIdx.x & 31) == 0) {
    bufM[threadIdx.x >> 5] = m;
    bufS[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  m = bufM[threadIdx.x & (HK_ROW_WARPS - 1)];
  s = bufS[threadIdx.x & (HK_ROW_WARPS - 1)];
  hk_warp_pair_flat(m, s, HK_ROW_WARPS);
#endif
}
#endif  // HK_ROW_THREADS

#if defined(HK_CLUSTER) && HK_CLUSTER > 1
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "HK_CLUSTER > 1 needs sm_90 or later (thread-block clusters)"
#endif
__device__ __forceinline__ unsigned hk_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void hk_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void hk_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// Barrier arrive without release semantics: no MEMBAR.ALL.GPU in front of it
// (Note [Relaxed cluster arrive] in docs/design/prelude.md: the release form
// costs a decode softmax time where it ends the pair reads). Used to publish
// the mbarriers' initialization, which
// fence.mbarrier_init already releases (Note [Pushed cluster pairs]).
__device__ __forceinline__ void hk_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

// Note [Pushed cluster pairs]
// Every CTA of a cluster needs the merge of the cluster's (max, sum) pairs.
// Instead of publishing its pair, a cluster barrier, reads of the peers'
// shared memory and a second barrier before the pair may be overwritten,
// each CTA pushes its pair into a slot of every peer (st.async: a remote
// store that completes the transaction count of the peer's mbarrier) and
// waits on its own mbarrier until all HK_CLUSTER pairs have landed. No CTA
// reads a peer's shared memory, and a CTA exits only after every push into
// it has landed, so no barrier guards the exit either. Slots and mbarriers
// come in two sets, by row parity: a peer can push row k + 2's pair only
// after it received ours of row k + 1, which we send after reading the
// slots of row k. A push may land before its mbarrier expects it (the
// transaction count goes negative; the phase cannot complete before our own
// arrive). The mbarriers are initialized once, published by a relaxed
// cluster arrive at the start and waited for before the first push. The
// exchange is faster than barriers and peer reads (docs/design/prelude.md).
struct hk_pushed_pairs {
  unsigned long long bar[2];      // mbarriers, by row parity
  float slot[2][HK_CLUSTER][2];   // the pairs of ranks 0..HK_CLUSTER-1, by row parity
};
__device__ __forceinline__ unsigned hk_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Thread 0 initializes; then every thread: __syncthreads and the relaxed
// arrive that publishes the initialization (hk_pushed_wait_init waits for it).
__device__ __forceinline__ void hk_pushed_init(hk_pushed_pairs& x) {
  if (threadIdx.x == 0) {
    asm volatile(
        "mbarrier.init.shared::cta.b64 [%0], 1;\n\t"
        "mbarrier.init.shared::cta.b64 [%1], 1;\n\t"
        "fence.mbarrier_init.release.cluster;" ::"r"(hk_smem_addr(&x.bar[0])),
        "r"(hk_smem_addr(&x.bar[1]))
        : "memory");
  }
  __syncthreads();
  hk_cluster_arrive_relaxed();
}
// Every thread, once, before the first push (and before exiting if it never pushed).
__device__ __forceinline__ void hk_pushed_wait_init() { hk_cluster_wait(); }
// Row number k (0, 1, ... of this CTA's rows) uses set k & 1, whose mbarrier
// is then in phase k >> 1.
// One thread of a receiving CTA: expect HK_CLUSTER pairs for row k.
__device__ __forceinline__ void hk_pushed_expect(hk_pushed_pairs& x, int k) {
  asm volatile(
      "{\n\t.reg .b64 st;\n\t"
      "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}" ::"r"(hk_smem_addr(&x.bar[k & 1])),
      "r"(static_cast<unsigned>(8 * HK_CLUSTER))
      : "memory");
}
// The calling thread pushes the pair (m, s) of CTA `rank` for row k to CTA `dest`.
__device__ __forceinline__ void hk_pushed_push(hk_pushed_pairs& x, float m, float s, unsigned rank, int k,
                                               unsigned dest) {
  unsigned rslot, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rslot) : "r"(hk_smem_addr(&x.slot[k & 1][rank][0])), "r"(dest));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(hk_smem_addr(&x.bar[k & 1])), "r"(dest));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(rslot),
               "f"(m), "f"(s), "r"(rbar)
               : "memory");
}
// The calling thread waits until row k's pairs are in x.slot[k & 1].
__device__ __forceinline__ void hk_pushed_wait(hk_pushed_pairs& x, int k) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "HK_PUSHED_WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra HK_PUSHED_WAIT_%=;\n\t}" ::"r"(hk_smem_addr(&x.bar[k & 1])),
      "r"(static_cast<unsigned>((k >> 1) & 1))
      : "memory");
}
// All to all: every thread of every CTA, with the CTA's pair (m, s) of row k:
// thread 0 expects the HK_CLUSTER pairs, thread r < HK_CLUSTER pushes ours to
// rank r, then everybody waits for the row's pairs.
__device__ __forceinline__ void hk_pushed_exchange(hk_pushed_pairs& x, float m, float s, unsigned rank, int k) {
  if (threadIdx.x == 0) hk_pushed_expect(x, k);
  if (threadIdx.x < HK_CLUSTER) hk_pushed_push(x, m, s, rank, k, threadIdx.x);
  hk_pushed_wait(x, k);
}
#endif  // HK_CLUSTER > 1

// Vectors [begin, end) of part `rank` of a row's `parts` slices of ceil(nvec /
// parts) vectors (the last shorter, trailing ones empty): a split row's CTA
// (the norms' clusters and grid splits).
struct hk_slice {
  int begin, end;
};
__device__ __forceinline__ hk_slice hk_slice_of(int nvec, int parts, int rank) {
  const int chunk = (nvec + parts - 1) / parts;
  const int begin = min(nvec, rank * chunk);
  return {begin, min(nvec, begin + chunk)};
}

#if defined(HK_SPLIT) && HK_SPLIT > 1
// The grid barrier of a cooperative launch (Note [Split norm rows over a
// cooperative grid] in rms_norm.cu), by thread 0 of each CTA after a barrier
// of its own CTA: an add with release semantics, then acquire loads until the
// whole grid has arrived.
__device__ __forceinline__ void hk_grid_arrive_and_wait(unsigned* counter, unsigned total) {
  unsigned seen;
  asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(seen) : "l"(counter) : "memory");
  while (seen < total) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
  }
}

// Leaving (thread 0, done with the counter): the last CTA out sets it back to 0.
__device__ __forceinline__ void hk_grid_leave(unsigned* counter, unsigned total) {
  unsigned seen;
  asm volatile("atom.add.relaxed.gpu.global.u32 %0, [%1], 1;" : "=r"(seen) : "l"(counter) : "memory");
  if (seen == 2 * total - 1) atomicExch(counter, 0u);
}
#endif  // HK_SPLIT > 1
