#!/usr/bin/env python3
"""fusion_bench: the fused-chain kernels of hotkernel::chain (kernels/chain/)
against the same chains in eager PyTorch AND torch.compile, measured side by
side in one process on one GPU. No preload: the kernels are launched directly.

    python3 bench/fusion_bench.py [--tool build/bin/chain_kernel_tool] --out fusion.json
    python3 bench/fusion_bench.py --smoke        # tiny shapes; without CUDA: the tool path only

Each case is a chain written as HF transformers writes it:
  rmsnorm            LlamaRMSNorm.forward: x.to(f32); v = x.pow(2).mean(-1, keepdim=True);
                     x * torch.rsqrt(v + eps); w * x.to(dtype)   (inputs x, weight)
  swiglu             LlamaMLP's activation: F.silu(g) * u         (inputs g, u)
  newgelu            GPT-2's NewGELUActivation: 0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0))))
  residual-add-cast  s = residual + h; (s, s.to(float32)): a residual add and the next norm's cast
  residual-layernorm GPT-2's and BERT's s = x + residual; (s, F.layer_norm(s, (C,), weight, bias, 1e-5)): a
                     residual add into nn.LayerNorm, the sum kept (inputs x, residual, weight, bias)
  rotary             HF's apply_rotary_pos_emb for one of q or k: x = proj.view(b, s, h, d).transpose(1, 2);
                     x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1), rotate_half with torch.cat
                     (inputs proj [b, s, h * d], cos, sin [b, s, d]; the case's shape is BxHxSxD); the fused
                     kernel reads x, its halves and the tables in place through the chain's layout
                     (Note [Chain layouts]) and writes an output with eager's strides
  attention-softmax  HF's eager attention scores (modeling_gpt2's eager_attention_forward):
                     softmax(scores * 0.125 + mask, dim=-1), scores [b, h, q, k] (a matmul's result), the
                     additive causal mask [b, 1, q, k] (0 or the dtype's min) shared by the heads; the case's
                     shape is BxHxQxK; the fused kernel reads the mask once per batch through the chain's layout
For each case the script
  1. runs chain_kernel_tool (bench/chain_kernel_tool.cpp) for the case's chain, dtype and
     shape at the GPU's architecture: one cubin per parameter point of the chain kind's
     default set, and a manifest (Note [Chain kernel manifest, v2]) with each point's
     launch geometry and argument layout;
  2. loads each cubin with the CUDA driver API (ctypes, libcuda.so.1) and launches it on
     torch's current stream into NaN-filled outputs, checking the layout against the
     tensors it passes (dtype, shape class, alignment);
  3. checks each point's outputs against eager and a float64 reference
     (Note [Fusion bench tolerance] below);
  4. times every correct point (CUDA events, L2 flushed, rotating order) and keeps the
     fastest;
  5. times eager, the fastest fused point and torch.compile (default mode, dynamic=False)
     of the same Python function with the project's benchmark method (bench/ops_bench.py's
     Timer: CUDA events around each call, L2 flushed by a write of twice the L2 before it,
     the GPU kept busy while the call is enqueued, so host time is not counted),
     interleaved in rotating order; medians and 95% CIs of each and of the paired ratios
     come from hotkernel_compare_samples when the library is loaded, else from its Python
     twin (bench/model_bench.py).
Also: the ideal traffic of the chain (each input read once, each output written once),
GB/s and the share of the copy bandwidth measured in the same run, and each
implementation's max error against a float64 reference.

A point that fails (compile error, launch error, wrong output) is recorded with its
reason and left out; a case whose every point fails is an error. The exit status is 1
when anything failed, with the JSON still written. Without CUDA the script runs the
tool for every case, checks each manifest against the tensors it would pass and each
cubin, and on cases of at most 2^20 elements the accuracy check itself on the CPU
(eager and the rounded float64 reference pass it, a value 3 ulp off and an unwritten
element fail it); it says that nothing was timed and exits 0 (1 when one of those
checks fails).

Output: "hotkernel-bench" v1 JSON, benchmark "fusion", one result per case (written
after each case), and a Markdown table on stdout.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_bench import Hotkernel, compare  # noqa: E402  (paired-ratio statistics)
from ops_bench import Timer, copy_bandwidth, machine  # noqa: E402  (the benchmark method)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
MANIFEST_FORMAT, MANIFEST_VERSION = "hotkernel-chain-kernels", 2
ULPS = 2  # Note [Fusion bench tolerance]
DEVICE = "cuda"  # where run_case puts its tensors (a test of the script's logic may move them)
MANTISSA_BITS = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}

# The issue's shapes (issue 20): RMSNorm [4096, 4096], SwiGLU [16384, 8192], GPT-2's
# new-GELU [8192, 3072] in both 16-bit dtypes, and a residual add + cast of a Llama-like
# prefill's hidden states; HF's rotary on q of [1, 4096, 32, 128] (BxHxSxD 1x32x4096x128) and on
# the k of a model with 8 key-value heads; GPT-2's k^T copied contiguous by matmul (its prefill of
# 16 x 512 tokens, 12 heads of 64).
DEFAULT_CASES = ("rmsnorm:bfloat16:4096x4096,swiglu:bfloat16:16384x8192,newgelu:bfloat16:8192x3072,"
                 "newgelu:float16:8192x3072,residual-add-cast:bfloat16:4096x4096,"
                 "residual-layernorm:bfloat16:4096x768,residual-layernorm:float16:16384x1024,"
                 "rotary:bfloat16:1x32x4096x128,rotary:bfloat16:1x8x4096x128,"
                 "attention-softmax:float16:16x12x512x512,transpose-copy:float16:16x12x512x64")
# --smoke: an odd row count (a last CTA of row kernels with fewer rows), short rows.
SMOKE_CASES = ("rmsnorm:bfloat16:37x512,swiglu:bfloat16:37x512,newgelu:bfloat16:37x384,"
               "newgelu:float16:37x384,residual-add-cast:bfloat16:37x512,residual-layernorm:bfloat16:37x768,"
               "rotary:float16:2x4x37x64,"
               "attention-softmax:float16:2x3x37x64,transpose-copy:float16:2x3x37x24")
ATTENTION_SCALE = 0.125  # GPT-2's head_dim ** -0.5
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, GPT-2's layer_norm_epsilon


# ----------------------------------------------------------------------------
# The chains as HF writes them, their inputs and float64 references
# ----------------------------------------------------------------------------

def llama_rms_norm(eps):
    def rms_norm(hidden_states, weight):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + eps)
        return weight * hidden_states.to(input_dtype)
    return rms_norm


def swiglu(g, u):
    return F.silu(g) * u


def new_gelu(input):
    return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


def residual_add_cast(residual, h):
    s = residual + h
    return s, s.to(torch.float32)


def residual_layer_norm(x, residual, weight, bias):
    s = x + residual
    return s, F.layer_norm(s, (s.shape[-1],), weight, bias, LAYER_NORM_EPS)


def rotate_half(x):
    """HF transformers' rotate_half."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def attention_softmax(scores, mask):
    """modeling_gpt2's eager_attention_forward from the scores to the probabilities."""
    return torch.softmax(scores * ATTENTION_SCALE + mask, dim=-1)


