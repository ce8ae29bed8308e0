/*
 * The C API exported by libhotkernel.so. Every function is safe to call from
 * any thread, never throws, and returns a negative value on failure.
 * Programs reach it with dlsym(RTLD_DEFAULT, "hotkernel_...") (or ctypes in
 * Python) after the preload shim has loaded the library.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Called by the preload shim once libtorch is in the process. Idempotent.
 * Returns 0 when hotkernel is active, 1 when disabled by HOTKERNEL=0, <0 on error. */
int hotkernel_start(void);

/* Routes overridden ops to hotkernel kernels (1) or always to ATen (0); with
 * HOTKERNEL_FUSION=1, switches chain fusion too (0: pending chains run, then
 * every op runs on its own). Returns the previous setting. Used by benchmarks
 * to compare in one process. */
int hotkernel_set_enabled(int enabled);

/* Blocks until the background optimizer has no queued or running work, or the
 * timeout passes. Returns 0 when idle, 1 on timeout. */
int hotkernel_wait_idle(double timeout_seconds);

/* Number of variants currently served by a hotkernel kernel. */
int hotkernel_plan_count(void);

/* Writes a JSON status document (plans, recorded variants, decisions) into buf
 * (NUL-terminated, truncated to size). Returns the full length needed. */
int hotkernel_status_json(char* buf, int size);

/* The benchmark method's statistics (optimizer/Statistics.h) over n paired
 * times of a baseline and a candidate (any unit, all > 0), for benchmark
 * programs that time in Python (bench/ops_bench.py): writes
 * {"baseline":{"median","low","high","n"},"candidate":{..},"speedup":{..}}
 * (speedup = baseline_i / candidate_i, median with its 95% CI) into buf like
 * hotkernel_status_json. Returns the full length needed, <0 on bad input. */
int hotkernel_compare_samples(const double* baseline, const double* candidate, int n, char* buf, int size);

#ifdef __cplusplus
}
#endif
