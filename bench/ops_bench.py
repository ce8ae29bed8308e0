#!/usr/bin/env python3
"""ops_bench: per (op, shape, dtype), hotkernel against eager ATen AND torch.compile,
measured side by side in one process on one GPU.

Run under the preload (tools/gpu/run-h200.sh does):
    LD_PRELOAD=build/lib/libhotkernel_preload.so HOTKERNEL_CACHE_DIR=$(mktemp -d)/c \\
        HOTKERNEL_SAMPLE=1 python3 bench/ops_bench.py --out ops.json

For every case the script first makes the variant hot (calls it), waits for the
background optimizer to decide (a validated kernel swapped in, or "keep ATen"),
then times three implementations of the same call:
  eager     the op with hotkernel switched off (hotkernel_set_enabled(0)): ATen's kernel
  hotkernel the op through the dispatcher with hotkernel on (its kernel, or ATen's if kept)
  compile   torch.compile(fn, dynamic=False) of the same function (Inductor's Triton kernel)
with the project's benchmark method: CUDA events around each call, L2 flushed
before every timed call (and the GPU kept busy while the call is enqueued, so
CPU launch time is not counted), the three interleaved in a rotating order, paired
ratios; medians and 95% confidence intervals come from the library's own
statistics (hotkernel_compare_samples, optimizer/Statistics.h), so every figure
is computed by one implementation. Also: GB/s of hotkernel (ideal traffic: one
read, one write, plus the norms' weight / bias read once), its share of the copy bandwidth measured in the same run, and
the max error of each implementation against a float64 reference.

Ops: softmax, log_softmax, rms_norm (F.rms_norm with a weight), layer_norm
(F.layer_norm with weight and bias); `--cases norms` runs the norm shapes, `--cases
norms_long` few very long rows (all four are in HOTKERNEL_OPS' default); cross_entropy (F.cross_entropy, mean, int64
class targets with every 8th row ignored; ideal traffic: the logits read once):
`--cases cross_entropy` (cross_entropy_loss is in HOTKERNEL_OPS' default too);
cross_entropy_none: the same with reduction none (one loss a row, no cross-row
reduction); group_norm (F.group_norm, 32 groups, weight and bias, of an NxCxHxW
input; `--cases group_norm` the diffusion shapes; native_group_norm is opt-in in
HOTKERNEL_OPS); std_weight (HF's WeightStandardizedConv2d: F.batch_norm of a CxK convolution weight as one sample,
training mode, no affine; `--cases std_weight` BiT's weights; native_batch_norm is opt-in in HOTKERNEL_OPS).
The last-dim reductions x.sum(-1), x.mean(-1), torch.amax(x, -1), x.argmax(-1),
torch.amin(x, -1), x.argmin(-1), torch.max(x, -1), torch.min(x, -1) (ideal
traffic: x read once, one result a row; max / min: a value and an int64 index):
`--cases reductions`, with them in HOTKERNEL_OPS (not in its default), e.g.
HOTKERNEL_OPS=sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim.
The middle-dim reductions sum_dim1 ... min_dim1 (x.sum(1), x.mean(1),
torch.amax(x, 1), x.argmax(1), torch.max(x, 1), torch.min(x, 1) of a contiguous
N-d x, shapes AxBxC...; traffic: x read once, one result per kept position):
`--cases reductions_dim`, with the same HOTKERNEL_OPS.
softmax and log_softmax over a dim that is not the last: softmax_dim1 and
log_softmax_dim1 (torch.softmax(x, 1), torch.log_softmax(x, 1) of a contiguous
N-d x, shapes AxBxC...), softmax_dim0 and log_softmax_dim0 (dim 0, shapes AxB...;
traffic: x read once, the output written once): `--cases softmax_dim` (the
softmax ops are in HOTKERNEL_OPS' default). `--cases softmax_400k`: softmax and
log_softmax over the last dim of float32 [4096, 400000] (6.1 GiB, tuned on a row
subset). linear and linear_bias: F.linear of x [M, K] by a weight [N, K], without and with a bias
(aten::mm, aten::addmm; shapes MxKxN; traffic: x, the weight and the bias read once, the output written once):
`--cases lm_heads` (GPT-2's and BERT's LM heads, N not a multiple of 8; mm,addmm are in HOTKERNEL_OPS'
default). attention and attention_causal: F.scaled_dot_product_attention of query, key and value
head views of [B, L, H * D] projections (HF's layout; enable_gqa when the key/value heads are fewer; is_causal for
attention_causal; no mask; shapes BxHxHKVxLxSxD: batch, query heads, key/value heads, queries, keys, head dim;
traffic: q, k, v read once, the output written once): `--cases sdpa` (the shapes of bench/sdpa_bench.py, BERT's
without its mask), with scaled_dot_product_attention in HOTKERNEL_OPS (not in its default): hotkernel runs the
backend measured fastest for the variant, or PyTorch's own pick. `--list` prints the cases with their variant and
ideal traffic and exits, without a GPU.

Output: "hotkernel-bench" v1 JSON, benchmark "ops", one result per case, and a
Markdown table on stdout (the README's table is pasted from it). The JSON's
"environment" holds the HOTKERNEL_* variables the run saw (HOTKERNEL_OPS, the
sampling, ...; added within v1, absent from files written before it). Each
result's "outputStrides" holds the strides of each implementation's output
(eager, hotkernel, compile; added within v1 on 2026-12-06, absent before).
"""
import argparse
import ctypes
import datetime
import json
import os
import subprocess
import sys
import time

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def softmax(t):
    return torch.softmax(t, -1)


def log_softmax(t):
    return torch.log_softmax(t, -1)