def hf_kt_copy(batch, heads, seq, head_dim):
    """matmul(q, k.transpose(-1, -2))'s copy of k^T in modeling_gpt2's eager attention, k a head
    view of the fused QKV projection (c_attn's three parts)."""
    def kt_copy(qkv):
        k = qkv[..., heads * head_dim:2 * heads * head_dim].view(batch, seq, heads, head_dim).transpose(1, 2)
        return k.transpose(-1, -2).contiguous()
    return kt_copy


def hf_rotary(batch, heads, seq, head_dim):
    def rotary(proj, cos, sin):
        x = proj.view(batch, seq, heads, head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return x * cos + rotate_half(x) * sin
    return rotary


# What each case's eager and torch.compile sides run (the JSON's "function").
FUNCTIONS = {
    "rmsnorm": "LlamaRMSNorm.forward: x.to(float32); v = x.pow(2).mean(-1, keepdim=True); "
               "x = x * torch.rsqrt(v + eps); weight * x.to(dtype)",
    "swiglu": "F.silu(g) * u",
    "newgelu": "NewGELUActivation: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * "
               "(x + 0.044715 * torch.pow(x, 3.0))))",
    "residual-add-cast": "s = residual + h; (s, s.to(torch.float32))",
    "residual-layernorm": "s = x + residual; (s, F.layer_norm(s, (C,), weight, bias, 1e-5))",
    "rotary": "x = proj.view(b, s, h, d).transpose(1, 2); x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)",
    "attention-softmax": "torch.softmax(scores * 0.125 + mask, dim=-1), mask [b, 1, q, k] shared by the heads",
    "transpose-copy": "k = qkv[..., h*d:2*h*d].view(b, s, h, d).transpose(1, 2); k.transpose(-1, -2).contiguous()",
}


class Case:
    """One chain at one dtype and shape: its eager function, inputs (in the kernel's
    input order), float64 reference and the tool's arguments."""

    def __init__(self, chain, dtype_name, rows, cols, eps, rotary=None, attention=None, transpose=None):
        self.chain, self.dtype_name, self.rows, self.cols = chain, dtype_name, rows, cols
        self.rotary = rotary  # (batch, heads, seq, head_dim) of a rotary case
        self.transpose = transpose  # (batch, heads, seq, head_dim) of a transpose-copy case
        self.attention = attention  # (batch, heads, queries, keys) of an attention-softmax case
        self.dtype = DTYPES[dtype_name]
        self.eps = eps if chain == "rmsnorm" else None
        self.tool_args = ["--eps", repr(eps)] if chain == "rmsnorm" else []
        if chain == "residual-add-cast":
            self.tool_args = ["--to", "float32"]
        if chain == "residual-layernorm":
            self.tool_args = ["--eps", repr(LAYER_NORM_EPS)]
        if chain == "attention-softmax":
            self.tool_args = ["--scale", repr(ATTENTION_SCALE)]
        self.fn = {"rmsnorm": lambda: llama_rms_norm(eps), "swiglu": lambda: swiglu, "newgelu": lambda: new_gelu,
                   "residual-add-cast": lambda: residual_add_cast,
                   "residual-layernorm": lambda: residual_layer_norm,
                   "rotary": lambda: hf_rotary(*rotary) if rotary else None,
                   "attention-softmax": lambda: attention_softmax,
                   "transpose-copy": lambda: hf_kt_copy(*transpose) if transpose else None}[chain]()

    def label(self):
        if self.rotary:
            return f"rotary {self.dtype_name} " + "x".join(str(v) for v in self.rotary)
        if self.attention:
            return f"attention-softmax {self.dtype_name} " + "x".join(str(v) for v in self.attention)
        if self.transpose:
            return f"transpose-copy {self.dtype_name} " + "x".join(str(v) for v in self.transpose)
        return f"{self.chain} {self.dtype_name} {self.rows}x{self.cols}"

    def tool_shape(self):
        laid_out = self.rotary or self.attention or self.transpose
        return "x".join(str(v) for v in laid_out) if laid_out else f"{self.rows}x{self.cols}"

    def input_shapes(self):
        if self.rotary:
            b, h, s, d = self.rotary
            return [(b, s, h * d), (b, s, d), (b, s, d)]
        if self.attention:
            b, h, q, k = self.attention
            return [(b, h, q, k), (b, 1, q, k)]
        if self.transpose:  # the fused QKV projection
            b, h, s, d = self.transpose
            return [(b, s, 3 * h * d)]
        full, column = (self.rows, self.cols), (self.cols,)
        return {"rmsnorm": [full, column], "swiglu": [full, full], "newgelu": [full],
                "residual-add-cast": [full, full], "residual-layernorm": [full, full, column, column]}[self.chain]

    def kernel_inputs(self, inputs):
        """The tensors hk_chain reads, in its input order: for rotary the memory of x (the
        projection), cos, x2 = x[..., d/2:] (the projection from d/2 on), x1 and sin, flat."""
        if self.attention:  # the scores and the mask, flat: the mask's rows are read once per head
            return [t.reshape(-1) for t in inputs]
        if self.transpose:  # the projection's memory from k's first element on
            b, h, s, d = self.transpose
            return [inputs[0].reshape(-1)[h * d:]]
        if not self.rotary:
            return inputs
        proj, cos, sin = (t.reshape(-1) for t in inputs)
        half = self.rotary[3] // 2
        return [proj, cos, proj[half:], proj, sin]

    def make_outputs(self, args, device):
        """NaN-filled outputs as eager allocates them, and the tensors hk_chain writes (for
        rotary, the flat memory of an output with x's strides)."""
        if self.rotary:
            b, h, s, d = self.rotary
            flat = torch.full((b * s * h * d,), float("nan"), dtype=self.dtype, device=device)
            return [flat.view(b, s, h, d).transpose(1, 2)], [flat]
        if self.attention:  # softmax allocates its result contiguous
            flat = torch.full((self.rows * self.cols,), float("nan"), dtype=self.dtype, device=device)
            return [flat.view(self.attention)], [flat]
        if self.transpose:  # k^T contiguous: [b, h, d, s]
            b, h, s, d = self.transpose
            flat = torch.full((self.rows * self.cols,), float("nan"), dtype=self.dtype, device=device)
            return [flat.view(b, h, d, s)], [flat]
        outs = [torch.full(tensor_shape(a["shape"], self.rows, self.cols), float("nan"), dtype=DTYPES[a["dtype"]],
                           device=device) for a in args if a["kind"] == "output"]
        return outs, outs

    def ideal_bytes(self, point):
        if self.rotary:  # x (its halves are the same memory), cos, sin and the output, each once
            b, h, s, d = self.rotary
            return (2 * b * s * h * d + 2 * b * s * d) * self.dtype.itemsize
        if self.attention:  # the scores and the probabilities once, the mask once per batch
            b, h, q, k = self.attention
            return (2 * b * h * q * k + b * q * k) * self.dtype.itemsize
        if self.transpose:  # k read once, its copy written once
            return 2 * self.rows * self.cols * self.dtype.itemsize
        return bytes_moved(point, self.rows, self.cols)

    def make_inputs(self, device, gen):
        shapes = self.input_shapes()
        if device == "meta":
            return [torch.empty(s, dtype=self.dtype, device="meta") for s in shapes]
        xs = [(torch.randn(s, device=device, generator=gen) * 2).to(self.dtype) for s in shapes]
        if self.chain == "rmsnorm":  # a weight of both signs around HF's ones
            xs[1] = (torch.rand(self.cols, device=device, generator=gen) * 2 - 0.5).to(self.dtype)
        if self.attention:  # HF's additive causal mask: 0 where a query sees a key, the dtype's min elsewhere
            b, h, q, k = self.attention
            seen = torch.ones(q, k, dtype=torch.bool, device=device).tril(k - q)
            mask = torch.zeros(q, k, dtype=self.dtype, device=device).masked_fill(~seen, torch.finfo(self.dtype).min)
            xs[1] = mask.expand(b, 1, q, k).contiguous()
        return xs

    def eager(self, inputs):
        out = self.fn(*inputs)
        return list(out) if isinstance(out, tuple) else [out]

    def reference(self, inputs):
        """The chain in float64 from the same inputs, no value rounded anywhere; a Python
        number is its float32 value, the opmath scalar ATen's CUDA kernels and the fused
        kernel use (Note [Chain dtypes])."""
        x = [t.double() for t in inputs]
        if self.rotary:  # no constants: the formula itself, in float64
            return [hf_rotary(*self.rotary)(x[0], x[1], x[2]).contiguous()]
        if self.attention:
            return [torch.softmax(x[0] * ATTENTION_SCALE + x[1], dim=-1)]
        if self.transpose:  # a copy: exact
            return [hf_kt_copy(*self.transpose)(x[0])]
        if self.chain == "rmsnorm":
            return [x[1] * (x[0] * torch.rsqrt(x[0].pow(2).mean(-1, keepdim=True) + self.eps))]
        if self.chain == "swiglu":
            return [F.silu(x[0]) * x[1]]
        if self.chain == "newgelu":
            c1, c2 = (torch.tensor(c, dtype=torch.float32).item() for c in (0.044715, math.sqrt(2.0 / math.pi)))
            return [0.5 * x[0] * (1.0 + torch.tanh(c2 * (x[0] + c1 * x[0].pow(3.0))))]
        s = x[0] + x[1]
        if self.chain == "residual-layernorm":
            d = s - s.mean(-1, keepdim=True)
            return [s, d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + LAYER_NORM_EPS) * x[2] + x[3]]
        return [s, s]


