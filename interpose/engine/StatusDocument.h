#pragma once
// The engine's status document (hotkernel_status_json; the Python package's
// hotkernel.status()): its format, its version and its fusion object.
// Engine::status() (Engine.cpp) assembles it.

#include <nlohmann/json.hpp>

#include "hotkernel/interpose/FusionEngine.h"

namespace hotkernel::engine {

// Note [Status document, version 2]
// {"format": "hotkernel-status", "version": 2, ...}, with snake_case keys
// (docs/design/json-style.md): "started", "enabled", "fingerprint" (the
// lowest device's), "fingerprints" (by device), "optimizer" {"running",
// "queued", "done", "failed"}, "forked_child", "cache", "plans" [{"op",
// "variant", "device", "kernel"}], "hits", "misses", "tuned" [{"op",
// "variant", "decision", and "metrics" or "reason"}], "profile" and "fusion"
// {"on", and with the fusion engine "covered", "deferred_calls",
// "fused_flushes", "unfused_flushes", "failed_flushes", "windows",
// "hot_chains", "ready_chains", "hook_gave_up", "passed_calls" (GEMMs
// run while a chain stayed pending), "retired_chains" (taken out of the
// catalog: their kernel kept refusing to launch), "idle_starts" (chain
// starts run eagerly on a stream with nothing queued: Note [Idle streams]
// in FusionEngine.h), "last_unfused" (why the
// latest unfused flush did not fuse, "" before any), "patterns"}. The Python
// package adds "loaded".
// Kept as written, not keys of this format: the keys of "fingerprints"
// (device indices) and of "fusion.patterns" (pattern keys; each pattern's
// own keys "seen", "calls", "reported", "refusal", "segments" (the keys of
// the chains a refused pattern's segments were reported as) are this
// format's), and
// "tuned[i].metrics", a cache entry's stored metrics shown verbatim (Note
// [Tune metrics JSON]: "speedupCi", "atenUs", ... as the cache holds them).
// "profile" is the hotkernel-profile document with its own format and
// version (Note [Profile versions]).
// Version 1, the document before, had neither format nor version and
// camelCase keys ("forkedChild", "deferredCalls", "fusedFlushes",
// "unfusedFlushes", "failedFlushes", "hotChains", "readyChains",
// "hookGaveUp"). The document is never stored: a reader gets it from the
// library loaded in its own process, which ships with the project's readers,
// so none of them reads version 1. A key added keeps the version; a key
// renamed or removed, or a value whose meaning changes, takes version 3.
inline constexpr const char* kStatusFormat = "hotkernel-status";
inline constexpr int kStatusVersion = 2;

// The document's "fusion" object for a fusion engine that is `on` (its
// switch) with counters `stats`; `patterns` (FusionEngine::patternsJson,
// parsed) is shown as it is.
nlohmann::json fusionStatusDocument(bool on, const fusion::FusionStats& stats, nlohmann::json patterns);

}  // namespace hotkernel::engine
