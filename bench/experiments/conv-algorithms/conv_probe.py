#!/usr/bin/env python3
"""Probe: how much of an eager CNN's convolution time cuDNN's own search would recover.

PyTorch runs cuDNN convolutions with `torch.backends.cudnn.benchmark` off by default: cuDNN's heuristics
pick the algorithm. With it on, ATen times the algorithms once per shape and keeps the fastest. The flag is
also an argument of `aten::cudnn_convolution`, so a served override could pass it per variant. This probe
measures, on HF's ResNet-50 (random weights, eval, batch 32, 224x224, bfloat16 and float32), each distinct
convolution and the whole forward with the flag off, on, and (reference only: what torch.compile's layout
gives) channels-last with it off; each convolution also as a round trip (the input made channels-last by
ATen's copy, the output copied back, the weight converted once). CUDA events, the modes interleaved rep by
rep, medians.

  python3 bench/experiments/conv-algorithms/conv_probe.py --out probe.json [--reps 30] [--batch 32]
"""
import argparse
import datetime
import json
import statistics

import torch


def timed(fn, start, end):
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0  # us


def summary(v):
    v = sorted(v)
    return {"median": statistics.median(v), "low": v[0], "high": v[-1], "n": len(v)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    args = ap.parse_args()
    from transformers import AutoModelForImageClassification, ResNetConfig

    dev = torch.device("cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    doc = {"format": "hotkernel-conv-probe", "version": 1, "probe": "conv_probe.py",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda},
           "batch": args.batch, "reps": args.reps, "results": []}
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        torch.manual_seed(0)
        with dev:
            model = AutoModelForImageClassification.from_config(ResNetConfig(num_labels=1000), dtype=dtype)
        model.eval()
        x = torch.randn(args.batch, 3, 224, 224, device=dev, dtype=dtype)
        convs = {}

        def hook(mod, inp, _out):
            key = (tuple(inp[0].shape), tuple(mod.weight.shape), mod.stride, mod.padding, mod.groups)
            convs.setdefault(key, [mod, inp[0].detach().clone(), 0])[2] += 1

        hooks = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        with torch.no_grad():
            model(pixel_values=x)
        for h in hooks:
            h.remove()
        cl_model = None
        modes = ("off", "on", "channels_last")
        conv_modes = modes + ("roundtrip",)
        per_conv = []
        with torch.no_grad():
            for key, (mod, inp, count) in convs.items():
                inp_cl = inp.contiguous(memory_format=torch.channels_last)
                w_cl = mod.weight.contiguous(memory_format=torch.channels_last)
                run = {
                    "off": lambda: torch.nn.functional.conv2d(inp, mod.weight, None, mod.stride, mod.padding, 1, mod.groups),
                    "on": lambda: torch.nn.functional.conv2d(inp, mod.weight, None, mod.stride, mod.padding, 1, mod.groups),
                    "channels_last": lambda: torch.nn.functional.conv2d(inp_cl, w_cl, None, mod.stride, mod.padding, 1, mod.groups),
                    # the input made channels-last by ATen's copy, the output back: the layout change outside cuDNN
                    "roundtrip": lambda: torch.nn.functional.conv2d(
                        inp.contiguous(memory_format=torch.channels_last), w_cl, None, mod.stride, mod.padding, 1,
                        mod.groups).contiguous(),
                }
                ref = None
                samples = {m: [] for m in conv_modes}
                for rep in range(args.reps + 3):
                    for m in conv_modes:
                        torch.backends.cudnn.benchmark = m == "on"
                        t = timed(run[m], start, end)
                        if rep >= 3:
                            samples[m].append(t)
                outs = {}
                for m in conv_modes:
                    torch.backends.cudnn.benchmark = m == "on"
                    outs[m] = run[m]().float()
                torch.backends.cudnn.benchmark = False
                per_conv.append({"input": list(key[0]), "weight": list(key[1]), "stride": list(key[2]),
                                 "padding": list(key[3]), "groups": key[4], "callsPerForward": count,
                                 "us": {m: summary(samples[m]) for m in conv_modes},
                                 "maxAbsDiffOnVsOff": (outs["on"] - outs["off"]).abs().max().item(),
                                 "maxAbsOff": outs["off"].abs().max().item()})
            # The whole forward, interleaved.
            cl_model = model.to(memory_format=torch.channels_last)
            x_cl = x.contiguous(memory_format=torch.channels_last)
            samples = {m: [] for m in modes}
            logits = {}
            for rep in range(args.reps + 3):
                for m in modes:
                    torch.backends.cudnn.benchmark = m == "on"
                    if m == "channels_last":
                        t = timed(lambda: cl_model(pixel_values=x_cl), start, end)
                    else:
                        model.to(memory_format=torch.contiguous_format)
                        t = timed(lambda: model(pixel_values=x), start, end)
                        model.to(memory_format=torch.channels_last)
                    if rep >= 3:
                        samples[m].append(t)
            torch.backends.cudnn.benchmark = False
        total = {m: sum(c["us"][m]["median"] * c["callsPerForward"] for c in per_conv) for m in conv_modes}
        doc["results"].append({"dtype": dtype_name, "distinctConvolutions": len(per_conv),
                               "convolutionsPerForward": sum(c["callsPerForward"] for c in per_conv),
                               "sumOfConvolutionMediansUs": total,
                               "forwardUs": {m: summary(samples[m]) for m in modes},
                               "convolutions": per_conv})
        print(dtype_name, "conv sum us", {m: round(v, 1) for m, v in total.items()},
              "forward us", {m: round(summary(samples[m])["median"], 1) for m in modes}, flush=True)
        for c in per_conv:
            print("  ", c["input"], c["weight"], c["stride"], "x%d" % c["callsPerForward"],
                  {m: round(c["us"][m]["median"], 1) for m in conv_modes}, "diff %.3g" % c["maxAbsDiffOnVsOff"],
                  flush=True)
        del model, cl_model
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
