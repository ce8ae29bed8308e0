#!/usr/bin/env python3
"""fusion_engine_bench: the deferral engine (HOTKERNEL_FUSION=1) end to end on
HF-style blocks written as eager code, against the same blocks with hotkernel
switched off (eager ATen) and under torch.compile, plus the host cost the
fusion trampolines add per dispatched op.

    python3 bench/fusion_engine_bench.py --out fusion-engine.json
    python3 bench/fusion_engine_bench.py --smoke          # tiny shapes; without CUDA: the CPU check

The script itself needs no preload: it starts its measurements as child
processes under --preload (default $HOTKERNEL_BUILD_DIR/lib, else
build/lib/libhotkernel_preload.so), each with the environment it measures
(HOTKERNEL_CACHE_PATH and HOTKERNEL_REMOTE_CACHE removed, so no tuned entry
comes from elsewhere; the other HOTKERNEL_* variables are kept).

1. The engine (one child: HOTKERNEL_FUSION=1, a fresh HOTKERNEL_CACHE_DIR). The blocks
   (--cases block:dtype:TOKENS, hidden size --hidden), as HF transformers writes them:
     rmsnorm           LlamaRMSNorm.forward: x.to(f32); v = x.pow(2).mean(-1, keepdim=True);
                       x * torch.rsqrt(v + eps); w * x.to(dtype)
     swiglu-mlp        LlamaMLP: down(silu(gate(x)) * up(x)), nn.Linear weights, intermediate
                       3.5 x hidden (Llama-3-8B: 14336 for 4096)
     gelu-mlp          GPT2MLP: c_proj(NewGELU(c_fc(x))), Conv1D (addmm with a bias on x.view),
                       intermediate 4 x hidden
     residual-rmsnorm  the decoder layer's residual add and the next norm:
                       s = residual + h; (s, LlamaRMSNorm(s))
     gqa-rotary        LlamaAttention up to SDPA: q, k projections (nn.Linear) viewed as heads of 128
                       (a quarter of them for k: grouped-query attention) and transposed, then
                       apply_rotary_pos_emb(q, k, cos, sin) with rotate_half's torch.cat: one window of two
                       chains of other head counts (segments) over strided views
     eager-attention   GPT2Attention with eager attention, prefill only: c_attn (Conv1D) split into head
                       views of 64, matmul(q, k^T) * 64 ** -0.5 + a causal mask shared by the heads,
                       softmax, matmul(., v), the output transposed back and made contiguous (the copies
                       of q, v and the output are relayout chains, the scores one softmax chain)
     groupnorm-silu    diffusers' ResnetBlock2D norm and activation: F.silu(nn.GroupNorm(32, 320)(x)) on
                       x [2, 320, s, s], TOKENS = s * s (4096: Stable Diffusion's UNet at 64 x 64)
     groupnorm-relu    HF's BiT (BitGroupNormActivation): F.relu(nn.GroupNorm(32, 256)(x)) on
                       x [32, 256, s, s], TOKENS = s * s (3136: BiT-M R50x1's first stage)
     temb-groupnorm-silu
                       diffusers' ResnetBlock2D after conv1: F.silu(norm2(x + temb[:, :, None, None])) on
                       x [2, 640, s, s] with the time embedding's projection temb [2, 640]
     batchnorm-relu    HF's ResNet (ResNetConvLayer, eval): F.relu(nn.BatchNorm2d(256)(x)) on x [32, 256, s, s]
                       (3136: ResNet-50's first stage), the norm with its running statistics (fused only with
                       HOTKERNEL_FUSION_BATCH_NORM on, the default, which the children keep)
     vae-groupnorm-silu
                       diffusers' VAE decoder's norm and activation: F.silu(nn.GroupNorm(32, 512)(x)) on
                       x [1, 512, s, s] (TOKENS 16384: 128 x 128, 32 groups of 262,144 elements)
     groupnorm         a lone norm (Note [Lone normalizations]): diffusers' attention block's
                       nn.GroupNorm(32, 512)(x) before its projection, on x [1, 512, s, s]
     batchnorm         a lone eval norm: torchvision's ResNet BatchNorm2d(256) before an in-place ReLU
                       (a chain's end), on x [32, 256, s, s] (HOTKERNEL_FUSION_BATCH_NORM on, as batchnorm-relu)
     bottleneck-tail   torchvision's Bottleneck after conv3 (eval): out = bn3(x); out += identity;
                       ReLU(inplace=True)(out) on x and identity [32, 256, s, s]: one chain with
                       HOTKERNEL_FUSION_BATCH_NORM and HOTKERNEL_FUSION_IN_PLACE on (the defaults)
     downsample-tail   HF's ResNet downsampling bottleneck after conv3 (eval): out = bn3(x); shortcut =
                       bn(conv1x1 stride 2 (block input)); out += shortcut; relu(out), on x [32, 512, s, s]
                       and the block input [32, 256, 2s, 2s]; the times include the convolution. With
                       HOTKERNEL_FUSION_PASS_CONVOLUTIONS on (the default; the children inherit it) the
                       convolution passes the pending bn3 (Note [Ops a chain lets pass]) and the rest is one
                       chain; with it 0, bn3 is a chain of its own and the shortcut's batch norm, += and ReLU
                       another
   on [1, TOKENS, hidden] (a prefill), or [TOKENS, 1, hidden] up to 256 tokens (a decode
   batch of one token per sequence); the group norm blocks on images of TOKENS pixels. The child
     a. computes eager references (hotkernel_set_enabled(0));
     b. learns: calls every block, with hotkernel on, exactly as it is timed below (the
        block between two foreign commands) HOTKERNEL_HOT_CALLS + 2 times, compiles the
        torch.compile versions (hotkernel off; the optimizer tunes meanwhile), then waits
        with hotkernel_wait_idle; repeated (at most 3 rounds, --tune-timeout seconds in all)
        until the status's hot_chains and ready_chains stop changing;
     c. probes each block with hotkernel on: the fusion counters per call (the status's
        fused_flushes, unfused_flushes, deferred_calls as fusedFlushesPerCall, ...: a block
        that never fuses shows 0 fused flushes) and
        the max error of every output against eager (and of torch.compile's);
     d. times eager (hotkernel off), hotkernel (served ops and fusion on) and
        torch.compile (dynamic=False, default mode, hotkernel off) of each block with the
        project's method: CUDA events around one call, L2 flushed before it (a write of
        twice the L2), the GPU kept busy by a sleep kernel longer than the block's host
        time while the call is enqueued (so the events time the kernels; the host time
        of each call is reported beside it), interleaved in rotating order; medians and
        95% CIs of each and of the paired ratios from hotkernel_compare_samples. The
        events close after the call's results: the engine flushes a pending chain before
        the closing event record (a foreign command), so the fused kernel is inside.
2. The host cost (--overhead, on by default): per configuration one child process, in
   --overhead-rounds rounds of alternating configurations:
     hotkernel-off   the preload with HOTKERNEL=0 (no trampoline at all)
     fusion-off      the preload with HOTKERNEL_FUSION=0 (the served ops' trampolines only)
     fusion-on       the preload with HOTKERNEL_FUSION=1 (a boxed trampoline on every
                     deferrable op); in this process also "fusion-on-switched-off":
                     hotkernel_set_enabled(0), the trampolines' bypass alone
   Each times, like dispatch_overhead.py, loops of --calls calls between two
   synchronizes (wall time per call; the GPU idles, so the host bounds it), interleaved
   op by op, --overhead-reps loops each: single ops on a bf16 [32, 128] tensor (the
   deferrable add, mul by a Python number, rsqrt, silu, .to(float32), pow, mean(-1),
   and clamp, which has no fusion trampoline), a decode-like block (LlamaRMSNorm of
   bf16 [8, 4096] then a small matmul that reads it: the chain's calls are the ops
   counted per block) and the matmul alone. In fusion-on the block's chain is learned
   and tuned first (a cache shared by the rounds), so its calls are deferred and fused.
   Per op: the median over processes of each configuration, and its difference to
   hotkernel-off; per chain op of the block: (block - matmul) / its calls.

Without CUDA nothing is timed: the script runs the same children at the smoke shapes
(every block in bfloat16) on the CPU (the preload's library starts, the C API answers, fusion has no CPU
trampolines), checks what they return, prints "nothing timed" and exits 0 (1 when a
check fails); --out is not written.

Output: "hotkernel-bench" v1 JSON, benchmark "fusion-engine":
  {format, version, benchmark, date, machine: {gpu, driver, torch, cuda, python},
   smoke, method, environment (the children's HOTKERNEL_* and LD_PRELOAD),
   engine: {status: {before, after} (the status's "fusion" objects), rounds: [{round,
            seconds, optimizerIdle, fusion}], chains: [{variant, decision}] (the tuned
            hotkernel::chain variants), compile: {ok, seconds, error?},
            results: [{block, dtype, tokens, hidden, intermediate, inputs: [shape...],
                       function, opsPerCall: {op: calls}, probe: {fusedFlushesPerCall,
                       unfusedFlushesPerCall, deferredCallsPerCall, passedCallsPerCall, failedFlushes},
                       fused (fusedFlushesPerCall > 0), maxErrorVsEager: {hotkernel,
                       compile: {abs, rel}} (rel: |d| / (|eager| + 1); null: non-finite),
                       accuracyOk, sleepUs, eagerUs, hotkernelUs, compileUs ({median, low,
                       high, n}), hotkernelSpeedupVsEager, hotkernelSpeedupVsCompile,
                       compileSpeedupVsEager, hostUs: {eager, hotkernel, compile},
                       timedFusion: {fusedFlushesPerCall, unfusedFlushesPerCall}, seconds,
                       error?}]},
   overhead: {shape, dtype, calls, reps, rounds, runs: [{label, round, results: [{name,
              kind (op | block | matmul), deferrable, opsPerCall, usPerCall: {median, low,
              high, n}}], fusion?, switchedOff?: {name: {usPerCall, ratio}}}],
              summary: [{name, kind, label, usPerCall, overheadUsVsHotkernelOff,
              usPerChainOp?}]},
   neverFused: ["block dtype tokens"...] (no fused flush in the probe), errors: [text...]}
Exit status: 1 when a child or a block failed, an output is beyond the accuracy bound
(16 units of the dtype's epsilon, relative as above), or with --require-fused a block
never fused on a GPU; else 0.
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_bench import Hotkernel, compare  # noqa: E402  (the C API and the paired-ratio statistics)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
BLOCKS = ("rmsnorm", "swiglu-mlp", "gelu-mlp", "residual-rmsnorm", "gqa-rotary", "eager-attention", "groupnorm-silu",
          "groupnorm-relu", "temb-groupnorm-silu", "vae-groupnorm-silu", "batchnorm-relu", "groupnorm", "batchnorm",
          "bottleneck-tail", "downsample-tail")
PREFILL_ONLY = ("eager-attention",)  # its scores are [heads, tokens, tokens]: no one-token decode
# The group norm blocks: (batch, channels, the activation) on square images of TOKENS pixels.
IMAGE_BLOCKS = {"groupnorm-silu": (2, 320, F.silu), "groupnorm-relu": (32, 256, F.relu),
                "temb-groupnorm-silu": (2, 640, F.silu), "vae-groupnorm-silu": (1, 512, F.silu),
                "batchnorm-relu": (32, 256, F.relu), "groupnorm": (1, 512, None), "batchnorm": (32, 256, None),
                "bottleneck-tail": (32, 256, None), "downsample-tail": (32, 512, None)}
# Issue 20's blocks at a Llama-8B-like hidden size: a prefill of 4096 tokens in both
# 16-bit dtypes where HF models use them, and a decode batch of 16 one-token sequences.
DEFAULT_CASES = ("rmsnorm:bfloat16:4096,rmsnorm:float16:4096,rmsnorm:bfloat16:16,"
                 "swiglu-mlp:bfloat16:4096,swiglu-mlp:bfloat16:16,"
                 "gelu-mlp:float16:4096,gelu-mlp:bfloat16:4096,gelu-mlp:float16:16,"
                 "residual-rmsnorm:bfloat16:4096,residual-rmsnorm:bfloat16:16,"
                 "gqa-rotary:bfloat16:4096,gqa-rotary:bfloat16:16,eager-attention:float16:1024,"
                 "groupnorm-silu:float16:4096,groupnorm-silu:float16:1024,groupnorm-relu:bfloat16:3136,"
                 "groupnorm-relu:bfloat16:196")
SMOKE_CASES = ("rmsnorm:bfloat16:64,swiglu-mlp:bfloat16:64,gelu-mlp:float16:64,residual-rmsnorm:bfloat16:64,"
               "gqa-rotary:bfloat16:64,eager-attention:float16:300,groupnorm-silu:float16:64,groupnorm-relu:bfloat16:16,"
               "temb-groupnorm-silu:float16:16,vae-groupnorm-silu:float16:64,batchnorm-relu:bfloat16:16,"
               "groupnorm:float16:64,batchnorm:bfloat16:16,bottleneck-tail:bfloat16:16,downsample-tail:bfloat16:16")
# Without CUDA: the smoke blocks in bfloat16 (the CPU's float16 GEMMs take a scalar path far slower than its
# bfloat16 ones, and the CPU run checks the script, not a dtype).
CPU_CASES = ("rmsnorm:bfloat16:64,swiglu-mlp:bfloat16:64,gelu-mlp:bfloat16:64,residual-rmsnorm:bfloat16:64,"
             "gqa-rotary:bfloat16:64,eager-attention:bfloat16:300,groupnorm-silu:bfloat16:64,groupnorm-relu:bfloat16:16,"
             "temb-groupnorm-silu:bfloat16:16,vae-groupnorm-silu:bfloat16:64,batchnorm-relu:bfloat16:16,"
             "groupnorm:bfloat16:64,batchnorm:bfloat16:16,bottleneck-tail:bfloat16:16,downsample-tail:bfloat16:16")
DECODE_TOKENS = 256  # up to this many tokens a case is a decode batch [TOKENS, 1, hidden]
ACCURACY_EPS_UNITS = 16
CONFIGS = ("hotkernel-off", "fusion-off", "fusion-on")
T0 = time.perf_counter()


def progress(msg):
    print(f"[fusion_engine_bench +{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------
# The blocks as HF transformers writes them
# ----------------------------------------------------------------------------

def llama_rms_norm(hidden_states, weight, eps=1e-6):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float32)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + eps)
    return weight * hidden_states.to(input_dtype)


def new_gelu(input):
    return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


def conv1d(x, weight, bias):
    """GPT-2's Conv1D.forward."""
    size_out = x.size()[:-1] + (weight.size(-1),)
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    return x.view(size_out)


