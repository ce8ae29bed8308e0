"""Wall time per call of ATen's softmax on [4096, 32000] fp32 against its kernel time: is a loop of them
device-bound? CuptiAttributionGpuTest saw 421 us of kernel per call in 1.1 ms of wall under the recorder
with CUPTI. Run plain (with --kernels: torch.profiler's kernel list), and under the preload with
HOTKERNEL_CUPTI=0 / 1 (HOTKERNEL_SAMPLE=1) to see what the recorder and CUPTI add."""
import sys
import time

import torch

x = torch.randn(4096, 32000, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
for _ in range(3):
    torch._softmax(x, -1, False)
torch.mm(a, a)
torch.cuda.synchronize()
for name, fn, n in (("softmax", lambda: torch._softmax(x, -1, False), 50), ("mm", lambda: torch.mm(a, a), 20)):
    walls = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) / n * 1e6)
    print(f"{name}: wall per call us {min(walls):.1f} (of 3 loops: {', '.join(f'{w:.1f}' for w in walls)})")
if "--kernels" in sys.argv:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(10):
            torch._softmax(x, -1, False)
        torch.cuda.synchronize()
    ks = {}
    for e in p.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            ks.setdefault(e.name, []).append(e.device_time_total)
    for k, v in ks.items():
        print(f"{len(v)} x {k[:100]}: median {sorted(v)[len(v) // 2]:.1f} us")
