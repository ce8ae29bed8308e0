"""A small PyTorch inference workload that knows nothing about hotkernel.

A toy language-model head (hidden -> vocabulary logits -> softmax) and an
attention block (QK^T -> softmax -> V), run in a loop under inference_mode.
It prints one JSON line per second of progress and a final JSON summary with
the median time per stage, and can save the last outputs for comparison.

    python examples/softmax_inference.py --seconds 10 --save out.pt
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to serve")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto")
    ap.add_argument("--save", default="", help="save the final outputs (torch.save) here")
    args = ap.parse_args()

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    tokens, hidden, vocab = (4096, 1024, 32000) if cuda else (64, 128, 1000)
    heads, seq, head_dim = (32, 1024, 64) if cuda else (4, 64, 32)

    gen = torch.Generator(device="cpu").manual_seed(1234)
    w_head = (torch.randn(hidden, vocab, generator=gen) * 0.05).to(device, dtype)
    h = torch.randn(tokens, hidden, generator=gen).to(device, dtype)
    q = torch.randn(heads, seq, head_dim, generator=gen).to(device, dtype)
    k = torch.randn(heads, seq, head_dim, generator=gen).to(device, dtype)
    v = torch.randn(heads, seq, head_dim, generator=gen).to(device, dtype)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times = {"lm_head_softmax_ms": [], "attention_softmax_ms": [], "iteration_ms": []}
    start = time.perf_counter()
    last_report = start
    with torch.inference_mode():
        while True:
            t0 = time.perf_counter()
            logits = h @ w_head
            sync()
            t1 = time.perf_counter()
            probs = torch.softmax(logits, dim=-1)
            sync()
            t2 = time.perf_counter()
            scores = (q @ k.transpose(-1, -2)) * head_dim ** -0.5
            sync()
            t3 = time.perf_counter()
            attn = torch.softmax(scores, dim=-1)
            sync()
            t4 = time.perf_counter()
            ctx = attn @ v
            sync()
            t5 = time.perf_counter()
            times["lm_head_softmax_ms"].append((t2 - t1) * 1e3)
            times["attention_softmax_ms"].append((t4 - t3) * 1e3)
            times["iteration_ms"].append((t5 - t0) * 1e3)
            now = time.perf_counter()
            if now - last_report >= 1.0:
                last_report = now
                window = {name: round(statistics.median(vals[-20:]), 4) for name, vals in times.items()}
                print(json.dumps({"t": round(now - start, 1), **window}), flush=True)
            if now - start >= args.seconds:
                break
    n = len(times["iteration_ms"])
    tail = max(1, n // 4)
    summary = {
        "summary": True,
        "device": str(device),
        "dtype": str(dtype),
        "iterations": n,
        # Medians over the first and the last quarter of the run.
        "first": {name: statistics.median(vals[:tail]) for name, vals in times.items()},
        "last": {name: statistics.median(vals[-tail:]) for name, vals in times.items()},
    }
    print(json.dumps(summary), flush=True)
    if args.save:
        torch.save({"probs": probs.cpu(), "attn": attn.cpu(), "ctx": ctx.cpu()}, args.save)


if __name__ == "__main__":
    main()