FUNCTIONS = {
    "rmsnorm": "LlamaRMSNorm.forward(x)",
    "swiglu-mlp": "LlamaMLP.forward(x): down_proj(F.silu(gate_proj(x)) * up_proj(x)), nn.Linear without bias",
    "gelu-mlp": "GPT2MLP.forward(x): c_proj(NewGELUActivation(c_fc(x))), Conv1D (addmm with a bias)",
    "residual-rmsnorm": "s = residual + h; (s, LlamaRMSNorm(s)) (LlamaDecoderLayer's residual add and next norm)",
    "gqa-rotary": "LlamaAttention up to SDPA: q_proj / k_proj head views (k with a quarter of the heads), "
                  "apply_rotary_pos_emb(q, k, cos, sin)",
    "eager-attention": "GPT2Attention, eager: c_attn split into head views, softmax(q @ k^T * d ** -0.5 + causal mask) "
                       "@ v, transposed back and made contiguous",
    "groupnorm-silu": "diffusers' ResnetBlock2D: F.silu(nn.GroupNorm(32, 320, eps=1e-5)(x)) on [2, 320, s, s]",
    "groupnorm-relu": "HF's BitGroupNormActivation: F.relu(nn.GroupNorm(32, 256, eps=1e-5)(x)) on [32, 256, s, s]",
    "temb-groupnorm-silu": "diffusers' ResnetBlock2D: F.silu(norm2(x + temb[:, :, None, None])) on [2, 640, s, s]",
    "vae-groupnorm-silu": "diffusers' VAE decoder: F.silu(nn.GroupNorm(32, 512, eps=1e-5)(x)) on [1, 512, s, s]",
    "batchnorm-relu": "HF's ResNetConvLayer (eval): F.relu(nn.BatchNorm2d(256)(x)) on [32, 256, s, s]",
    "groupnorm": "diffusers' attention block: nn.GroupNorm(32, 512, eps=1e-5)(x) alone on [1, 512, s, s]",
    "batchnorm": "torchvision's ResNet (eval): nn.BatchNorm2d(256)(x) alone on [32, 256, s, s]",
    "bottleneck-tail": "torchvision's Bottleneck (eval): out = bn3(x); out += identity; ReLU(inplace=True)(out) on "
                       "[32, 256, s, s]",
    "downsample-tail": "HF's ResNet downsampling bottleneck (eval): out = bn3(x); out += bn(conv1x1/2(block input)); "
                       "relu(out) on [32, 512, s, s], the block input [32, 256, 2s, 2s]",
}


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary_tables(seq, head_dim, device, dtype):
    """LlamaRotaryEmbedding's cos and sin for positions 0..seq-1: [1, seq, head_dim]."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.arange(seq, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype)[None], emb.sin().to(dtype)[None]


class Case:
    """One block at one dtype and token count: its function (a closure over its weights),
    inputs and the shapes the JSON reports."""

    def __init__(self, block, dtype_name, tokens, hidden):
        self.block, self.dtype_name, self.tokens, self.hidden = block, dtype_name, tokens, hidden
        self.dtype = DTYPES[dtype_name]
        self.intermediate = {"swiglu-mlp": round(3.5 * hidden / 256) * 256 or 256,
                             "gelu-mlp": 4 * hidden}.get(block, 0)
        self.shape = (tokens, 1, hidden) if tokens <= DECODE_TOKENS else (1, tokens, hidden)
        if block in IMAGE_BLOCKS:
            side = math.isqrt(tokens)
            self.shape = (IMAGE_BLOCKS[block][0], IMAGE_BLOCKS[block][1], side, side)
        self.fn = None
        self.inputs = []

    def label(self):
        return f"{self.block} {self.dtype_name} {self.tokens} tokens"

    def build(self, device, seed):
        gen = torch.Generator(device=device).manual_seed(seed)
        h, i, dt = self.hidden, self.intermediate, self.dtype

        def randn(*shape, scale=1.0):
            return (torch.randn(shape, device=device, generator=gen) * scale).to(dt)

        def norm_weight():  # both signs around HF's ones
            return (torch.rand(h, device=device, generator=gen) * 2 - 0.5).to(dt)

        if self.block == "rmsnorm":
            w = norm_weight()
            self.fn = lambda x: llama_rms_norm(x, w)
            self.inputs = [randn(*self.shape)]
        elif self.block == "swiglu-mlp":
            wg, wu = randn(i, h, scale=h ** -0.5), randn(i, h, scale=h ** -0.5)
            wd = randn(h, i, scale=i ** -0.5)
            self.fn = lambda x: F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)
            self.inputs = [randn(*self.shape)]
        elif self.block == "gelu-mlp":
            w_fc, b_fc = randn(h, i, scale=h ** -0.5), randn(i, scale=0.1)
            w_proj, b_proj = randn(i, h, scale=i ** -0.5), randn(h, scale=0.1)
            self.fn = lambda x: conv1d(new_gelu(conv1d(x, w_fc, b_fc)), w_proj, b_proj)
            self.inputs = [randn(*self.shape)]
        elif self.block == "gqa-rotary":
            d = 128
            heads = max(h // d, 4)
            kv = heads // 4
            wq, wk = randn(heads * d, h, scale=h ** -0.5), randn(kv * d, h, scale=h ** -0.5)
            b, s = self.shape[0], self.shape[1]
            cos, sin = rotary_tables(s, d, device, dt)

            def gqa_rotary(x):
                q = F.linear(x, wq).view(b, s, heads, d).transpose(1, 2)
                k = F.linear(x, wk).view(b, s, kv, d).transpose(1, 2)
                c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
                return q * c + rotate_half(q) * sn, k * c + rotate_half(k) * sn
            self.fn = gqa_rotary
            self.inputs = [randn(*self.shape)]
        elif self.block in IMAGE_BLOCKS:
            channels, act = IMAGE_BLOCKS[self.block][1], IMAGE_BLOCKS[self.block][2] or (lambda t: t)
            w = (torch.rand(channels, device=device, generator=gen) * 2 - 0.5).to(dt)
            b = randn(channels, scale=0.1)
            if self.block == "bottleneck-tail":
                mean, var = randn(channels, scale=0.1), (torch.rand(channels, device=device, generator=gen) + 0.5).to(dt)

                def bottleneck_tail(x, identity):
                    out = F.batch_norm(x, mean, var, w, b, training=False, eps=1e-5)
                    out += identity
                    return F.relu(out, inplace=True)
                self.fn = bottleneck_tail
                self.inputs = [randn(*self.shape, scale=2.0), randn(*self.shape)]
            elif self.block == "downsample-tail":
                mean, var = randn(channels, scale=0.1), (torch.rand(channels, device=device, generator=gen) + 0.5).to(dt)
                w2 = (torch.rand(channels, device=device, generator=gen) + 0.5).to(dt)
                b2, mean2 = randn(channels, scale=0.1), randn(channels, scale=0.1)
                var2 = (torch.rand(channels, device=device, generator=gen) + 0.5).to(dt)
                w_ds = randn(channels, channels // 2, 1, 1, scale=(channels // 2) ** -0.5)

                def downsample_tail(x, block_in):
                    out = F.batch_norm(x, mean, var, w, b, training=False, eps=1e-5)
                    shortcut = F.batch_norm(F.conv2d(block_in, w_ds, stride=2), mean2, var2, w2, b2,
                                            training=False, eps=1e-5)
                    out += shortcut
                    return F.relu(out)
                self.fn = downsample_tail
                n, c, side = self.shape[0], self.shape[1], self.shape[2]
                self.inputs = [randn(*self.shape, scale=2.0), randn(n, c // 2, 2 * side, 2 * side)]
            elif self.block in ("batchnorm-relu", "batchnorm"):
                mean, var = randn(channels, scale=0.1), (torch.rand(channels, device=device, generator=gen) + 0.5).to(dt)
                self.fn = lambda x: act(F.batch_norm(x, mean, var, w, b, training=False, eps=1e-5))
                self.inputs = [randn(*self.shape, scale=2.0)]
            elif self.block == "temb-groupnorm-silu":
                self.fn = lambda x, temb: act(F.group_norm(x + temb[:, :, None, None], 32, w, b, 1e-5))
                self.inputs = [randn(*self.shape, scale=2.0), randn(self.shape[0], channels)]
            else:
                self.fn = lambda x: act(F.group_norm(x, 32, w, b, 1e-5))
                self.inputs = [randn(*self.shape, scale=2.0)]
        elif self.block == "eager-attention":
            d = 64
            heads = h // d
            w_attn, b_attn = randn(h, 3 * h, scale=h ** -0.5), randn(3 * h, scale=0.1)
            b, s = self.shape[0], self.shape[1]
            seen = torch.ones(s, s, dtype=torch.bool, device=device).tril()
            mask = torch.zeros(s, s, dtype=dt, device=device).masked_fill(~seen, torch.finfo(dt).min)[None, None]

            def eager_attention(x):
                q, k, v = conv1d(x, w_attn, b_attn).split(h, dim=2)
                q, k, v = (t.view(b, s, heads, d).transpose(1, 2) for t in (q, k, v))
                w = torch.matmul(q, k.transpose(-1, -2)) * d ** -0.5
                w = F.softmax(w + mask, dim=-1)
                return torch.matmul(w, v).transpose(1, 2).reshape(b, s, h).contiguous()
            self.fn = eager_attention
            self.inputs = [randn(*self.shape)]
        else:
            w = norm_weight()

            def residual_rms_norm(residual, hidden_states):
                hidden_states = residual + hidden_states
                return hidden_states, llama_rms_norm(hidden_states, w)
            self.fn = residual_rms_norm
            self.inputs = [randn(*self.shape), randn(*self.shape)]

    def __call__(self):
        out = self.fn(*self.inputs)
        return list(out) if isinstance(out, tuple) else [out]


def parse_cases(text, hidden):
    cases = []
    for item in text.split(","):
        try:
            block, dtype, tokens = item.strip().split(":")
            tokens = int(tokens)
        except ValueError:
            sys.exit(f"fusion_engine_bench: malformed case '{item}' (want block:dtype:TOKENS)")
        if block not in BLOCKS or dtype not in DTYPES or tokens < 1:
            sys.exit(f"fusion_engine_bench: unknown block or dtype, or bad token count in '{item}' "
                     f"(blocks: {', '.join(BLOCKS)}; dtypes: {', '.join(DTYPES)})")
        if block in IMAGE_BLOCKS and math.isqrt(tokens) ** 2 != tokens:
            sys.exit(f"fusion_engine_bench: '{item}': {block} takes a square image (TOKENS a square)")
        if block in PREFILL_ONLY and tokens <= DECODE_TOKENS:
            sys.exit(f"fusion_engine_bench: '{item}': {block} is a prefill block (more than {DECODE_TOKENS} tokens)")
        cases.append(Case(block, dtype, tokens, hidden))
    return cases


def count_ops(fn):
    """The ATen ops one call of fn dispatches, by name (a dispatch mode counts them)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func.overloadpacket.__name__) + ("." + func._overloadname if func._overloadname != "default"
                                                        else "")
            self.calls[name] = self.calls.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with Counter() as c:
        fn()
    return c.calls


