/* The set of streams capturing a CUDA graph (Note [Pausing during graph capture]). */
#include "CaptureTracker.h"

#include <sched.h>
#include <stddef.h>

/* Streams capturing at once: far more than any program uses; past it, a
 * capture is counted without its stream (and uncounted by any end that
 * finds no stream of its own). */
#define HK_MAX_CAPTURES 256

static void* g_streams[HK_MAX_CAPTURES]; /* guarded by g_lock; NULL: free slot */
static int g_overflow = 0;               /* guarded by g_lock */
static int g_count = 0;                  /* atomic: used slots + overflow */
static char g_lock = 0;

static void lockTable(void) {
  while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE)) sched_yield();
}
static void unlockTable(void) { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

/* Precondition: g_lock held. */
static int slotOf(void* stream) {
  for (int i = 0; i < HK_MAX_CAPTURES; ++i) {
    if (g_streams[i] == stream) return i;
  }
  return -1;
}

/* Precondition: g_lock held. */
static void publishCount(void) {
  int n = g_overflow;
  for (int i = 0; i < HK_MAX_CAPTURES; ++i) n += g_streams[i] != NULL;
  __atomic_store_n(&g_count, n, __ATOMIC_RELEASE);
}

/* The legacy default stream is the NULL handle: kept under a tag so that NULL
 * still means a free slot (a capture on it fails in CUDA anyway). */
static void* keyOf(void* stream) { return stream ? stream : (void*)&g_lock; }

int hk_capture_begin(const HkCaptureApi* api, void* stream, int mode) {
  if (!api || !api->begin) return HK_CUDA_ERROR_UNKNOWN;
  const int rc = api->begin(stream, mode);
  if (rc != HK_CUDA_SUCCESS) return rc;
  void* key = keyOf(stream);
  lockTable();
  if (slotOf(key) < 0) {
    const int free = slotOf(NULL);
    if (free >= 0) {
      g_streams[free] = key;
    } else {
      ++g_overflow;
    }
  }
  publishCount();
  unlockTable();
  return rc;
}

int hk_capture_end(const HkCaptureApi* api, void* stream, void** graph) {
  if (!api || !api->end) return HK_CUDA_ERROR_UNKNOWN;
  const int rc = api->end(stream, graph);
  int ended = rc == HK_CUDA_SUCCESS;
  if (!ended) {
    int status = -1;
    if (api->isCapturing && api->isCapturing(stream, &status) == HK_CUDA_SUCCESS) {
      ended = status == HK_CAPTURE_STATUS_NONE;
    } else {
      ended = rc != HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
  }
  if (!ended) return rc;
  void* key = keyOf(stream);
  lockTable();
  const int slot = slotOf(key);
  if (slot >= 0) {
    g_streams[slot] = NULL;
  } else if (g_overflow > 0) {
    --g_overflow;
  }
  publishCount();
  unlockTable();
  return rc;
}

__attribute__((visibility("default"))) int hotkernel_captures_in_progress(void) {
  return __atomic_load_n(&g_count, __ATOMIC_ACQUIRE);
}

void hk_capture_reset(void) {
  lockTable();
  for (int i = 0; i < HK_MAX_CAPTURES; ++i) g_streams[i] = NULL;
  g_overflow = 0;
  publishCount();
  unlockTable();
}