def parse_cases(text, eps):
    cases = []
    for item in text.split(","):
        rotary = attention = transpose = None
        try:
            chain, dtype, shape = item.strip().split(":")
            if chain == "rotary":
                rotary = tuple(int(v) for v in shape.lower().split("x"))
                if len(rotary) != 4 or min(rotary) < 1 or rotary[3] % 2:
                    raise ValueError(shape)
                rows, cols = rotary[0] * rotary[1] * rotary[2], rotary[3]
            elif chain == "transpose-copy":
                transpose = tuple(int(v) for v in shape.lower().split("x"))
                if len(transpose) != 4 or min(transpose) < 1:
                    raise ValueError(shape)
                rows, cols = transpose[0] * transpose[1] * transpose[3], transpose[2]
            elif chain == "attention-softmax":
                attention = tuple(int(v) for v in shape.lower().split("x"))
                if len(attention) != 4 or min(attention) < 1:
                    raise ValueError(shape)
                rows, cols = attention[0] * attention[1] * attention[2], attention[3]
            else:
                rows, cols = (int(v) for v in shape.lower().split("x"))
        except ValueError:
            sys.exit(f"fusion_bench: malformed case '{item}' (want chain:dtype:ROWSxCOLS, rotary:dtype:BxHxSxD, "
                     "attention-softmax:dtype:BxHxQxK, transpose-copy:dtype:BxHxSxD)")
        if chain not in ("rmsnorm", "swiglu", "newgelu", "residual-add-cast", "residual-layernorm", "rotary",
                         "attention-softmax", "transpose-copy") \
                or dtype not in DTYPES or rows < 1 or cols < 1:
            sys.exit(f"fusion_bench: unknown chain/dtype or bad shape in '{item}' "
                     "(chains: rmsnorm, swiglu, newgelu, residual-add-cast, residual-layernorm, rotary, "
                     "attention-softmax, transpose-copy)")
        cases.append(Case(chain, dtype, rows, cols, eps, rotary, attention, transpose))
    return cases


