#!/usr/bin/env python3
"""Chains over strided and broadcast views end to end on a GPU (ctest fusion_layout_gpu_test, label gpu).

An attention block as HF writes it, under the preload with HOTKERNEL_FUSION=1 in a fresh cache:
  - q, k, v are head views of one fused QKV projection (GPT-2's c_attn), k and v with fewer heads
    than q (grouped-query attention, as Llama's);
  - HF's rotary embedding on q and then on k in one window: the window is refused whole and its two
    segments are learned (Note [Segments of a refused window]), each a strided variant; HF's repeat_kv
    copies k and v out of an expanded view (a relayout copy with a broadcast dim);
  - GPT-2's eager scores: q @ k^T (matmul copies q: a relayout copy, Note [Relayout copies]), * scale,
    + a causal mask [b, 1, s, s] shared by the heads, softmax (Note [Softmax in a chain]);
  - the probabilities @ v (matmul copies v), the output transposed back to [b, s, hidden] (a copy).
The engine learns these chains, tunes them on memory in their layouts (Note [Chain values in a layout])
and swaps fused kernels in. Checks: strided variants were tuned and at least one was accepted, fused
flushes happened and no flush failed, and the block's output is within the fused kernels' tolerance of
the same block with hotkernel switched off (ATen op by op). Then torch.profiler around the rotary
embedding of q, left pending, and cuDNN's attention after it (Note [Ops that flush first]): the profile's
results build (a flush from inside cuDNN's runtime call made its collection fail) and the attention's output
is within tolerance of eager's.
Exit 77 (ctest SKIP_RETURN_CODE) without a CUDA device.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusion_child  # noqa: E402

lib = fusion_child.start(__file__)

import torch  # noqa: E402


def status():
    return fusion_child.status(lib)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


torch.manual_seed(0)
dev, dt = "cuda", torch.float16
batch, seq, heads, kv_heads, head_dim = 4, 256, 8, 4, 64
hidden = heads * head_dim
qkv_width = (heads + 2 * kv_heads) * head_dim
x0 = torch.randn(batch, seq, hidden, device=dev, dtype=dt)
w_qkv = torch.randn(hidden, qkv_width, device=dev, dtype=dt) / math.sqrt(hidden)
angles = torch.arange(seq, device=dev, dtype=torch.float32)[:, None] / (10000 ** (
    torch.arange(0, head_dim, 2, device=dev, dtype=torch.float32) / head_dim))
emb = torch.cat((angles, angles), dim=-1)
cos = emb.cos().to(dt)[None].expand(batch, seq, head_dim).contiguous()
sin = emb.sin().to(dt)[None].expand(batch, seq, head_dim).contiguous()
seen = torch.ones(seq, seq, dtype=torch.bool, device=dev).tril()
mask = torch.zeros(seq, seq, dtype=dt, device=dev).masked_fill(~seen, torch.finfo(dt).min)
mask = mask[None, None].expand(batch, 1, seq, seq).contiguous()


def repeat_kv(x, n):
    """HF's repeat_kv for eager attention: the reshape copies the expanded view (a broadcast relayout)."""
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def block(x):
    qkv = x @ w_qkv  # [b, s, (h + 2 kv) d]
    q, k, v = qkv.split([hidden, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q = q.view(batch, seq, heads, head_dim).transpose(1, 2)
    k = k.view(batch, seq, kv_heads, head_dim).transpose(1, 2)
    v = v.view(batch, seq, kv_heads, head_dim).transpose(1, 2)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * c + rotate_half(q) * s  # HF's apply_rotary_pos_emb: q, then k, in one window
    k = k * c + rotate_half(k) * s
    k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
    w = torch.matmul(q, k.transpose(-1, -2)) * head_dim ** -0.5
    w = w + mask
    w = torch.nn.functional.softmax(w, dim=-1)
    o = torch.matmul(w, v)
    return o.transpose(1, 2).reshape(batch, seq, hidden).contiguous()


def run():
    with torch.no_grad():
        return block(x0)


want, got = fusion_child.eager_then_fused(lib, run, 900.0)
st = status()
fusion = st.get("fusion", {})
chains = [t for t in st["tuned"] if t.get("op") == "hotkernel::chain"]
print("fusion status:", json.dumps({k: v for k, v in fusion.items() if k != "patterns"}))
print("chains tuned:", json.dumps([{k: t.get(k) for k in ("variant", "decision")} for t in chains]))
assert fusion.get("on") and fusion.get("covered"), fusion
assert fusion.get("failed_flushes", 0) == 0, fusion
strided = [t for t in chains if ";layout=" in t.get("variant", "")]
assert strided, "no chain variant with a layout was tuned"
assert any(t.get("decision") == "kernel" for t in strided), "no strided chain variant was accepted"
assert fusion.get("fused_flushes", 0) >= 1, fusion
segmented = [p for p in fusion.get("patterns", {}).values() if p.get("segments")]
assert segmented, "the rotary window on q and k of fewer heads was not segmented"

err = ((got.float() - want.float()).abs() / (want.float().abs() + 1)).max().item()
print(f"fused block vs eager: worst relative difference {err:.4g}")
assert math.isfinite(err) and err < 0.1, err  # fp16 through a matmul after the fused chains
# torch.profiler over a chain pending when cuDNN's attention starts (Note [Ops that flush first]).
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

k_full = torch.randn(batch, heads, seq, head_dim, device=dev, dtype=dt)
v_full = torch.randn(batch, heads, seq, head_dim, device=dev, dtype=dt)


def rotary_then_attention(x):
    q = (x @ w_qkv)[..., :hidden].view(batch, seq, heads, head_dim).transpose(1, 2)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * c + rotate_half(q) * s  # the learned segment of q: deferred, pending at the attention
    return torch.nn.functional.scaled_dot_product_attention(q, k_full, v_full)


with torch.no_grad(), sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    lib.hotkernel_set_enabled(0)
    ref = rotary_then_attention(x0)
    lib.hotkernel_set_enabled(1)
    before = status().get("fusion", {}).get("fused_flushes", 0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = rotary_then_attention(x0)
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}  # raised inside the profiler's collection before the fix
after = status().get("fusion", {}).get("fused_flushes", 0)
assert after > before, ("the rotary chain was not fused under the profiler", before, after)
assert any("cudnn" in n for n in names), sorted(names)
err = ((out.float() - ref.float()).abs() / (ref.float().abs() + 1)).max().item()
print(f"rotary then cuDNN attention under torch.profiler: {after - before} fused flushes, worst relative "
      f"difference {err:.4g}")
assert math.isfinite(err) and err < 0.1, err
print("fusion_layout_gpu_test: ok")
