"""Whether an fp16 / bf16 GEMM whose output rows are misaligned (GPT-2's LM head: N = 50,257) is faster
computed into a buffer with aligned rows and copied out (docs/design/gemm-padding.md).

For each case (M, K, N, dtype) it times, interleaved in one process (CUDA events, L2 flushed before each call
with a 256 MiB fill, the GPU kept busy while the call is enqueued, medians of --reps with the paired ratio):
  eager     torch.mm(a, w.t()) as F.linear computes it: a [M, K], w [N, K]; output [M, N] contiguous
  padded    torch.mm(a, w.t(), out=buf[:, :N]) with buf [M, N8] (N rounded up to 8): rows 16-byte aligned
  copied    padded, then buf[:, :N].contiguous(): eager's shape, strides and values
  padN      the weight padded with zero rows to [N8, K] (a copy per call), torch.mm(a, w8.t()) of [M, N8], then
            its [:, :N] copied into a contiguous [M, N]: N itself a multiple of 8, as Inductor's pad_mm pads
and checks that `copied` equals `eager` bit for bit (the same cuBLAS math on other buffers may choose another
kernel: the max difference is reported too), and `padN` likewise (another GEMM kernel: its own bits possible).
Without a GPU (--smoke) it checks the equality on the CPU only.

Output (--out, format "hotkernel-gemm-padding" v2): {format, version, date, machine{gpu, torch, cuda},
method, reps, cases: [{m, k, n, dtype, eagerUs, paddedUs, copiedUs, padNUs, copiedVsEager and padNVsEager
(median, low, high of paired ratios), maxAbsDiff, bitwise, padNMaxAbsDiff, padNBitwise}]}. v1 had no padN.
"""
import argparse
import datetime
import json
import statistics

import torch

CASES = [(8192, 768, 50257, "float16"),   # GPT-2 small's LM head, batch 16 x 512
         (16384, 768, 30522, "bfloat16"),  # BERT-base's MLM head, batch 32 x 512
         (8192, 768, 50264, "float16"),   # the same as GPT-2 with an aligned N: the floor
         (4096, 2048, 128256, "bfloat16")]  # Llama-3's vocabulary: aligned already


def padded_mm(a, w, buf):
    n = w.shape[0]
    torch.mm(a, w.t(), out=buf[:, :n])
    return buf[:, :n]


def pad_n_mm(a, w):
    n, k = w.shape
    n8 = (n + 7) // 8 * 8
    w8 = torch.empty(n8, k, device=w.device, dtype=w.dtype)
    w8[:n].copy_(w)
    w8[n:].zero_()
    return torch.mm(a, w8.t())[:, :n].contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--smoke", action="store_true", help="small cases; the CPU when there is no GPU")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    cases = [(64, 32, 101, "float32"), (64, 32, 104, "float32")] if args.smoke or not cuda else CASES
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev) if cuda else None
    result = {"format": "hotkernel-gemm-padding", "version": 2,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"gpu": torch.cuda.get_device_name() if cuda else None, "torch": torch.__version__,
                          "cuda": torch.version.cuda},
              "method": "CUDA events around one call each, L2 flushed and the GPU kept busy before each, the three "
                        "interleaved, medians and paired ratios over the reps" if cuda else "CPU check only",
              "reps": args.reps, "cases": []}
    for m, k, n, dtype in cases:
        dt = getattr(torch, dtype)
        a = torch.randn(m, k, device=dev, dtype=dt)
        w = torch.randn(n, k, device=dev, dtype=dt)
        n8 = (n + 7) // 8 * 8
        buf = torch.empty(m, n8, device=dev, dtype=dt)
        eager = torch.mm(a, w.t())
        copied = padded_mm(a, w, buf).contiguous()
        entry = {"m": m, "k": k, "n": n, "dtype": dtype, "bitwise": bool(torch.equal(eager, copied)),
                 "maxAbsDiff": float((eager.float() - copied.float()).abs().max())}
        assert copied.shape == eager.shape and copied.stride() == eager.stride()
        padn = pad_n_mm(a, w)
        assert padn.shape == eager.shape and padn.stride() == eager.stride()
        entry["padNBitwise"] = bool(torch.equal(eager, padn))
        entry["padNMaxAbsDiff"] = float((eager.float() - padn.float()).abs().max())
        del padn
        if cuda:
            times = {"eager": [], "padded": [], "copied": [], "padN": []}
            fns = {"eager": lambda: torch.mm(a, w.t()), "padded": lambda: padded_mm(a, w, buf),
                   "copied": lambda: padded_mm(a, w, buf).contiguous(), "padN": lambda: pad_n_mm(a, w)}
            for _ in range(3):
                for f in fns.values():
                    f()
            for _ in range(args.reps):
                for name, f in fns.items():
                    flush.fill_(1)
                    torch.cuda._sleep(100000)
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    f()
                    e.record()
                    e.synchronize()
                    times[name].append(s.elapsed_time(e) * 1e3)
            for name, xs in times.items():
                entry[name + "Us"] = statistics.median(xs)
            for name in ("copied", "padN"):
                ratios = sorted(x / y for x, y in zip(times["eager"], times[name]))
                entry[name + "VsEager"] = {"median": statistics.median(ratios), "low": ratios[len(ratios) // 10],
                                           "high": ratios[-1 - len(ratios) // 10]}
        result["cases"].append(entry)
        print(json.dumps(entry))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
