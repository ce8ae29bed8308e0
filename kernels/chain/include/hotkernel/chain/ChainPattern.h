#pragma once
// A chain as the dispatcher delivers it: the calls of one window, every
// value's metadata and the values still referenced when the window ended.
//
// Note [Chain patterns]
// The deferral engine matches arriving calls against learned chains step by
// step, so a learned chain is kept in the form the calls arrive in, not only
// as its IR. Value ids are canonical: numbered from 0 in order of first
// appearance (each call's tensor arguments left to right, then its
// outputs), so a window recorded at one time and the calls arriving later
// number their values alike exactly when their dataflow is the same; the
// engine assigns ids this way as calls arrive. Two steps are the same when
// the op, every argument (tensor ids, numbers bit for bit, lists, flags,
// strings), the output ids and the metadata of every tensor they name are
// equal. `live` holds the values that were still referenced once the window
// ended (the next command or call): the fused kernel writes them, and only
// them (buildChain's liveOutputs). The pattern's key is the SHA-256 of its
// canonical text, which names everything above.

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain {

struct ChainPattern {
  std::vector<RecordedCall> calls;
  TensorMetas metas;
  std::vector<int64_t> live;  // canonical ids, ascending

  // The canonical text: one line a call, then the metadata of every value, then the live set.
  std::string text() const;
  // SHA-256 (hex) of text().
  std::string key() const;
};

// Whether `a` (with its values' metadata `ma`) is the same step as `b` (with `mb`).
bool sameStep(const RecordedCall& a, const TensorMetas& ma, const RecordedCall& b, const TensorMetas& mb);
// The same, with `a`'s arguments' metadata looked up in `maArgs` and its
// outputs' in `maOutputs` (a call being matched: its inputs are in the
// chain's table, its outputs' metadata is a candidate pattern's).
bool sameStep(const RecordedCall& a, const TensorMetas& maArgs, const TensorMetas& maOutputs, const RecordedCall& b,
              const TensorMetas& mb);

// The text of one step with its tensors' metadata.
std::string stepText(const RecordedCall& call, const TensorMetas& metas);

// 64-bit FNV-1a digests of what text() and stepText() name, without
// building the text: the learner counts windows and the catalog indexes
// first steps by them on every call (Note [Chain patterns]: equal steps have
// equal digests; a collision only merges two counts or adds a candidate that
// the step comparison then drops). `withOutputs` false: the step without its
// outputs. The calls' ids must be canonical (numbered by first appearance).
uint64_t stepDigest(const RecordedCall& call, const TensorMetas& metas, bool withOutputs);
uint64_t windowDigest(const std::vector<RecordedCall>& calls, const TensorMetas& metas,
                      const std::vector<int64_t>& live);

// Renumbers a window's value ids canonically (Note [Chain patterns]); `live`
// holds ids of the window's own numbering. Throws Error for a call that names
// a value without metadata.
ChainPattern canonicalPattern(const std::vector<RecordedCall>& calls, const TensorMetas& metas,
                              const std::vector<int64_t>& live);

}  // namespace hotkernel::chain