# ----------------------------------------------------------------------------
# The tool and its manifest
# ----------------------------------------------------------------------------

def default_tool():
    build = os.environ.get("HOTKERNEL_BUILD_DIR") or os.path.join(ROOT, "build")
    return os.path.join(build, "bin", "chain_kernel_tool")


def run_tool(tool, case, arch, out_dir, jobs):
    """Compiles the case's points; returns (manifest, tool's output). A usage error (exit 2)
    is a bug here: raised. Exit 1 with a manifest: some points failed to compile (listed)."""
    cmd = [tool, "--chain", case.chain, "--dtype", case.dtype_name, "--shape", case.tool_shape(),
           "--arch", arch, "--out", out_dir] + case.tool_args + (["--jobs", str(jobs)] if jobs else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = (proc.stdout + proc.stderr).strip()
    path = os.path.join(out_dir, "manifest.json")
    if proc.returncode not in (0, 1) or not os.path.exists(path):
        raise RuntimeError(f"chain_kernel_tool exited {proc.returncode}: {text}")
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise RuntimeError(f"{path}: not a {MANIFEST_FORMAT} v{MANIFEST_VERSION} manifest")
    if (manifest["chain"], manifest["dtype"], manifest["rows"], manifest["cols"]) != \
            (case.chain, case.dtype_name, case.rows, case.cols):
        raise RuntimeError(f"{path} describes another case")
    return manifest, text


def element_count(shape, rows, cols):
    return {"full": rows * cols, "column": cols, "row": rows, "row_flat": rows}[shape]


def tensor_shape(shape, rows, cols):
    return {"full": (rows, cols), "column": (cols,), "row": (rows, 1), "row_flat": (rows,)}[shape]


def bytes_moved(point, rows, cols):
    """Ideal traffic: every tensor input read once, every output written once."""
    return sum(element_count(a["shape"], rows, cols) * DTYPES[a["dtype"]].itemsize
               for a in point["args"] if a["kind"] in ("input", "output"))


def bind_args(point, inputs, outputs, rows, cols, layout=False):
    """hk_chain's arguments as ctypes values, in the manifest's order, each checked against
    the tensor passed for it: dtype, shape class, contiguity and alignment; under a layout
    (Note [Chain kernel manifest, v2]) a flat tensor of at least the argument's span."""
    values, ins, outs = [], list(inputs), list(outputs)
    for a in point["args"]:
        kind = a["kind"]
        if kind in ("rows", "cols"):
            values.append(ctypes.c_longlong(rows if kind == "rows" else cols))
            continue
        source = ins if kind in ("input", "scalar_input") else outs
        if not source:
            raise RuntimeError(f"the manifest's {kind} argument of node {a['node']} has no tensor to bind")
        t = source.pop(0)
        if kind == "scalar_input":
            values.append(ctypes.c_float(float(t)))
            continue
        want = (a["span"],) if layout else tensor_shape(a["shape"], rows, cols)
        fits = t.dim() == 1 and t.numel() >= a["span"] if layout else tuple(t.shape) == want
        if str(t.dtype) != "torch." + a["dtype"] or not fits or not t.is_contiguous():
            raise RuntimeError(f"{kind} of node {a['node']} wants a contiguous {a['dtype']} {list(want)}, "
                               f"got {str(t.dtype)} {list(t.shape)}")
        if t.data_ptr() % a["alignment"]:
            raise RuntimeError(f"{kind} of node {a['node']} needs {a['alignment']}-byte alignment")
        values.append(ctypes.c_void_p(t.data_ptr()))
    if ins or outs:
        raise RuntimeError(f"{len(ins)} inputs and {len(outs)} outputs left over after the manifest's arguments")
    return values


# ----------------------------------------------------------------------------
# The CUDA driver API (libcuda.so.1 through ctypes)
# ----------------------------------------------------------------------------

CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class Driver:
    """The few driver entry points the benchmark needs, with their signatures; every
    CUresult is checked and a failure raised with the error's name."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        vp, cint, uint = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
        signatures = {
            "cuInit": [uint],
            "cuGetErrorName": [cint, ctypes.POINTER(ctypes.c_char_p)],
            "cuCtxGetCurrent": [ctypes.POINTER(vp)],
            "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p],
            "cuModuleUnload": [vp],
            "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "cuFuncGetAttribute": [ctypes.POINTER(cint), cint, vp],
            "cuFuncSetAttribute": [vp, cint, cint],
            "cuLaunchKernel": [vp, uint, uint, uint, uint, uint, uint, uint, vp, ctypes.POINTER(vp),
                               ctypes.POINTER(vp)],
        }
        for name, argtypes in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, cint
            setattr(self, name, fn)
        self.check(self.cuInit(0), "cuInit")

    def error_name(self, rc):
        name = ctypes.c_char_p()
        if self.cuGetErrorName(rc, ctypes.byref(name)) != 0 or not name.value:
            return f"CUresult {rc}"
        return f"{name.value.decode()} ({rc})"

    def check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: {self.error_name(rc)}")

    def require_context(self):
        """torch's primary context must be current on this thread (torch made it so)."""
        ctx = ctypes.c_void_p()
        self.check(self.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise RuntimeError("no current CUDA context after torch's initialization")


class Kernel:
    """One point's cubin loaded into the current context, with its launch bound to tensors."""

    def __init__(self, driver, path, name, shared_bytes, block):
        self.driver = driver
        with open(path, "rb") as f:
            image = f.read()
        if not image.startswith(b"\x7fELF"):
            raise RuntimeError(f"{path} is not an ELF image")
        self.module = ctypes.c_void_p()
        driver.check(driver.cuModuleLoadData(ctypes.byref(self.module), image), f"cuModuleLoadData({path})")
        try:
            self._prepare(name, shared_bytes, block)
        except RuntimeError:
            self.unload()
            raise
        self.params = None

    def _prepare(self, name, shared_bytes, block):
        driver = self.driver
        self.fn = ctypes.c_void_p()
        driver.check(driver.cuModuleGetFunction(ctypes.byref(self.fn), self.module, name.encode()),
                     f"cuModuleGetFunction({name})")
        regs, max_threads = ctypes.c_int(), ctypes.c_int()
        driver.check(driver.cuFuncGetAttribute(ctypes.byref(regs), CU_FUNC_ATTRIBUTE_NUM_REGS, self.fn),
                     "cuFuncGetAttribute(NUM_REGS)")
        driver.check(driver.cuFuncGetAttribute(ctypes.byref(max_threads), CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                               self.fn), "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)")
        self.registers = regs.value
        if block > max_threads.value:
            raise RuntimeError(f"a block of {block} threads is over the function's {max_threads.value} "
                               f"({regs.value} registers)")
        if shared_bytes > 48 * 1024:  # dynamic shared memory above 48 KiB needs the opt-in
            driver.check(driver.cuFuncSetAttribute(self.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   shared_bytes),
                         "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def bind(self, values, outputs, grid, block, shared):
        """Keeps the argument values alive and the array of pointers to them that
        cuLaunchKernel reads (the driver copies the values at each launch), and the
        output tensors the pointers point into."""
        self.values, self.outputs = values, outputs
        self.params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                                         for v in values])
        self.geometry = (grid, block, shared)

    def launch(self):
        grid, block, shared = self.geometry
        stream = torch.cuda.current_stream().cuda_stream
        self.driver.check(self.driver.cuLaunchKernel(self.fn, grid, 1, 1, block, 1, 1, shared,
                                                     ctypes.c_void_p(stream), self.params, None), "cuLaunchKernel")

    def unload(self):
        if self.module.value:
            self.driver.check(self.driver.cuModuleUnload(self.module), "cuModuleUnload")
            self.module = ctypes.c_void_p()


# ----------------------------------------------------------------------------
# Accuracy
# ----------------------------------------------------------------------------

# Note [Fusion bench tolerance]
# A fused kernel computes in float32 and rounds only where a cast to a 16-bit dtype asks
# for it and at the outputs (Note [Two evaluation modes], kernels/chain/ChainInterpreter.h);
# eager rounds every op's result to its dtype, so the two differ by more than the last
# bit on long chains, and the fused kernel is usually the more accurate. A point is
# correct when, for every output element, NaN where eager has NaN and nowhere else, and
#     |fused - ref64| <= |eager - ref64| + 2 ulp
# where ref64 is the chain evaluated in float64 from the same inputs (no value rounded
# anywhere; a Python number operand is its float32 value, as ATen's CUDA kernels and the
# fused kernel take it, so that the float32 rounding of new-GELU's 0.044715 and sqrt(2 / pi)
# is not counted as an error of either) and ulp is the spacing of the output's dtype at
# max(|ref64|, |eager|): the fused kernel may be less accurate than eager by at most
# two units in the last place, and is never penalized for being more accurate. The outputs start as NaN, so an
# element the kernel does not write fails.


def ulp(magnitude, dtype):
    """The spacing of `dtype` at `magnitude` (float64, >= 0), subnormals included."""
    _, e = torch.frexp(magnitude)  # magnitude = m * 2^e, m in [0.5, 1); e = 0 for 0
    min_exp = int(math.log2(torch.finfo(dtype).tiny)) + 1  # frexp's exponent of the smallest normal
    e = torch.where(magnitude > 0, e.clamp(min=min_exp), min_exp)
    return torch.exp2((e - 1 - MANTISSA_BITS[dtype]).double())


def max_error(out, ref):
    """max |out - ref| over the elements where ref is finite (0.0 when none is)."""
    finite = torch.isfinite(ref)
    return float((out.double()[finite] - ref[finite]).abs().max().item()) if finite.any() else 0.0


def check_output(fused, eager, ref):
    """(problem or "", stats) for one output."""
    stats = {"maxAbsDiffVsEager": 0.0, "maxErrorVsFloat64": 0.0, "eagerMaxErrorVsFloat64": 0.0,
             "worstExcessUlps": 0.0}
    nan_f, nan_e = torch.isnan(fused), torch.isnan(eager)
    if not torch.equal(nan_f, nan_e):
        return f"NaN in {int((nan_f != nan_e).sum())} elements where eager has none or the reverse", stats
    f, e, r = fused.double(), eager.double(), ref
    if nan_e.any():
        keep = ~nan_e
        f, e, r = f[keep], e[keep], r[keep]
    if f.numel() == 0:
        return "", stats
    err_f, err_e = (f - r).abs(), (e - r).abs()
    spacing = ulp(torch.maximum(r.abs(), e.abs()), fused.dtype)
    excess = (err_f - err_e) / spacing
    stats["maxAbsDiffVsEager"] = float((f - e).abs().max())
    stats["maxErrorVsFloat64"] = float(err_f.max())
    stats["eagerMaxErrorVsFloat64"] = float(err_e.max())
    stats["worstExcessUlps"] = float(excess.max())
    bad = int((excess > ULPS).sum())
    if bad:
        return (f"{bad} elements over eager's error + {ULPS} ulp (worst {stats['worstExcessUlps']:.2f} ulp, "
                f"max |fused - eager| {stats['maxAbsDiffVsEager']:.3g})"), stats
    return "", stats


# ----------------------------------------------------------------------------
# One case
# ----------------------------------------------------------------------------

def time_interleaved(timer, impls, reps, warmup):
    """Samples (us) of each implementation, `reps` rounds in rotating order."""
    names = list(impls)
    for _ in range(warmup):
        for n in names:
            impls[n]()
    samples = {n: [] for n in names}
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]  # no implementation always runs first
        events = [(n, timer.time_us(impls[n])) for n in order]
        torch.cuda.synchronize()
        for n, (e0, e1) in events:
            samples[n].append(e0.elapsed_time(e1) * 1e3)
    return samples