def rms_norm_setup(cols, dtype, gen):
    """F.rms_norm with a weight of both signs (eps 1e-6)."""
    w = (torch.rand(cols, device="cuda", generator=gen) * 2 - 1).to(dtype)

    def rms_norm(t):
        return torch.nn.functional.rms_norm(t, (cols,), w, 1e-6)

    return rms_norm, (lambda x: torch.nn.functional.rms_norm(x.double(), (cols,), w.double(), 1e-6)), [w]


def layer_norm_setup(cols, dtype, gen):
    """F.layer_norm with weight and bias (eps 1e-5)."""
    w = (torch.rand(cols, device="cuda", generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand(cols, device="cuda", generator=gen) - 0.5).to(dtype)

    def layer_norm(t):
        return torch.nn.functional.layer_norm(t, (cols,), w, b, 1e-5)

    return (layer_norm,
            (lambda x: torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5)), [w, b])


GROUP_NORM_GROUPS = 32


def group_norm_setup(shape, dtype, gen):
    """F.group_norm over 32 groups of an NxCxHxW input, with weight and bias (eps 1e-5): diffusion UNets' and VAEs'."""
    channels = shape[1]
    w = (torch.rand(channels, device="cuda", generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand(channels, device="cuda", generator=gen) - 0.5).to(dtype)

    def group_norm(t):
        return torch.nn.functional.group_norm(t, GROUP_NORM_GROUPS, w, b, 1e-5)

    def reference(x):
        return torch.nn.functional.group_norm(x.double(), GROUP_NORM_GROUPS, w.double(), b.double(), 1e-5)

    return group_norm, reference, [w, b]


def std_weight_setup(cols, dtype, gen):
    """HF's WeightStandardizedConv2d (BiT): F.batch_norm of a [C, K] weight as one sample of C channels, training
    mode, no affine, no running statistics (eps 1e-6); served by the batch_norm family (native_batch_norm)."""

    def std_weight(t):
        return torch.nn.functional.batch_norm(t.reshape(1, t.shape[0], -1), None, None, training=True, momentum=0.0,
                                              eps=1e-6).reshape(t.shape)

    def reference(x):
        return torch.nn.functional.batch_norm(x.double().reshape(1, x.shape[0], -1), None, None, training=True,
                                              momentum=0.0, eps=1e-6).reshape(x.shape)

    return std_weight, reference, []


def cross_entropy_setup(cols, dtype, gen, reduction="mean"):
    """F.cross_entropy (`reduction`, ignore_index -100): int64 class targets per row count, every 8th ignored."""
    targets = {}

    def target_for(rows):
        if rows not in targets:
            t = torch.randint(0, cols, (rows,), device="cuda", generator=gen)
            t[::8] = -100
            targets[rows] = t
        return targets[rows]

    def cross_entropy(t):
        return torch.nn.functional.cross_entropy(t, target_for(t.shape[0]), reduction=reduction)

    def reference(x):
        return torch.nn.functional.cross_entropy(x.double(), target_for(x.shape[0]), reduction=reduction)

    return cross_entropy, reference, []


def cross_entropy_none_setup(cols, dtype, gen):
    """Per-row losses (reduction none): no cross-row reduction, one result a row."""
    return cross_entropy_setup(cols, dtype, gen, reduction="none")


def sum_lastdim(t):
    return t.sum(-1)


def mean_lastdim(t):
    return t.mean(-1)


def amax_lastdim(t):
    return torch.amax(t, -1)


def argmax_lastdim(t):
    return t.argmax(-1)


def amin_lastdim(t):
    return torch.amin(t, -1)


def argmin_lastdim(t):
    return t.argmin(-1)


def max_lastdim(t):
    return torch.max(t, -1)


def min_lastdim(t):
    return torch.min(t, -1)


def sum_dim1(t):
    return t.sum(1)


def mean_dim1(t):
    return t.mean(1)


def amax_dim1(t):
    return torch.amax(t, 1)


def argmax_dim1(t):
    return t.argmax(1)


def argmin_dim1(t):
    return t.argmin(1)


def max_dim1(t):
    return torch.max(t, 1)


def min_dim1(t):
    return torch.min(t, 1)


def softmax_dim1(t):
    return torch.softmax(t, 1)


def log_softmax_dim1(t):
    return torch.log_softmax(t, 1)


def softmax_dim0(t):
    return torch.softmax(t, 0)


def log_softmax_dim0(t):
    return torch.log_softmax(t, 0)


def linear_setup(shape, dtype, gen, bias=False):
    """F.linear of x [M, K] by a weight [N, K] (scaled by 1/sqrt(K): outputs of unit size), with a bias [N] or not:
    aten::addmm or aten::mm, what GPT-2's LM head (no bias) and BERT's MLM head (a bias) call."""
    m, k, n = shape
    w = (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(dtype)
    b = torch.randn(n, device="cuda", generator=gen).to(dtype) if bias else None

    def linear(t):
        return torch.nn.functional.linear(t, w, b)

    def linear64(t):
        return torch.nn.functional.linear(t.double(), w.double(), None if b is None else b.double())

    return linear, linear64, [w] + ([b] if bias else [])


# The GEMM ops: a case's shape is MxKxN (x [M, K], the weight [N, K]); the variant is rows M, cols N, inner K.
GEMM_OPS = {"linear": False, "linear_bias": True}


def attention_setup(shape, dtype, gen, causal):
    """F.scaled_dot_product_attention as HF's sdpa_attention_forward calls it: head views [B, H, N, D] of
    [B, N, H * D] projections, no mask, enable_gqa with fewer key/value heads. Returns the query too."""
    b, h, hkv, l, s, d = shape
    q = torch.randn(b, l, h, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
    k = torch.randn(b, s, hkv, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
    v = torch.randn(b, s, hkv, d, device="cuda", generator=gen).to(dtype).transpose(1, 2)
    gqa = h != hkv

    def attention(t):
        return torch.nn.functional.scaled_dot_product_attention(t, k, v, is_causal=causal, enable_gqa=gqa)

    def attention64(t):
        return torch.nn.functional.scaled_dot_product_attention(t.double(), k.double(), v.double(),
                                                                is_causal=causal, enable_gqa=gqa)

    return q, attention, attention64, [k, v]


# The attention ops: a case's shape is BxHxHKVxLxSxD; the value is is_causal.
ATTENTION_OPS = {"attention": False, "attention_causal": True}


def layout_class(t):
    """kernels::sdpaLayoutOf: 0 contiguous [B, H, N, D], 1 the head view of [B, N, H, D], 2 of a fused
    [B, N, 3 * H * D]; a dimension of size 1 matches any stride."""
    b, h, n, d = t.shape
    for cls, want in enumerate(((h * n * d, n * d, d, 1), (n * h * d, d, h * d, 1), (3 * n * h * d, d, 3 * h * d, 1))):
        if all(size == 1 or stride == w for size, stride, w in zip(t.shape, t.stride(), want)):
            return cls
    return -1


def plain(fn, ref64):
    return lambda cols, dtype, gen: (fn, ref64, [])


# op name -> (setup(cols, dtype, generator) -> (function, float64 reference, per-column
# tensors it reads), ATen op the dispatcher sees, the variant string's flags)
OPS = {
    "softmax": (plain(softmax, lambda x: torch.softmax(x.double(), -1)), "aten::_softmax", ""),
    # 16-bit GEMMs whose N is not a multiple of 8 are served padded (mm / addmm in HOTKERNEL_OPS; not in its default).
    "linear": (lambda shape, dtype, gen: linear_setup(shape, dtype, gen), "aten::mm", ""),
    "linear_bias": (lambda shape, dtype, gen: linear_setup(shape, dtype, gen, bias=True), "aten::addmm", ";bias=1"),
    # Attention (scaled_dot_product_attention in HOTKERNEL_OPS; not in its default): setup in run_case.
    "attention": (None, "aten::scaled_dot_product_attention", ""),
    "attention_causal": (None, "aten::scaled_dot_product_attention", ""),
    "log_softmax": (plain(log_softmax, lambda x: torch.log_softmax(x.double(), -1)), "aten::_log_softmax", ""),
    "rms_norm": (rms_norm_setup, "aten::_fused_rms_norm", ";weight=1"),
    "layer_norm": (layer_norm_setup, "aten::native_layer_norm", ";weight=1;bias=1"),
    # NxCxHxW, 32 groups (native_group_norm in HOTKERNEL_OPS; not in its default): setup in run_case.
    "group_norm": (group_norm_setup, "aten::native_group_norm", ";weight=1;bias=1"),
    # CxK: a convolution weight of C output channels standardized (native_batch_norm in HOTKERNEL_OPS; not in its
    # default).
    "std_weight": (std_weight_setup, "aten::native_batch_norm", ""),
    "cross_entropy": (cross_entropy_setup, "aten::cross_entropy_loss", ";reduction=mean"),
    "cross_entropy_none": (cross_entropy_none_setup, "aten::cross_entropy_loss", ";reduction=none"),
    # The last-dim reductions (aten::sum.dim_IntList, aten::mean.dim, aten::amax, aten::argmax,
    # aten::amin, aten::argmin over dim -1).
    "sum": (plain(sum_lastdim, lambda x: x.double().sum(-1)), "aten::sum.dim_IntList", ""),
    "mean": (plain(mean_lastdim, lambda x: x.double().mean(-1)), "aten::mean.dim", ""),
    "amax": (plain(amax_lastdim, lambda x: torch.amax(x.double(), -1)), "aten::amax", ""),
    "argmax": (plain(argmax_lastdim, lambda x: x.double().argmax(-1)), "aten::argmax", ""),
    "amin": (plain(amin_lastdim, lambda x: torch.amin(x.double(), -1)), "aten::amin", ""),
    "argmin": (plain(argmin_lastdim, lambda x: x.double().argmin(-1)), "aten::argmin", ""),
    # aten::max.dim / aten::min.dim over dim -1: (values, indices).
    "max": (plain(max_lastdim, lambda x: torch.max(x.double(), -1)), "aten::max.dim", ""),
    "min": (plain(min_lastdim, lambda x: torch.min(x.double(), -1)), "aten::min.dim", ""),
    # The same ops over dim 1 of an N-d tensor (the middle-dim layout: the variant's inner extent).
    "sum_dim1": (plain(sum_dim1, lambda x: x.double().sum(1)), "aten::sum.dim_IntList", ""),
    "mean_dim1": (plain(mean_dim1, lambda x: x.double().mean(1)), "aten::mean.dim", ""),
    "amax_dim1": (plain(amax_dim1, lambda x: torch.amax(x.double(), 1)), "aten::amax", ""),
    "argmax_dim1": (plain(argmax_dim1, lambda x: x.double().argmax(1)), "aten::argmax", ""),
    "argmin_dim1": (plain(argmin_dim1, lambda x: x.double().argmin(1)), "aten::argmin", ""),
    "max_dim1": (plain(max_dim1, lambda x: torch.max(x.double(), 1)), "aten::max.dim", ""),
    "min_dim1": (plain(min_dim1, lambda x: torch.min(x.double(), 1)), "aten::min.dim", ""),
    # softmax / log_softmax over dim 1 of an N-d tensor and over dim 0 (the middle-dim layout too).
    "softmax_dim1": (plain(softmax_dim1, lambda x: torch.softmax(x.double(), 1)), "aten::_softmax", ""),
    "log_softmax_dim1": (plain(log_softmax_dim1, lambda x: torch.log_softmax(x.double(), 1)), "aten::_log_softmax", ""),
    "softmax_dim0": (plain(softmax_dim0, lambda x: torch.softmax(x.double(), 0)), "aten::_softmax", ""),
    "log_softmax_dim0": (plain(log_softmax_dim0, lambda x: torch.log_softmax(x.double(), 0)), "aten::_log_softmax", ""),
}
REDUCTIONS = ("sum", "mean", "amax", "argmax", "amin", "argmin", "max", "min")
DIM1_REDUCTIONS = ("sum_dim1", "mean_dim1", "amax_dim1", "argmax_dim1", "argmin_dim1", "max_dim1", "min_dim1")
INDEX_REDUCTIONS = ("argmax", "argmin", "argmax_dim1", "argmin_dim1")
PAIR_REDUCTIONS = ("max", "min", "max_dim1", "min_dim1")  # a value and an int64 index a result
# The ops over a dim that is not the last, and that dim. Their variant is the
# middle-dim key [outer, dim, inner]: the product of the sizes before the dim,
# its size, the product of the sizes after it (> 1, else the call is the
# last-dim layout).
MIDDLE_DIM_OPS = dict([(op, 1) for op in DIM1_REDUCTIONS] + [
    ("softmax_dim1", 1), ("log_softmax_dim1", 1), ("softmax_dim0", 0), ("log_softmax_dim0", 0)])

DEFAULT_CASES = (
    "softmax:bfloat16:1x128256,softmax:bfloat16:32x128256,softmax:bfloat16:4096x32000,"
    "softmax:bfloat16:8192x128256,softmax:float16:4096x32000,softmax:float32:4096x32000,"
    "log_softmax:bfloat16:32x128256,log_softmax:bfloat16:4096x32000,log_softmax:bfloat16:8192x128256,"
    "rms_norm:bfloat16:4096x4096,layer_norm:bfloat16:4096x4096"
)
# `--cases norms`: the norm shapes (a decode-sized batch, a square and a large activation).
NORM_CASES = (
    "rms_norm:bfloat16:32x4096,rms_norm:bfloat16:4096x4096,rms_norm:bfloat16:16384x8192,"
    "layer_norm:bfloat16:32x4096,layer_norm:bfloat16:4096x4096,layer_norm:bfloat16:16384x8192"
)
# `--cases norms_long`: issue 19's few very long rows (<= 32 rows of >= 1M columns; target >= torch.compile):
# rms_norm and layer_norm split them over a cluster on sm_90+, or over a cooperative grid where rows are too few for
# clusters to fill the GPU.
NORM_LONG_CASES = (
    "rms_norm:float32:8x4194304,rms_norm:bfloat16:32x1048576,rms_norm:bfloat16:4x2097152,"
    "layer_norm:float32:8x4194304,layer_norm:bfloat16:4x2097152"
)
# `--cases cross_entropy`: decode (one and 32 rows of a 128k vocabulary), a batch of 32000 classes, a large LM head.
CROSS_ENTROPY_CASES = (
    "cross_entropy:bfloat16:1x128256,cross_entropy:bfloat16:32x128256,cross_entropy:bfloat16:4096x32000,"
    "cross_entropy:bfloat16:8192x128256,cross_entropy:float32:4096x32000"
)

# `--cases reductions`: each reduction on a batch of 32000-class logits, a large
# LM head's logits, a large activation, and a decode-sized batch of 128k logits.
REDUCTION_CASES = ",".join(
    f"{op}:bfloat16:{shape}" for op in REDUCTIONS for shape in ("4096x32000", "8192x128256", "32768x4096", "32x128256"))
# `--cases reductions_dim`: over dim 1 of contiguous 3-d tensors: float32 of 2 GiB
# (issue 19's target: >= 90% of the copy bandwidth, >= 1.1x eager), the same in
# bfloat16, and a small float32 one.
REDUCTION_DIM_CASES = ",".join(
    f"{op}:{shape}" for op in ("sum_dim1", "mean_dim1", "amax_dim1", "argmax_dim1", "argmin_dim1", "max_dim1", "min_dim1")
    for shape in ("float32:64x2048x4096", "bfloat16:64x2048x4096", "float32:16x1024x512"))
# `--cases softmax_dim`: softmax and log_softmax over dim 1 of contiguous 3-d
# tensors (float32 of 1 GiB, bfloat16 of 256 MiB, a small float32 one) and over
# dim 0 of 2-d ones.
SOFTMAX_DIM_CASES = ",".join(
    [f"{op}:{shape}" for op in ("softmax_dim1", "log_softmax_dim1")
     for shape in ("float32:32x4096x2048", "bfloat16:64x2048x1024", "float32:16x1024x512")] +
    [f"{op}:{shape}" for op in ("softmax_dim0", "log_softmax_dim0")
     for shape in ("float32:8192x4096", "bfloat16:4096x8192")])
# `--cases softmax_400k`: issue 19's rows of 400k float32 columns (6.1 GiB, more
# than the optimizer's memory cap holds whole: tuned on a row subset).
SOFTMAX_400K_CASES = "softmax:float32:4096x400000,log_softmax:float32:4096x400000"
# GroupNorm(32) of Stable Diffusion's UNet (batch 2: classifier-free guidance, a 64 x 64 latent) and of its VAE
# decoder (batch 1, up to 512 x 512): few rows (N * 32) of tens of thousands to millions of elements.
GROUP_NORM_CASES = (
    "group_norm:float16:2x320x64x64,group_norm:float16:2x640x32x32,group_norm:float16:2x1280x16x16,"
    "group_norm:float16:2x1280x8x8,group_norm:bfloat16:2x320x64x64,group_norm:float32:2x320x64x64,"
    "group_norm:float16:1x512x128x128,group_norm:float16:1x256x256x256,group_norm:float16:1x128x512x512")
# `--cases lm_heads`: GPT-2's LM head (fp16, 16 x 512 tokens, vocabulary 50,257, no bias) and BERT's MLM head
# (bf16, 32 x 512 tokens, vocabulary 30,522, a bias), with mm,addmm in HOTKERNEL_OPS.
LM_HEAD_CASES = "linear:float16:8192x768x50257,linear_bias:bfloat16:16384x768x30522"
# `--cases sdpa`: bench/sdpa_bench.py's attention shapes (Llama prefill and decode with grouped heads, GPT-2, BERT
# without its padding mask, a long prefill and decode, head dim 80, a float32 ViT), with scaled_dot_product_attention
# in HOTKERNEL_OPS.
SDPA_CASES = ("attention_causal:bfloat16:8x16x8x512x512x128,attention:bfloat16:8x16x8x1x544x128,"
              "attention_causal:float16:16x12x12x512x512x64,attention:bfloat16:32x12x12x512x512x64,"
              "attention_causal:bfloat16:1x32x8x4096x4096x128,attention:bfloat16:1x32x8x1x8192x128,"
              "attention_causal:float16:8x32x32x1024x1024x80,attention:float32:32x12x12x197x197x64")
# BiT-M R50x1's standardized convolution weights (C_out x C_in * kh * kw), bf16: the stem, 1 x 1 and 3 x 3 convs of
# each stage (native_batch_norm in HOTKERNEL_OPS).
STD_WEIGHT_CASES = ("std_weight:bfloat16:64x147,std_weight:bfloat16:256x64,std_weight:bfloat16:64x576,"
                    "std_weight:bfloat16:512x4608,std_weight:bfloat16:2048x512,std_weight:bfloat16:1024x2048")
PRESETS = {"norms": NORM_CASES, "norms_long": NORM_LONG_CASES, "cross_entropy": CROSS_ENTROPY_CASES,
           "reductions": REDUCTION_CASES, "reductions_dim": REDUCTION_DIM_CASES, "softmax_dim": SOFTMAX_DIM_CASES,
           "softmax_400k": SOFTMAX_400K_CASES, "lm_heads": LM_HEAD_CASES, "sdpa": SDPA_CASES,
           "group_norm": GROUP_NORM_CASES, "std_weight": STD_WEIGHT_CASES}


# Ops whose output row r depends on input row r alone (over the last dimension): their float64 check can go by row
# blocks, which keeps a multi-GB variant's check (softmax_400k: 13 GB of float64 a copy) within the GPU's memory.
ROWWISE_OPS = {"softmax", "log_softmax", "rms_norm", "layer_norm", "sum", "mean", "amax", "argmax", "amin", "argmin",
               "max", "min", "linear", "linear_bias"}


def max_error(op, x, out, ref64, block_bytes=1 << 30):
    """The largest |out - ref| over the elements where the float64 reference is finite (0 when none is)."""
    rows = x.shape[0] if x.dim() >= 2 else 1
    per_row = max(1, x.numel() // max(rows, 1), out.numel() // max(rows, 1)) * 8  # float64 of the wider row
    step = rows if op not in ROWWISE_OPS else max(1, block_bytes // per_row)
    worst = 0.0
    for r0 in range(0, rows, step):
        sl = slice(r0, min(rows, r0 + step))
        ref = first_output(ref64(x if step >= rows else x[sl]))
        got = (out if step >= rows else out[sl]).double()
        finite = torch.isfinite(ref)
        if finite.any():
            worst = max(worst, float((got[finite] - ref[finite]).abs().max().item()))
        del ref, got, finite
    return worst


def first_output(out):
    """The values of a (values, indices) result; any other result itself."""
    return out[0] if isinstance(out, tuple) else out


class Hotkernel:
    """The C API of the loaded libhotkernel.so (through the preload shim)."""

    def __init__(self):
        lib = ctypes.CDLL(None)
        try:
            self.set_enabled = lib.hotkernel_set_enabled
            self.wait_idle = lib.hotkernel_wait_idle
            self._status = lib.hotkernel_status_json
            self._compare = lib.hotkernel_compare_samples
        except AttributeError:
            sys.exit("ops_bench: hotkernel is not loaded; run under LD_PRELOAD=.../libhotkernel_preload.so")
        self.set_enabled.argtypes = [ctypes.c_int]
        self.wait_idle.argtypes = [ctypes.c_double]
        self._status.argtypes = [ctypes.c_char_p, ctypes.c_int]
        dp = ctypes.POINTER(ctypes.c_double)
        self._compare.argtypes = [dp, dp, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]

    def status(self):
        n = self._status(None, 0)
        buf = ctypes.create_string_buffer(n)
        self._status(buf, n)
        return json.loads(buf.value)

    def compare(self, baseline, candidate):
        """Median + 95% CI of each and of the paired ratios baseline/candidate."""
        n = len(baseline)
        arr = ctypes.c_double * n
        a, b = arr(*baseline), arr(*candidate)
        size = self._compare(a, b, n, None, 0)
        if size < 0:
            raise RuntimeError("hotkernel_compare_samples refused the samples")
        buf = ctypes.create_string_buffer(size)
        self._compare(a, b, n, buf, size)
        return json.loads(buf.value)


def machine():
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        info["driver"] = out.splitlines()[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        info["driver"] = "unknown"
    return info


class Timer:
    """CUDA events around one call, L2 flushed before it (the benchmark method)."""

    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")

    def flush_l2(self):
        self.flush.zero_()

    def time_us(self, fn):
        self.flush_l2()
        # Keep the GPU busy ~100 us more, so the call below is enqueued before
        # the GPU reaches it: the events then time the kernels, not Python's
        # and the dispatcher's CPU time (which decides small decode shapes).
        torch.cuda._sleep(200_000)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        return e0, e1


def time_interleaved(timer, timed, reps, warmup=1):
    """The project's benchmark method: `timed` is [(name, fn)], each run `warmup` times, then `reps` rounds each
    timing every fn once (Timer: CUDA events, L2 flushed), the order rotated a round so that no fn always runs
    first. Returns {name: [microseconds a round]}. The probes under bench/experiments/ time with it too."""
    for _ in range(warmup):
        for _, fn in timed:
            fn()
    samples = {name: [] for name, _ in timed}
    for rep in range(reps):
        order = timed[rep % len(timed):] + timed[:rep % len(timed)]
        events = [(name, timer.time_us(fn)) for name, fn in order]
        torch.cuda.synchronize()
        for name, (e0, e1) in events:
            samples[name].append(e0.elapsed_time(e1) * 1e3)
    return samples


def copy_bandwidth(timer, reps=15):
    """Device copy bandwidth (bytes read + written per second), 512 MiB."""
    src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    events = [timer.time_us(lambda: dst.copy_(src)) for _ in range(reps)]
    torch.cuda.synchronize()
    times = sorted(e0.elapsed_time(e1) * 1e3 for e0, e1 in events)
    return 2 * src.numel() / (times[len(times) // 2] * 1e-6)


def make_hot(hk, fn, x, calls, timeout):
    """Calls the op until the recorder marks it hot, then waits for the optimizer's decision."""
    for _ in range(calls):
        fn(x)
    torch.cuda.synchronize()
    time.sleep(0.2)  # idle GPU: the background optimizer's gate opens
    t0 = time.perf_counter()
    idle = hk.wait_idle(timeout) == 0
    return idle, time.perf_counter() - t0


def variant_string(dtype, rows, cols, flags="", inner=0):
    return f"dtype={dtype};rows={rows};cols={cols}{flags}" + (f";inner={inner}" if inner else "")


def middle_dim_extents(shape, d):
    """[outer, dim, inner] of the op over dim d of a contiguous tensor of `shape`."""
    return prod(shape[:d]), shape[d], prod(shape[d + 1:])


def variant_of(op, dtype_name, shape):
    """The variant string hotkernel's status names the case's variant by."""
    flags = OPS[op][2]
    if op in ATTENTION_OPS:  # kernels::variantString of kernels::sdpaKeyOf
        b, h, hkv, l, s, d = shape
        q_cls, kv_cls = (0 if l == 1 else 1), (0 if s == 1 else 1)  # attention_setup's head views
        return (f"dtype={dtype_name};rows={b};cols={l};inner={s};more={h},{hkv},{d},{d};layouts={q_cls}{kv_cls}{kv_cls}"
                + (";causal=1" if ATTENTION_OPS[op] else "") + (";gqa=1" if hkv != h else ""))
    if op == "group_norm":  # kernels::variantString of kernels::groupNormKeyOf: more = {G, HxW, 1, 1}
        n, c, h, w = shape
        return (f"dtype={dtype_name};rows={n * GROUP_NORM_GROUPS};cols={c // GROUP_NORM_GROUPS * h * w};"
                f"more={GROUP_NORM_GROUPS},{h * w},1,1{flags}")
    if op in GEMM_OPS:  # kernels::variantString's order: inner before the bias flag
        m, k, n = shape
        return f"dtype={dtype_name};rows={m};cols={n};inner={k}{flags}"
    if op in MIDDLE_DIM_OPS:
        outer, dim, inner = middle_dim_extents(shape, MIDDLE_DIM_OPS[op])
        return variant_string(dtype_name, outer, dim, flags, inner=inner)
    return variant_string(dtype_name, prod(shape[:-1]), shape[-1], flags)


def ideal_bytes(op, shape, element_size, column_bytes):
    """Ideal traffic: x read, out written, the per-column tensors read once
    (the norms' float32 statistics, 4-8 bytes a row, are left out);
    cross_entropy: the logits read once and the int64 targets (its output is one scalar)."""
    if op in ATTENTION_OPS:  # q, k, v read once, the output written once
        b, h, hkv, l, s, d = shape
        return (2 * b * h * l * d + 2 * b * hkv * s * d) * element_size
    if op in GEMM_OPS:  # x and the weight read once, the output written once, the bias read once
        m, k, n = shape
        return (m * k + m * n) * element_size + column_bytes
    numel, rows = prod(shape), prod(shape[:-1])
    if op == "cross_entropy":
        return numel * element_size + rows * 8
    if op == "cross_entropy_none":  # the logits and targets read once, one loss a row written
        return numel * element_size + rows * (8 + element_size)
    if op in REDUCTIONS or op in DIM1_REDUCTIONS:  # x read once, one result a kept position
        results = rows if op in REDUCTIONS else numel // shape[MIDDLE_DIM_OPS[op]]
        per_result = 8 if op in INDEX_REDUCTIONS else element_size + (8 if op in PAIR_REDUCTIONS else 0)
        return numel * element_size + results * per_result
    return 2 * numel * element_size + column_bytes


def decision_of(status, aten_op, variant):
    for p in status.get("plans", []):
        if p.get("op") == aten_op and p.get("variant") == variant:
            return "kernel", p.get("kernel", "")
    for t in status.get("tuned", []):
        if t.get("op") == aten_op and t.get("variant") == variant:
            return t.get("decision", "?"), ""
    return "undecided", ""


def run_case(hk, timer, op, dtype_name, shape, args, copy_bps):
    setup, aten_op, _ = OPS[op]
    dtype = DTYPES[dtype_name]
    rows, cols = prod(shape[:-1]), shape[-1]
    gen = torch.Generator(device="cuda").manual_seed(1234 + rows + cols)
    if op in ATTENTION_OPS:  # the query
        x, fn, ref64, columns = attention_setup(shape, dtype, gen, ATTENTION_OPS[op])
    elif op in GEMM_OPS:  # x [M, K]
        x = torch.randn(shape[0], shape[1], device="cuda", generator=gen).to(dtype)
        fn, ref64, columns = setup(shape, dtype, gen)
    elif op == "group_norm":  # x [N, C, H, W]
        x = (torch.randn(*shape, device="cuda", generator=gen) * 3).to(dtype)
        fn, ref64, columns = setup(shape, dtype, gen)
    else:
        x = (torch.randn(*shape, device="cuda", generator=gen) * 3).to(dtype)
        fn, ref64, columns = setup(cols, dtype, gen)
    idle, waited = make_hot(hk, fn, x, args.hot_calls, args.tune_timeout)
    variant = variant_of(op, dtype_name, shape)
    if op in ATTENTION_OPS:
        layouts = "".join(str(layout_class(t)) for t in [x] + columns)
        assert f"layouts={layouts}" in variant, (variant, layouts)
    decision, kernel = decision_of(hk.status(), aten_op, variant)

    torch._dynamo.reset()
    compiled = torch.compile(fn, dynamic=False)
    t0 = time.perf_counter()
    compiled(x)
    torch.cuda.synchronize()
    compile_seconds = time.perf_counter() - t0

    def eager():
        hk.set_enabled(0)
        try:
            return fn(x)
        finally:
            hk.set_enabled(1)

    impls = {"eager": eager, "hotkernel": lambda: fn(x), "compile": lambda: compiled(x)}
    names = list(impls)
    # Max error against float64 and the output's strides (torch.compile may return another layout than eager's,
    # e.g. a padded row stride), each implementation once.
    errors, strides = {}, {}
    for name in names:
        out = first_output(impls[name]())
        errors[name], strides[name] = max_error(op, x, out, ref64), list(out.stride())
        del out
    samples = time_interleaved(timer, list(impls.items()), args.reps, warmup=args.warmup)
    vs_eager = hk.compare(samples["eager"], samples["hotkernel"])
    vs_compile = hk.compare(samples["compile"], samples["hotkernel"])
    compile_vs_eager = hk.compare(samples["eager"], samples["compile"])
    nbytes = ideal_bytes(op, shape, x.element_size(), sum(c.numel() * c.element_size() for c in columns))
    hk_us = vs_eager["candidate"]["median"]
    gbps = nbytes / (hk_us * 1e-6) / 1e9
    return {
        "op": op, "atenOp": aten_op, "dtype": dtype_name, "shape": list(shape), "variant": variant,
        "decision": decision, "kernel": kernel, "optimizerIdle": idle, "waitedSeconds": round(waited, 2),
        "eagerUs": vs_eager["baseline"], "hotkernelUs": vs_eager["candidate"], "compileUs": vs_compile["baseline"],
        "speedupVsEager": vs_eager["speedup"], "speedupVsCompile": vs_compile["speedup"],
        "compileSpeedupVsEager": compile_vs_eager["speedup"],
        "bytes": nbytes, "hotkernelGBps": gbps, "copyFraction": gbps * 1e9 / copy_bps,
        "eagerGBps": nbytes / (vs_eager["baseline"]["median"] * 1e-6) / 1e9,
        "compileGBps": nbytes / (vs_compile["baseline"]["median"] * 1e-6) / 1e9,
        "maxErrorVsFloat64": errors, "outputStrides": strides, "compileSeconds": round(compile_seconds, 2),
        "samplesUs": {k: [round(v, 3) for v in s] for k, s in samples.items()},
    }


def parse_cases(text):
    text = PRESETS.get(text, text)
    cases = []
    for item in text.split(","):
        try:
            op, dtype, shape_text = item.strip().split(":")
            shape = [int(v) for v in shape_text.lower().split("x")]
        except ValueError:
            sys.exit(f"ops_bench: malformed case '{item}' (want op:dtype:ROWSxCOLS, or AxBxC... for the _dim ops)")
        if op not in OPS or dtype not in DTYPES or min(shape) < 1:
            sys.exit(f"ops_bench: unknown op/dtype or bad shape in '{item}' (ops: {', '.join(OPS)})")
        if op in ATTENTION_OPS:
            if len(shape) != 6 or shape[1] % shape[2] != 0 or shape[4] < 2:
                sys.exit(f"ops_bench: '{item}': {op} takes BxHxHKVxLxSxD (H a multiple of HKV, S >= 2)")
        elif op == "group_norm":
            if len(shape) != 4 or shape[1] % GROUP_NORM_GROUPS != 0 or shape[2] * shape[3] < 2:
                sys.exit(f"ops_bench: '{item}': group_norm takes NxCxHxW (C a multiple of {GROUP_NORM_GROUPS}, "
                         "H * W >= 2)")
        elif op in GEMM_OPS:
            if len(shape) != 3:
                sys.exit(f"ops_bench: '{item}': {op} takes MxKxN (x [M, K], the weight [N, K])")
        elif op in MIDDLE_DIM_OPS:  # a size after the op's dim, and more than one element after it
            d = MIDDLE_DIM_OPS[op]
            if len(shape) < d + 2 or middle_dim_extents(shape, d)[2] < 2:
                sys.exit(f"ops_bench: '{item}': {op} needs sizes after dim {d} of more than one element "
                         "(else it is the last-dim layout)")
        elif len(shape) != 2:
            sys.exit(f"ops_bench: '{item}': {op} takes ROWSxCOLS")
        cases.append((op, dtype, shape))
    return cases


def list_cases(cases):
    """The cases, their variant and ideal traffic (the norms' weight and bias included): no GPU needed."""
    print("| op | ATen op | dtype | shape | variant | input GiB | ideal traffic GiB |")
    print("|---|---|---|---|---|---|---|")
    for op, dtype, shape in cases:
        size = torch.empty((), dtype=DTYPES[dtype]).element_size()
        columns = sum(flag in OPS[op][2] for flag in (";weight=1", ";bias=1")) * shape[-1] * size
        if op in ATTENTION_OPS:  # the query, then key and value
            b, h, hkv, l, s, d = shape
            print(f"| {op} | {OPS[op][1]} | {dtype} | {shape_text(shape)} | {variant_of(op, dtype, shape)} | "
                  f"{b * h * l * d * size / 2**30:.3f} | {ideal_bytes(op, shape, size, 0) / 2**30:.3f} |")
            continue
        if op in GEMM_OPS:  # the weight [N, K] and the bias [N]
            m, k, n = shape
            columns = (n * k + (n if GEMM_OPS[op] else 0)) * size
            print(f"| {op} | {OPS[op][1]} | {dtype} | {shape_text(shape)} | {variant_of(op, dtype, shape)} | "
                  f"{m * k * size / 2**30:.3f} | {ideal_bytes(op, shape, size, columns) / 2**30:.3f} |")
            continue
        print(f"| {op} | {OPS[op][1]} | {dtype} | {shape_text(shape)} | {variant_of(op, dtype, shape)} | "
              f"{prod(shape) * size / 2**30:.3f} | {ideal_bytes(op, shape, size, columns) / 2**30:.3f} |")


def prod(values):
    n = 1
    for v in values:
        n *= v
    return n


def shape_text(shape):
    return "x".join(str(v) for v in shape)


def fmt_ci(m, unit=""):
    return f"{m['median']:.2f}{unit} [{m['low']:.2f}, {m['high']:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="comma list of op:dtype:ROWSxCOLS (ops: softmax, log_softmax, rms_norm, layer_norm, "
                         "cross_entropy, sum, mean, amax, argmax, amin, argmin, max, min; over dim 1 of AxBxC...: "
                         "sum_dim1, mean_dim1, amax_dim1, argmax_dim1, argmin_dim1, max_dim1, min_dim1, softmax_dim1, "
                         "log_softmax_dim1; over dim 0 of AxB...: softmax_dim0, log_softmax_dim0; group_norm of NxCxHxW), "
                         "or a preset: "
                         f"{', '.join(PRESETS)}")
    ap.add_argument("--reps", type=int, default=31, help="timed rounds (each times all three)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--hot-calls", type=int, default=80, help="calls that make a variant hot")
    ap.add_argument("--tune-timeout", type=float, default=240.0, help="seconds to wait for the optimizer per case")
    ap.add_argument("--out", default="")
    ap.add_argument("--list", action="store_true", help="print the cases, their variants and ideal traffic; exit")
    args = ap.parse_args()
    cases = parse_cases(args.cases)
    if args.list:
        list_cases(cases)
        return 0
    if not torch.cuda.is_available():
        sys.exit("ops_bench: no CUDA device")
    if args.reps < 7:
        sys.exit("ops_bench: --reps must be >= 7 (the confidence interval needs them)")
    hk = Hotkernel()
    timer = Timer()
    copy_bps = copy_bandwidth(timer)
    print(f"copy bandwidth {copy_bps / 1e9:.0f} GB/s", flush=True)
    results = []
    machine_info = machine()
    environment = {k: v for k, v in sorted(os.environ.items()) if k.startswith("HOTKERNEL_")}

    def document():
        return {"format": "hotkernel-bench", "version": 1, "benchmark": "ops",
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "machine": machine_info, "copyGBps": copy_bps / 1e9,
                "method": "CUDA events per call, L2 flushed before each, eager/hotkernel/compile interleaved in "
                          "rotating order, medians and 95% CIs of paired ratios (hotkernel_compare_samples)",
                "reps": args.reps, "environment": environment, "results": results}

    def write():
        if args.out:  # after every case: a crash later loses nothing measured
            with open(args.out + ".tmp", "w") as f:
                json.dump(document(), f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    for op, dtype, shape in cases:
        try:
            r = run_case(hk, timer, op, dtype, shape, args, copy_bps)
        except Exception as e:  # one broken case must not lose the others
            r = {"op": op, "dtype": dtype, "shape": list(shape), "error": f"{type(e).__name__}: {e}"}
        results.append(r)
        if "error" in r:
            print(f"{op} {dtype} {shape_text(shape)}: ERROR {r['error']}", flush=True)
        else:
            print(f"{op} {dtype} {shape_text(shape)}: {r['decision']} {r['kernel']} | eager {r['eagerUs']['median']:.1f} us, "
                  f"hotkernel {r['hotkernelUs']['median']:.1f} us, compile {r['compileUs']['median']:.1f} us | "
                  f"x{fmt_ci(r['speedupVsEager'])} vs eager, x{fmt_ci(r['speedupVsCompile'])} vs compile | "
                  f"{r['hotkernelGBps']:.0f} GB/s = {100 * r['copyFraction']:.0f}% of copy", flush=True)
        write()
    print("\n| op | dtype | shape | eager us | compile us | hotkernel us | vs eager | vs compile | GB/s | % copy | "
          "max err vs fp64 (hk / eager) | kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['op']} | {r['dtype']} | {shape_text(r['shape'])} | error: {r['error']} |")
            continue
        err = r["maxErrorVsFloat64"]
        print(f"| {r['op']} | {r['dtype']} | {shape_text(r['shape'])} | {r['eagerUs']['median']:.1f} | "
              f"{r['compileUs']['median']:.1f} | {r['hotkernelUs']['median']:.1f} | "
              f"{fmt_ci(r['speedupVsEager'], 'x')} | {fmt_ci(r['speedupVsCompile'], 'x')} | "
              f"{r['hotkernelGBps']:.0f} | {100 * r['copyFraction']:.0f}% | {err['hotkernel']:.2g} / {err['eager']:.2g} | "
              f"{r['decision']}: {r['kernel'].split(' for ')[0]} |")
    if args.out:
        write()
        print(f"\nwritten {args.out}")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