def output_error(got, want):
    """Max abs and relative (|d| / (|want| + 1)) difference over the outputs; None when
    non-finite (JSON has no NaN)."""
    worst_abs, worst_rel = 0.0, 0.0
    for g, w in zip(got, want):
        d = (g.float() - w.float()).abs()
        a = d.max().item()
        r = (d / (w.float().abs() + 1)).max().item()
        if not (math.isfinite(a) and math.isfinite(r)):
            return {"abs": None, "rel": None}
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
    return {"abs": worst_abs, "rel": worst_rel}


def accuracy_bound(dtype):
    return ACCURACY_EPS_UNITS * torch.finfo(dtype).eps


# ----------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------

class CudaTimer:
    """The project's method for one call: L2 flushed, a sleep kernel keeps the GPU busy
    while the call is enqueued, CUDA events around it; the closing event is recorded
    after the call returned its results (still held), so a deferred chain is flushed
    (a foreign command) before it. The call's host time (perf_counter around the call
    and the closing record) is returned with it."""

    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")
        # Sleep cycles per microsecond, measured: torch.cuda._sleep counts clock cycles.
        torch.cuda._sleep(1000)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.cuda._sleep(10_000_000)
        e1.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 10_000_000 / max(e0.elapsed_time(e1) * 1e3, 1.0)

    def sync(self):
        torch.cuda.synchronize()

    def start(self, fn, sleep_us):
        self.flush.zero_()
        torch.cuda._sleep(int(sleep_us * self.cycles_per_us))
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        t0 = time.perf_counter()
        out = fn()
        e1.record()
        host = (time.perf_counter() - t0) * 1e6
        return (e0, e1), out, host

    @staticmethod
    def us(pending):
        e0, e1 = pending
        return e0.elapsed_time(e1) * 1e3