def median(values):
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


def run_case(case, args, driver, timer, hk, copy_bps, work_dir, result):
    """Fills `result` as it goes, so that what was measured before an exception is kept;
    sets result["error"] when no point is correct."""
    manifest, result["toolLog"] = run_tool(args.tool, case, args.arch, work_dir, args.jobs)
    result.update({"function": FUNCTIONS[case.chain], "arch": manifest["arch"],
                   "nvrtcVersion": manifest["nvrtcVersion"], "points": [], "skippedPoints": manifest["skipped"]})
    if case.chain == "rmsnorm":
        result["eps"] = case.eps
    if case.chain == "residual-add-cast":
        result["to"] = manifest["to"]
    gen = torch.Generator(device=DEVICE).manual_seed(1234 + case.rows + case.cols)
    inputs = case.make_inputs(DEVICE, gen)
    eager_out = case.eager(inputs)
    ref = case.reference(inputs)
    kernels = {}
    try:
        for p in manifest["points"]:
            entry = {"name": p["name"], "params": p["params"], "registers": p["registers"],
                     "spillBytes": p["spillBytes"], "grid": p["grid"], "block": p["block"],
                     "sharedBytes": p["sharedBytes"], "status": "ok", "error": None, "us": None}
            result["points"].append(entry)
            if p["error"] is not None:
                entry["status"], entry["error"] = "compile_error", p["error"]
                continue
            try:
                outputs, written = case.make_outputs(p["args"], DEVICE)
                k = Kernel(driver, os.path.join(work_dir, p["cubin"]), manifest["kernel"], p["sharedBytes"],
                           p["block"])
                kernels[p["name"]] = k
                k.bind(bind_args(p, case.kernel_inputs(inputs), written, case.rows, case.cols, bool(manifest["layout"])),
                       outputs, p["grid"], p["block"], p["sharedBytes"])
                k.launch()
                torch.cuda.synchronize()
            except RuntimeError as e:  # a refused load or launch, or a layout the tensors do not fit
                entry["status"], entry["error"] = "launch_error", str(e)
                continue
            problems = []
            entry["outputs"] = []
            if len(outputs) != len(eager_out):
                problems.append(f"{len(outputs)} outputs, eager has {len(eager_out)}")
            for i, (f, e, r) in enumerate(zip(outputs, eager_out, ref)):
                if f.dtype != e.dtype or f.shape != e.shape:
                    problems.append(f"output {i} is {f.dtype} {list(f.shape)}, eager's {e.dtype} {list(e.shape)}")
                    continue
                problem, stats = check_output(f, e, r)
                entry["outputs"].append(stats)
                if problem:
                    problems.append(f"output {i}: {problem}")
            if problems:
                entry["status"], entry["error"] = "wrong_output", "; ".join(problems)
        good = [e for e in result["points"] if e["status"] == "ok"]
        for e in result["points"]:
            if e["status"] != "ok":
                print(f"  {case.label()}: point {e['name']} {e['status']}: {e['error'].splitlines()[0]}", flush=True)
        if not good:
            result["error"] = f"no point of {len(result['points'])} is correct"
            return

        # The fastest correct point, all of them interleaved.
        samples = time_interleaved(timer, {e["name"]: kernels[e["name"]].launch for e in good},
                                   args.point_reps, 1)
        for e in good:
            e["us"] = round(median(samples[e["name"]]), 3)
        best = min(good, key=lambda e: e["us"])
        point = next(p for p in manifest["points"] if p["name"] == best["name"])
        result["chosen"] = best["name"]
        result["chosenParams"] = best["params"]
        fused = kernels[best["name"]]

        impls = {"eager": lambda: case.fn(*inputs), "fused": fused.launch}
        compile_seconds = None
        errors = {"eager": max(max_error(o, r) for o, r in zip(eager_out, ref)),
                  "fused": max(max_error(o, r) for o, r in zip(fused.outputs, ref))}
        if not args.no_compile:
            torch._dynamo.reset()
            compiled = torch.compile(case.fn, dynamic=False)
            t0 = time.perf_counter()
            try:
                compiled_out = compiled(*inputs)
                torch.cuda.synchronize()
            except Exception as e:  # torch.compile's failure: recorded, eager and fused still timed
                result["compileError"] = f"{type(e).__name__}: {e}"
                print(f"  {case.label()}: torch.compile failed: {result['compileError'].splitlines()[0]}", flush=True)
            else:
                compile_seconds = round(time.perf_counter() - t0, 2)
                compiled_out = list(compiled_out) if isinstance(compiled_out, tuple) else [compiled_out]
                errors["compile"] = max(max_error(o, r) for o, r in zip(compiled_out, ref))
                impls["compile"] = lambda: compiled(*inputs)
        samples = time_interleaved(timer, impls, args.reps, args.warmup)
        vs_eager = compare(hk, samples["eager"], samples["fused"])
        result.update({"eagerUs": vs_eager["baseline"], "fusedUs": vs_eager["candidate"],
                       "fusedSpeedupVsEager": vs_eager["speedup"]})
        if "compile" in samples:
            vs_compile = compare(hk, samples["compile"], samples["fused"])
            result.update({"compileUs": vs_compile["baseline"], "fusedSpeedupVsCompile": vs_compile["speedup"],
                           "compileSpeedupVsEager": compare(hk, samples["eager"], samples["compile"])["speedup"]})
        nbytes = case.ideal_bytes(point)
        gbps = {n: nbytes / (median(s) * 1e-6) / 1e9 for n, s in samples.items()}
        result.update({"bytes": nbytes, "GBps": gbps, "fusedCopyFraction": gbps["fused"] * 1e9 / copy_bps,
                       "maxErrorVsFloat64": errors, "compileSeconds": compile_seconds,
                       "samplesUs": {n: [round(v, 3) for v in s] for n, s in samples.items()}})
    finally:
        try:  # after a sticky CUDA error this fails too; the error that ended the case is the one raised
            torch.cuda.synchronize()
            for k in kernels.values():
                k.unload()
        except RuntimeError:
            pass


