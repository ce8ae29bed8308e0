"""How the measured copy and read bandwidths depend on the buffer size (H200).

The optimizer prices a call's bytes with bandwidths it measures itself
(Note [Copy bandwidth peak], Note [Reads are faster than copies] in
optimizer/). This probe shows why the measurement buffer must be large:
each timed call carries a fixed cost (launch, events, ramp), so a small
buffer reads low. For buffers of 128 MiB, 512 MiB and 2 GiB it times ATen's
device copy and ATen's reductions (sum and amax over the last dim, and a
full sum) of the same bytes as float32 and bfloat16 rows of several lengths,
L2 flushed before each call (a 256 MiB fill), the GPU kept busy while the
call is enqueued (torch.cuda._sleep), CUDA events, median of --reps.

Output (--out, format "hotkernel-read-bandwidth" v1): {format, version,
date, machine{gpu, torch, cuda, driver}, method, reps, sizes: [{mib,
copyGBps, reads: [{op, dtype, rows, cols, us, GBps, ofCopy}]}]}.
"""
import argparse
import datetime
import json
import statistics
import subprocess

import torch


def timed(fn, flush, reps):
    xs = []
    for _ in range(reps):
        flush.fill_(1)
        torch.cuda._sleep(100000)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        xs.append(a.elapsed_time(b) * 1e3)
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=25)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("read_bandwidth_probe: needs a CUDA device")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()
    result = {
        "format": "hotkernel-read-bandwidth", "version": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                    "driver": driver},
        "method": "CUDA events around one call, L2 flushed (256 MiB fill) and the GPU kept busy before each, median",
        "reps": args.reps, "sizes": [],
    }
    for mib in (128, 512, 1024, 2048):
        n = mib << 20
        src = torch.ones(n, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy = 2 * n / timed(lambda: dst.copy_(src), flush, args.reps) / 1e3
        del dst
        entry = {"mib": mib, "copyGBps": copy, "reads": []}
        print(f"{mib} MiB: copy {copy:.0f} GB/s")
        for dt, cols in ((torch.float32, 32768), (torch.float32, 131072), (torch.bfloat16, 131072)):
            es = 4 if dt == torch.float32 else 2
            rows = n // (es * cols)
            x = src.view(dt).view(rows, cols)
            for name, fn in (("sum", lambda: torch.sum(x, -1)), ("amax", lambda: torch.amax(x, -1)),
                             ("full sum", lambda: x.sum())):
                us = timed(fn, flush, args.reps)
                bw = n / us / 1e3
                entry["reads"].append({"op": name, "dtype": str(dt).replace("torch.", ""), "rows": rows, "cols": cols,
                                       "us": us, "GBps": bw, "ofCopy": bw / copy})
                print(f"  {name:8s} {str(dt):15s} [{rows}, {cols}] {us:8.1f} us {bw:6.0f} GB/s = {bw / copy:.3f} of copy")
        result["sizes"].append(entry)
        del src
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("written", args.out)


if __name__ == "__main__":
    main()