class CpuTimer:
    """perf_counter around one call (no CUDA: the script's logic is checked, nothing is a result)."""
    cycles_per_us = 0.0

    def sync(self):
        pass

    def start(self, fn, sleep_us):
        t0 = time.perf_counter()
        out = fn()
        host = (time.perf_counter() - t0) * 1e6
        return host, out, host

    @staticmethod
    def us(pending):
        return pending


@contextlib.contextmanager
def hotkernel_enabled(hk, on):
    previous = hk.set_enabled(1 if on else 0)
    try:
        yield
    finally:
        hk.set_enabled(0 if previous == 0 else 1)


def fusion_status(hk):
    return hk.status().get("fusion", {})


# The status document's fusion counters (hotkernel-status v2) and this report's names for them.
FUSION_COUNTERS = {"fused_flushes": "fusedFlushes", "unfused_flushes": "unfusedFlushes",
                   "deferred_calls": "deferredCalls", "passed_calls": "passedCalls"}


def counter_delta(before, after, calls):
    return {f"{name}PerCall": (after.get(k, 0) - before.get(k, 0)) / calls for k, name in FUSION_COUNTERS.items()}


# ----------------------------------------------------------------------------
# The engine child
# ----------------------------------------------------------------------------

def engine_child(args, device):
    hk = Hotkernel.load()
    if hk is None:
        raise RuntimeError("hotkernel is not loaded in the engine child (the preload did not start it)")
    timer = CudaTimer() if device.type == "cuda" else CpuTimer()
    cases = parse_cases(args.cases, args.hidden)
    doc = {"status": {"before": fusion_status(hk)}, "rounds": [], "results": []}
    progress(f"engine: fusion status at start {json.dumps(doc['status']['before'])}")
    if not doc["status"]["before"].get("on") or not doc["status"]["before"].get("covered"):
        doc["note"] = ("fusion is off or the shim's command hook does not cover this process (learning only): "
                       "no block can fuse")
    with torch.no_grad():
        for n, case in enumerate(cases):
            case.build(device, 1234 + n)
        # a. Eager references, and the ops each block dispatches.
        refs = []
        with hotkernel_enabled(hk, False):
            for case in cases:
                refs.append([t.clone() for t in case()])
                case.ops = count_ops(case)
        timer.sync()
        # b. Learning rounds; torch.compile in the first (the optimizer tunes meanwhile).
        hot_calls = int(min(max(float(os.environ.get("HOTKERNEL_HOT_CALLS", "50") or 50), 1), 10_000))
        compiled, compile_info = {}, {"ok": not args.no_compile and device.type == "cuda", "seconds": {}}
        if args.no_compile:
            compile_info["note"] = "--no-compile"
        elif device.type != "cuda":
            compile_info["note"] = "no CUDA device"
        start = time.perf_counter()
        previous = None
        for rnd in range(1, 4):
            t = time.perf_counter()
            for case in cases:
                for _ in range(hot_calls + 2):
                    timer.start(case, 200)
                timer.sync()
            if rnd == 1 and compile_info["ok"]:
                compile_all(hk, cases, compiled, compile_info, timer)
            time.sleep(0.2)  # an idle GPU opens the optimizer's gate
            idle = hk.wait_idle(max(args.tune_timeout - (time.perf_counter() - start), 0.0)) == 0
            fusion = fusion_status(hk)
            doc["rounds"].append({"round": rnd, "seconds": round(time.perf_counter() - t, 2), "optimizerIdle": idle,
                                  "fusion": fusion})
            progress(f"engine: learning round {rnd}: optimizer {'idle' if idle else 'still busy'}, "
                     f"hot chains {fusion.get('hot_chains')}, ready chains {fusion.get('ready_chains')}")
            done = previous is not None and all(fusion.get(k) == previous.get(k)
                                                for k in ("hot_chains", "ready_chains"))
            previous = fusion
            if done or not idle:
                break
        doc["compile"] = compile_info
        status = hk.status()
        doc["chains"] = [{"variant": t.get("variant"), "decision": t.get("decision")}
                         for t in status.get("tuned", []) if t.get("op") == "hotkernel::chain"]
        # c + d. Per block: probe, then time.
        failed = False
        for case, ref in zip(cases, refs):
            t = time.perf_counter()
            r = {"block": case.block, "dtype": case.dtype_name, "tokens": case.tokens, "hidden": case.hidden,
                 "intermediate": case.intermediate, "inputs": [list(x.shape) for x in case.inputs],
                 "function": FUNCTIONS[case.block], "opsPerCall": case.ops}
            try:
                run_case(hk, timer, case, ref, compiled.get(id(case)), args, r)
            except Exception as e:  # one broken block must not lose the others
                r["error"] = f"{type(e).__name__}: {str(e)[:2000]}"
            r["seconds"] = round(time.perf_counter() - t, 2)
            failed |= "error" in r or not r.get("accuracyOk", False)
            doc["results"].append(r)
            progress(f"engine: {case.label()}: {case_line(r)}")
        doc["status"]["after"] = fusion_status(hk)
    return doc, failed