# ----------------------------------------------------------------------------
# Without CUDA: the tool path only
# ----------------------------------------------------------------------------

def check_tool_only(case, args, work_dir):
    """Runs the tool, then checks every compiled point's cubin and its layout against
    the tensors the benchmark would pass (meta tensors: no memory)."""
    manifest, _ = run_tool(args.tool, case, args.arch, work_dir, args.jobs)
    inputs = case.make_inputs("meta", None)
    problems, compiled = [], 0
    for p in manifest["points"]:
        if p["error"] is not None:
            problems.append(f"{p['name']}: compile error: {p['error'].splitlines()[0]}")
            continue
        with open(os.path.join(work_dir, p["cubin"]), "rb") as f:
            if not f.read(4) == b"\x7fELF":
                problems.append(f"{p['name']}: {p['cubin']} is not an ELF image")
                continue
        _, written = case.make_outputs(p["args"], "meta")
        try:
            bind_args(p, case.kernel_inputs(inputs), written, case.rows, case.cols, bool(manifest["layout"]))
        except RuntimeError as e:
            problems.append(f"{p['name']}: {e}")
            continue
        compiled += 1
    return manifest, compiled, problems


# ----------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------

def fmt_ci(m, unit=""):
    return f"{m['median']:.2f}{unit} [{m['low']:.2f}, {m['high']:.2f}]"