def compile_all(hk, cases, compiled, info, timer):
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    with hotkernel_enabled(hk, False):
        for case in cases:
            t = time.perf_counter()
            try:
                fn = torch.compile(case.fn, dynamic=False)
                fn(*case.inputs)
                fn(*case.inputs)  # a recompile would show here, not in the timing
                timer.sync()
                compiled[id(case)] = fn
            except Exception as e:  # compile failing must not lose eager vs hotkernel
                info["ok"] = False
                info.setdefault("errors", {})[case.label()] = f"{type(e).__name__}: {str(e)[:1000]}"
            info["seconds"][case.label()] = round(time.perf_counter() - t, 1)
    progress(f"engine: torch.compile {sum(info['seconds'].values()):.0f} s for {len(cases)} blocks")


def run_case(hk, timer, case, ref, compiled, args, r):
    def call_compiled():
        out = compiled(*case.inputs)
        return list(out) if isinstance(out, tuple) else [out]

    # c. Probe: the fusion counters per call and the outputs against eager.
    before = fusion_status(hk)
    probe_calls = 5
    for _ in range(probe_calls):
        _, got, _ = timer.start(case, 200)
    timer.sync()
    after = fusion_status(hk)
    r["probe"] = counter_delta(before, after, probe_calls)
    r["probe"]["failedFlushes"] = after.get("failed_flushes", 0)
    r["fused"] = r["probe"]["fusedFlushesPerCall"] > 0
    with hotkernel_enabled(hk, False):  # the comparison's own ops are no block's
        r["maxErrorVsEager"] = {"hotkernel": output_error(got, ref)}
        del got
        if compiled is not None:
            r["maxErrorVsEager"]["compile"] = output_error(call_compiled(), ref)
    rel = r["maxErrorVsEager"]["hotkernel"]["rel"]
    r["accuracyBound"] = accuracy_bound(case.dtype)
    r["accuracyOk"] = rel is not None and rel <= r["accuracyBound"]

    # d. Timing: eager / hotkernel / compile interleaved in rotating order; each switches
    # hotkernel before its call's L2 flush, outside the timed region.
    impls = {"eager": (case, False), "hotkernel": (case, True)}
    if compiled is not None:
        impls["compile"] = (call_compiled, False)

    def start(name, sleep_us):
        fn, on = impls[name]
        hk.set_enabled(1 if on else 0)
        return timer.start(fn, sleep_us)

    # The sleep covers the slowest host time measured, twice over.
    host = {}
    for name in impls:
        times = []
        for _ in range(3):
            _, out, h = start(name, 200)
            times.append(h)
            del out
            timer.sync()
        host[name] = statistics.median(times)
    r["sleepUs"] = round(max(200.0, 2 * max(host.values())), 1)
    names = list(impls)
    samples = {n: [] for n in names}
    host_samples = {n: [] for n in names}
    before = fusion_status(hk)
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for n in order:
            pending, out, h = start(n, r["sleepUs"])
            del out
            timer.sync()
            samples[n].append(timer.us(pending))
            host_samples[n].append(h)
    hk.set_enabled(1)
    after = fusion_status(hk)
    r["timedFusion"] = counter_delta(before, after, args.reps)
    for n in names[1:]:
        c = compare(hk, samples["eager"], samples[n])
        r["eagerUs"], r[f"{n}Us"], r[f"{n}SpeedupVsEager"] = c["baseline"], c["candidate"], c["speedup"]
    if "compile" in names:
        r["hotkernelSpeedupVsCompile"] = compare(hk, samples["compile"], samples["hotkernel"])["speedup"]
    r["hostUs"] = {n: round(statistics.median(v), 2) for n, v in host_samples.items()}


def fmt_ci(m, unit="x"):
    return f"{m['median']:.2f}{unit} [{m['low']:.2f}, {m['high']:.2f}]" if m else "-"


def case_line(r):
    if "error" in r:
        return f"ERROR {r['error'][:300]}"
    p, err = r["probe"], r["maxErrorVsEager"]
    s = (f"fused {p['fusedFlushesPerCall']:.2f} / unfused {p['unfusedFlushesPerCall']:.2f} flushes per call | "
         f"eager {r['eagerUs']['median']:.1f} us, hotkernel {r['hotkernelUs']['median']:.1f} us")
    if "compileUs" in r:
        s += f", compile {r['compileUs']['median']:.1f} us"
    s += f" | hk vs eager {fmt_ci(r['hotkernelSpeedupVsEager'])}"
    if "hotkernelSpeedupVsCompile" in r:
        s += f", hk vs compile {fmt_ci(r['hotkernelSpeedupVsCompile'])}"
    s += f" | max rel err vs eager {err['hotkernel']['rel']}" + ("" if r["accuracyOk"] else " (BEYOND THE BOUND)")
    return s


# ----------------------------------------------------------------------------
# The overhead child
# ----------------------------------------------------------------------------

OVERHEAD_OPS = {  # name -> (fn of x, y, deferrable)
    "add": (lambda x, y: x + y, True),
    "mul-scalar": (lambda x, y: x * 0.5, True),
    "rsqrt": (lambda x, y: torch.rsqrt(x), True),
    "silu": (lambda x, y: F.silu(x), True),
    "to-float32": (lambda x, y: x.to(torch.float32), True),
    "pow": (lambda x, y: x.pow(2), True),
    "mean": (lambda x, y: x.mean(-1, keepdim=True), True),
    "clamp": (lambda x, y: x.clamp(min=0), False),
}


def overhead_child(args, device, label):
    hk = Hotkernel.load() if label != "hotkernel-off" else None
    dt = torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(7)
    x = torch.randn(args.overhead_shape, device=device, generator=gen).to(dt)
    y = torch.randn(args.overhead_shape, device=device, generator=gen).to(dt)
    hidden = 4096 if not args.smoke else 512
    bx = torch.randn(8, hidden, device=device, generator=gen).to(dt)
    bw = (torch.rand(hidden, device=device, generator=gen) + 0.5).to(dt)
    wp = (torch.randn(hidden, 128, device=device, generator=gen) * hidden ** -0.5).to(dt)

    def block():
        h = llama_rms_norm(bx, bw)
        return h @ wp  # reads h: the chain's output is live when the matmul flushes it

    loops = {n: (lambda f=f: f(x, y)) for n, (f, _) in OVERHEAD_OPS.items()}
    loops["rmsnorm-block"] = block
    loops["matmul"] = lambda: bx @ wp
    chain_ops = sum(count_ops(lambda: llama_rms_norm(bx, bw)).values())
    kinds = {n: ("op", d) for n, (_, d) in OVERHEAD_OPS.items()}
    kinds.update({"rmsnorm-block": ("block", True), "matmul": ("matmul", False)})
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    doc = {"label": label}
    if hk and label == "fusion-on":  # learn and tune the block's chain first
        hot_calls = int(min(max(float(os.environ.get("HOTKERNEL_HOT_CALLS", "50") or 50), 1), 10_000))
        for _ in range(2):
            for _ in range(hot_calls + 2):
                block()
            sync()
            time.sleep(0.2)
            hk.wait_idle(args.tune_timeout)
        before = fusion_status(hk)
        for _ in range(10):
            block()
        sync()
        doc["fusion"] = counter_delta(before, fusion_status(hk), 10)
    for f in loops.values():  # warm-up: first-call costs out of the timing
        for _ in range(50):
            f()
    sync()

    def time_loops(names):
        samples = {n: [] for n in names}
        for _ in range(args.overhead_reps):
            for n in names:
                f = loops[n]
                sync()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    f()
                sync()
                samples[n].append((time.perf_counter() - t0) / args.calls * 1e6)
        return samples

    samples = time_loops(list(loops))
    doc["results"] = [{"name": n, "kind": kinds[n][0], "deferrable": kinds[n][1],
                       "opsPerCall": chain_ops if n == "rmsnorm-block" else 1,
                       "usPerCall": summary(s)} for n, s in samples.items()]
    if hk and label == "fusion-on":
        # The same process with hotkernel switched off (the trampolines' bypass), paired with on.
        on, off = {n: [] for n in loops}, {n: [] for n in loops}
        for _ in range(2):
            a = time_loops(list(loops))
            with hotkernel_enabled(hk, False):
                b = time_loops(list(loops))
            for n in loops:
                on[n] += a[n]
                off[n] += b[n]
        doc["switchedOff"] = {n: {"usPerCall": summary(off[n]), "onOverOff": compare(hk, on[n], off[n])["speedup"]}
                              for n in loops}
    for res in doc["results"]:
        progress(f"overhead {label}: {res['name']:>14} {res['usPerCall']['median']:7.2f} us/call "
                 f"[{res['usPerCall']['low']:.2f}, {res['usPerCall']['high']:.2f}]")
    return doc, False