def markdown(results):
    lines = ["| chain | dtype | shape | eager us | compile us | fused us | fused vs eager | fused vs compile | "
             "compile vs eager | fused GB/s | % copy | max err vs fp64 (fused / eager / compile) | point | "
             "points ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        shape = f"{r['shape'][0]}x{r['shape'][1]}"
        if "error" in r:
            lines.append(f"| {r['chain']} | {r['dtype']} | {shape} | error: {r['error']} |")
            continue
        ok = sum(p["status"] == "ok" for p in r["points"])
        err = r["maxErrorVsFloat64"]
        compile_us = f"{r['compileUs']['median']:.1f}" if "compileUs" in r else "-"
        vs_compile = fmt_ci(r["fusedSpeedupVsCompile"], "x") if "compileUs" in r else "-"
        compile_vs_eager = f"{r['compileSpeedupVsEager']['median']:.2f}x" if "compileUs" in r else "-"
        compile_err = f"{err['compile']:.2g}" if "compile" in err else "-"
        lines.append(f"| {r['chain']} | {r['dtype']} | {shape} | {r['eagerUs']['median']:.1f} | {compile_us} | "
                     f"{r['fusedUs']['median']:.1f} | {fmt_ci(r['fusedSpeedupVsEager'], 'x')} | {vs_compile} | "
                     f"{compile_vs_eager} | {r['GBps']['fused']:.0f} | {100 * r['fusedCopyFraction']:.0f}% | "
                     f"{err['fused']:.2g} / {err['eager']:.2g} / {compile_err} | {r['chosen']} | "
                     f"{ok}/{len(r['points'])} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=None,
                    help="comma list of chain:dtype:ROWSxCOLS (chains: rmsnorm, swiglu, newgelu, residual-add-cast; "
                         f"default {DEFAULT_CASES})")
    ap.add_argument("--eps", type=float, default=1e-6, help="rmsnorm's eps (LlamaConfig's default)")
    ap.add_argument("--tool", default=default_tool(),
                    help="chain_kernel_tool (default $HOTKERNEL_BUILD_DIR/bin, else build/bin)")
    ap.add_argument("--arch", default=None, help="NVRTC's architecture (default: the GPU's, sm_90 without one)")
    ap.add_argument("--jobs", type=int, default=0, help="the tool's parallel compiles (0: one a core)")
    ap.add_argument("--reps", type=int, default=31, help="timed rounds of eager / fused / compile")
    ap.add_argument("--point-reps", type=int, default=11, help="timed rounds of every correct point")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--smoke", action="store_true", help=f"tiny shapes ({SMOKE_CASES}), few rounds")
    ap.add_argument("--work-dir", default="", help="keep the cubins and manifests here (default: a temporary folder)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.smoke:
        args.reps, args.point_reps, args.warmup = min(args.reps, 7), min(args.point_reps, 3), 1
    if args.reps < 7:
        sys.exit("fusion_bench: --reps must be >= 7 (the confidence interval needs them)")
    if args.point_reps < 1 or args.jobs < 0 or not math.isfinite(args.eps) or args.eps <= 0:
        sys.exit("fusion_bench: --point-reps must be >= 1, --jobs >= 0 and --eps > 0")
    cases = parse_cases(args.cases or (SMOKE_CASES if args.smoke else DEFAULT_CASES), args.eps)
    if not os.access(args.tool, os.X_OK):
        sys.exit(f"fusion_bench: no chain_kernel_tool at {args.tool} (build the project with benchmarks, "
                 "or pass --tool)")
    has_cuda = torch.cuda.is_available()
    if args.arch is None:
        major, minor = torch.cuda.get_device_capability(0) if has_cuda else (9, 0)
        args.arch = f"sm_{major}{minor}"
    work_root = args.work_dir or tempfile.mkdtemp(prefix="fusion_bench.")
    os.makedirs(work_root, exist_ok=True)
    try:
        if not has_cuda:
            return tool_only(cases, args, work_root)
        return benchmark(cases, args, work_root)
    finally:
        if not args.work_dir:
            shutil.rmtree(work_root, ignore_errors=True)


def case_dir(root, case):
    return os.path.join(root, f"{case.chain}-{case.dtype_name}-{case.rows}x{case.cols}")


def check_accuracy_rule(case):
    """The accuracy check on the CPU, at the case's shape: eager itself and the float64
    reference rounded to each output's dtype (an exact fused kernel) pass; the reference
    moved by 3 ulp and an unwritten (NaN) element fail. Returns the problems found."""
    gen = torch.Generator().manual_seed(1234)
    inputs = case.make_inputs("cpu", gen)
    problems = []
    for i, (e, r) in enumerate(zip(case.eager(inputs), case.reference(inputs))):
        exact = r.to(e.dtype)
        unwritten = exact.clone()
        unwritten.view(-1)[unwritten.numel() // 2] = float("nan")
        moved = (r + 3 * ulp(torch.maximum(r.abs(), e.abs()), e.dtype)).to(e.dtype)
        for what, out, passes in (("eager", e, True), ("the rounded float64 reference", exact, True),
                                  ("the reference moved by 3 ulp", moved, False),
                                  ("an unwritten element", unwritten, False)):
            problem, _ = check_output(out, e, r)
            if (problem == "") != passes:
                problems.append(f"output {i}: {what} {'fails' if passes else 'passes'} the check {problem}")
    return problems


def tool_only(cases, args, work_root):
    print("fusion_bench: no CUDA device: nothing is timed; checking the tool's cubins and manifests only", flush=True)
    failed = 0
    for case in cases:
        try:
            manifest, compiled, problems = check_tool_only(case, args, case_dir(work_root, case))
            accuracy = case.rows * case.cols <= 1 << 20  # the float64 reference on the CPU: small cases only
            if accuracy:
                problems += check_accuracy_rule(case)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
            print(f"{case.label()}: ERROR {type(e).__name__}: {e}", flush=True)
            failed += 1
            continue
        failed += bool(problems)
        print(f"{case.label()}: {compiled} points compiled for {manifest['arch']} and bound, "
              f"{len(manifest['skipped'])} skipped" + ("; accuracy check exercised on the CPU" if accuracy else "")
              + "".join(f"\n  FAIL {p}" for p in problems), flush=True)
    if args.out:
        print(f"fusion_bench: {args.out} not written (no CUDA device)")
    return 1 if failed else 0


def benchmark(cases, args, work_root):
    torch.cuda.init()
    torch.empty(1, device="cuda")  # torch's primary context, current on this thread
    torch.cuda.synchronize()
    driver = Driver()
    driver.require_context()
    hk = Hotkernel.load()  # hotkernel_compare_samples when the library is in the process
    timer = Timer()
    copy_bps = copy_bandwidth(timer)
    print(f"copy bandwidth {copy_bps / 1e9:.0f} GB/s; arch {args.arch}; statistics: "
          f"{'hotkernel_compare_samples' if hk else 'Python twin of hotkernel_compare_samples'}", flush=True)
    machine_info = machine()
    results = []

    def document():
        return {"format": "hotkernel-bench", "version": 1, "benchmark": "fusion",
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "machine": machine_info, "copyGBps": copy_bps / 1e9, "smoke": args.smoke,
                "method": "CUDA events per call, L2 flushed before each (a write of twice the L2), the GPU kept busy "
                          "while the call is enqueued; every correct point timed interleaved and the fastest kept; "
                          "eager/fused/compile interleaved in rotating order, medians and 95% CIs of paired ratios ("
                          + ("hotkernel_compare_samples" if hk else "the Python twin of hotkernel_compare_samples")
                          + "); a point is correct when every output element is within eager's error vs float64 "
                          f"+ {ULPS} ulp of its dtype, NaN where eager has NaN only",
                "reps": args.reps, "pointReps": args.point_reps, "compile": not args.no_compile,
                "statistics": "hotkernel_compare_samples" if hk else "python", "results": results}

    def write():
        if args.out:  # after every case: a crash later loses nothing measured
            with open(args.out + ".tmp", "w") as f:
                json.dump(document(), f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    failed = 0
    for case in cases:
        t0 = time.perf_counter()
        r = {"chain": case.chain, "dtype": case.dtype_name, "shape": [case.rows, case.cols]}
        try:
            run_case(case, args, driver, timer, hk, copy_bps, case_dir(work_root, case), r)
        except Exception as e:  # one broken case must not lose the others
            r["error"] = f"{type(e).__name__}: {e}"
        r["seconds"] = round(time.perf_counter() - t0, 1)
        results.append(r)
        if "error" in r:
            failed += 1
            print(f"{case.label()}: ERROR {r['error']}", flush=True)
        else:
            bad = [p for p in r["points"] if p["status"] != "ok"]
            failed += bool(bad) or "compileError" in r
            line = (f"{case.label()}: {r['chosen']} of {len(r['points']) - len(bad)} correct points | "
                    f"eager {r['eagerUs']['median']:.1f} us, fused {r['fusedUs']['median']:.1f} us")
            if "compileUs" in r:
                line += f", compile {r['compileUs']['median']:.1f} us"
            line += f" | x{fmt_ci(r['fusedSpeedupVsEager'])} vs eager"
            if "compileUs" in r:
                line += f", x{fmt_ci(r['fusedSpeedupVsCompile'])} vs compile"
            line += f" | {r['GBps']['fused']:.0f} GB/s = {100 * r['fusedCopyFraction']:.0f}% of copy"
            print(line + f" | {r['seconds']} s", flush=True)
        write()
    print()
    print(markdown(results))
    if args.out:
        write()
        print(f"\nwritten {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