def summary(s):
    return {"median": statistics.median(s), "low": min(s), "high": max(s), "n": len(s)}


def overhead_summary(runs):
    """Per (name, label): the median over processes of their medians; the difference to
    hotkernel-off; per chain op of the block: (block - matmul) / its calls."""
    by = {}
    meta = {}
    for run in runs:
        for res in run.get("results", []):
            by.setdefault((res["name"], run["label"]), []).append(res["usPerCall"]["median"])
            meta[res["name"]] = (res["kind"], res["opsPerCall"])
        for name, off in run.get("switchedOff", {}).items():
            by.setdefault((name, run["label"] + "-switched-off"), []).append(off["usPerCall"]["median"])
    med = {k: statistics.median(v) for k, v in by.items()}
    rows = []
    for (name, label), us in sorted(med.items()):
        row = {"name": name, "kind": meta[name][0], "label": label, "usPerCall": us}
        base = med.get((name, "hotkernel-off"))
        if base is not None:
            row["overheadUsVsHotkernelOff"] = us - base
        if name == "rmsnorm-block" and ("matmul", label) in med:
            row["usPerChainOp"] = (us - med[("matmul", label)]) / meta[name][1]
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------
# The parent: children, merge, output
# ----------------------------------------------------------------------------

def default_preload():
    build = os.environ.get("HOTKERNEL_BUILD_DIR") or os.path.join(ROOT, "build")
    return os.path.join(build, "lib", "libhotkernel_preload.so")


def child_env(preload, extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOTKERNEL_CACHE_PATH", "HOTKERNEL_REMOTE_CACHE", "HOTKERNEL", "HOTKERNEL_FUSION")}
    env["LD_PRELOAD"] = preload + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_child(role, label, env, args, work):
    out = os.path.join(work, f"{role}-{label}-{len(os.listdir(work))}.json")
    cmd = [sys.executable, os.path.abspath(__file__)] + args.argv + ["--child", role, "--label", label,
                                                                     "--child-out", out]
    progress(f"child {role} {label}: HOTKERNEL={env.get('HOTKERNEL', '1')} "
             f"HOTKERNEL_FUSION={env.get('HOTKERNEL_FUSION', '0')}")
    try:
        proc = subprocess.run(cmd, env=env, timeout=args.child_timeout)
    except subprocess.TimeoutExpired:
        return None, f"{role} {label}: killed after --child-timeout {args.child_timeout:.0f} s"
    if not os.path.exists(out):
        return None, f"{role} {label}: exited {proc.returncode} without a result"
    with open(out) as f:
        doc = json.load(f)
    error = None if proc.returncode == 0 else f"{role} {label}: exited {proc.returncode}"
    return doc, error


def machine(device):
    info = {"device": device.type, "gpu": None, "driver": None, "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            info["driver"] = out.splitlines()[0] if out else "unknown"
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
    return info


def markdown(doc):
    lines = ["| block | dtype | tokens | fused / unfused flushes per call | eager us | hotkernel us | compile us | "
             "hk vs eager | hk vs compile | compile vs eager | host us eager / hk / compile | "
             "max rel err vs eager (hk / compile) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc.get("engine", {}).get("results", []):
        head = f"| {r['block']} | {r['dtype']} | {r['tokens']} |"
        if "error" in r:
            lines.append(f"{head} error: {r['error'][:200]} |")
            continue
        p, err, host = r["probe"], r["maxErrorVsEager"], r["hostUs"]
        compile_us = f"{r['compileUs']['median']:.1f}" if "compileUs" in r else "-"
        compile_err = err.get("compile", {}).get("rel")
        hosts = " / ".join(f"{host[n]:.0f}" if n in host else "-" for n in ("eager", "hotkernel", "compile"))
        lines.append(f"{head} {p['fusedFlushesPerCall']:.2f} / {p['unfusedFlushesPerCall']:.2f} | "
                     f"{r['eagerUs']['median']:.1f} | {r['hotkernelUs']['median']:.1f} | {compile_us} | "
                     f"{fmt_ci(r['hotkernelSpeedupVsEager'])} | {fmt_ci(r.get('hotkernelSpeedupVsCompile'))} | "
                     f"{fmt_ci(r.get('compileSpeedupVsEager'))} | {hosts} | {fmt_num(err['hotkernel']['rel'])} / "
                     f"{fmt_num(compile_err)} |")
    rows = doc.get("overhead", {}).get("summary", [])
    if rows:
        lines += ["", "| loop | kind | configuration | us per call | vs hotkernel-off | us per chain op |",
                  "|---|---|---|---|---|---|"]
        for row in rows:
            vs = row.get("overheadUsVsHotkernelOff")
            lines.append(f"| {row['name']} | {row['kind']} | {row['label']} | {row['usPerCall']:.2f} | "
                         f"{'-' if vs is None else f'{vs:+.2f}'} | {fmt_num(row.get('usPerChainOp'))} |")
    return "\n".join(lines)


def fmt_num(v):
    return "-" if v is None else f"{v:.3g}"


def parent(args, device):
    if not os.path.exists(args.preload):
        sys.exit(f"fusion_engine_bench: no preload shim at {args.preload} (build the project, or pass --preload)")
    if device.type != "cuda":
        print("fusion_engine_bench: no CUDA device: nothing timed; running the children at the smoke shapes on the "
              "CPU to check the script (CPU numbers are no result, the engine serves the CUDA key only, so nothing is deferred)", flush=True)
    work = tempfile.mkdtemp(prefix="fusion_engine_bench.")
    doc = {"format": "hotkernel-bench", "version": 1, "benchmark": "fusion-engine",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": machine(device), "smoke": args.smoke,
           "method": "blocks: eager (hotkernel_set_enabled(0)), hotkernel (fusion on) and torch.compile (dynamic="
                     "False, hotkernel off) interleaved in rotating order, CUDA events around each call, L2 flushed "
                     "before it, a sleep kernel longer than twice the host time keeping the GPU busy while the call "
                     "is enqueued; medians and 95% CIs of paired ratios (hotkernel_compare_samples); fusion counters "
                     "from hotkernel_status_json. Host cost: one process per configuration, loops of calls between "
                     "synchronizes, wall time per call, medians over loops and processes",
           "reps": args.reps, "environment": {}, "errors": []}
    failed = False
    try:
        if args.engine:
            env = child_env(args.preload, {"HOTKERNEL_FUSION": "1",
                                           "HOTKERNEL_CACHE_DIR": os.path.join(work, "engine-cache")})
            doc["environment"] = {k: v for k, v in sorted(env.items()) if k.startswith("HOTKERNEL_") or k == "LD_PRELOAD"}
            engine, error = run_child("engine", "fusion-on", env, args, work)
            if error:
                doc["errors"].append(error)
            if engine:
                doc["engine"] = engine
                failed |= engine.get("failed", False)
        if args.overhead:
            shared_cache = os.path.join(work, "overhead-cache")
            runs = []
            for rnd in range(1, args.overhead_rounds + 1):
                for label in CONFIGS:
                    extra = {"HOTKERNEL_CACHE_DIR": shared_cache,
                             **({"HOTKERNEL": "0"} if label == "hotkernel-off" else {}),
                             "HOTKERNEL_FUSION": "1" if label == "fusion-on" else "0"}
                    run, error = run_child("overhead", label, child_env(args.preload, extra), args, work)
                    if error:
                        doc["errors"].append(error)
                    if run:
                        run["round"] = rnd
                        runs.append(run)
            doc["overhead"] = {"shape": list(args.overhead_shape), "dtype": "bfloat16", "calls": args.calls,
                               "reps": args.overhead_reps, "rounds": args.overhead_rounds, "runs": runs,
                               "summary": overhead_summary(runs)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed |= bool(doc["errors"])
    never = [f"{r['block']} {r['dtype']} {r['tokens']}" for r in doc.get("engine", {}).get("results", [])
             if not r.get("fused")]
    doc["neverFused"] = never
    if args.require_fused and device.type == "cuda":
        if never:
            doc["errors"].append(f"--require-fused: never fused: {', '.join(never)}")
            failed = True
    doc["seconds"] = round(time.perf_counter() - T0, 1)
    print()
    print(markdown(doc))
    if never:
        print(f"\nblocks that never fused: {', '.join(never)}")
    for e in doc["errors"]:
        print(f"ERROR {e}")
    if device.type != "cuda":
        # The document is built and serialized as on a GPU, then dropped: nothing in it is a result.
        json.loads(json.dumps(doc, allow_nan=False))
        print("fusion_engine_bench: nothing timed (no CUDA device)" +
              (f"; {args.out} not written" if args.out else ""))
        return 1 if failed else 0
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.out + ".tmp", args.out)
        print(f"\nwritten {args.out}")
    return 1 if failed else 0


def parse_shape(text):
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"bad shape '{text}': expected e.g. 32x128")
    return dims


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=None, help=f"comma list of block:dtype:TOKENS (default {DEFAULT_CASES})")
    ap.add_argument("--hidden", type=int, default=None, help="hidden size (default 4096; --smoke 512)")
    ap.add_argument("--reps", type=int, default=31, help="timed rounds of eager / hotkernel / compile per block")
    ap.add_argument("--tune-timeout", type=float, default=240.0,
                    help="seconds from the first learning call to the optimizer's last decision (compiling included)")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--no-engine", dest="engine", action="store_false", help="only the host cost")
    ap.add_argument("--no-overhead", dest="overhead", action="store_false", help="only the blocks")
    ap.add_argument("--overhead-rounds", type=int, default=2, help="processes per configuration (alternating)")
    ap.add_argument("--overhead-reps", type=int, default=15, help="timed loops per op in each process")
    ap.add_argument("--overhead-shape", type=parse_shape, default=(32, 128), help="the single ops' tensor shape")
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    ap.add_argument("--require-fused", action="store_true", help="exit 1 when a block never fused (on a GPU)")
    ap.add_argument("--preload", default=default_preload(), help="libhotkernel_preload.so")
    ap.add_argument("--child-timeout", type=float, default=900.0, help="seconds a child may run")
    ap.add_argument("--smoke", action="store_true", help=f"tiny shapes ({SMOKE_CASES}, hidden 512), few rounds")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", choices=("engine", "overhead"), help=argparse.SUPPRESS)
    ap.add_argument("--label", default="", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.argv = list(sys.argv[1:])
    parse_cases(args.cases or DEFAULT_CASES, args.hidden or 4096)  # usage errors before any child starts
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda":
        # Without CUDA the children check the script at the smoke shapes (nothing is a result).
        args.smoke, args.cases, args.hidden = True, CPU_CASES, 512
        args.argv += ["--smoke", "--cases", CPU_CASES, "--hidden", "512"]
    if args.smoke:
        args.reps, args.calls = min(args.reps, 7), min(args.calls, 200)
        args.overhead_rounds, args.overhead_reps = min(args.overhead_rounds, 1), min(args.overhead_reps, 5)
    args.hidden = args.hidden or (512 if args.smoke else 4096)
    args.cases = args.cases or (SMOKE_CASES if args.smoke else DEFAULT_CASES)
    if args.reps < 7:
        sys.exit("fusion_engine_bench: --reps must be >= 7 (the confidence interval needs them)")
    if args.hidden < 8 or args.hidden % 8 or args.calls < 1 or args.overhead_reps < 3 or args.overhead_rounds < 1:
        sys.exit("fusion_engine_bench: --hidden must be a multiple of 8, --calls >= 1, --overhead-reps >= 3, "
                 "--overhead-rounds >= 1")
    if not args.child:
        return parent(args, device)
    try:
        run = engine_child if args.child == "engine" else (lambda a, d: overhead_child(a, d, args.label))
        doc, failed = run(args, device)
    except Exception as e:
        doc, failed = {"label": args.label, "error": f"{type(e).__name__}: {str(e)[:2000]}"}, True
        progress(f"{args.child} {args.label}: ERROR {doc['error'][:300]}")
    doc["failed"] = failed
    with open(args.child_out, "w") as f:
        json.dump(doc, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
