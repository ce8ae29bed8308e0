#pragma once
// Learns hot chains: windows of consecutive deferrable calls on one thread
// and stream, counted by their pattern.
//
// Note [Learning chains]
// A window opens at a deferrable call (run by its original kernel or
// deferred: so a longer chain around a published one is learned too) and
// grows with each following one; it ends at the first command hotkernel
// does not issue (the shim's hook: a kernel of another op, a copy, a
// synchronize...), at a call on another thread, stream or device, at a call
// that cannot take part in a chain (Note [What a chain may hold]), or at
// kMaxWindowCalls calls. A window ends once its last call has returned to
// the caller and the caller went on, so the values the caller still holds
// are exactly those it reads later: they are the pattern's live values
// (weak references tell, Note [Chain patterns]). A pattern seen `hotCalls`
// times is built into a chain (buildChain with the live values and
// layouts: strided and broadcast values as the calls had them, Note
// [Chain layouts]; the build's layout belongs to the chain's variant); a built
// chain is reported once to the hot callback, a refused one is remembered
// with its reason and never built again; its buildable segments are
// reported in its place (Note [Segments of a refused window]). At most kMaxPatterns patterns are
// counted; past that, new ones are not.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "CallCapture.h"
#include "hotkernel/interpose/ChainCatalog.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainPattern.h"
#include "hotkernel/chain/ChainSegments.h"

namespace hotkernel::fusion {

class ChainLearner {
 public:
  static constexpr size_t kMaxWindowCalls = 32;
  static constexpr size_t kMaxPatterns = 4096;

  using HotCallback = std::function<void(const HotChain&)>;
  ChainLearner(int64_t hotCalls, HotCallback onHot) : hotCalls_(hotCalls), onHot_(std::move(onHot)) {}

  // The open window's values (new tensors of a call are numbered here).
  ValueTable& values() { return values_; }
  bool open() const { return !calls_.empty(); }
  // The window holds kMaxWindowCalls calls: the caller ends it (close, or
  // drop when references it holds itself would make values look live).
  bool full() const { return calls_.size() >= kMaxWindowCalls; }
  // Appends a call whose arguments were captured in values() and whose
  // outputs ran; numbers the outputs. Returns false (and drops the call) for
  // an output that is not a plain tensor; the caller then ends the window
  // (close, with the window's index). `inPlace`:
  // the call wrote its first argument, which must be a value a call of the
  // window returned (Note [In-place steps in the table]).
  bool append(chain::RecordedCall call, const std::vector<at::Tensor>& outputs, bool inPlace = false);
  // Ends the window, the `window`-th the engine ended (learned or skipped;
  // Note [Learning a pattern that recurs]): counts its pattern, reports it
  // when it turns hot.
  void close(uint64_t window);
  // Drops the window without counting it.
  void drop();

  struct PatternStats {
    int64_t seen = 0;
    int64_t calls = 0;
    bool reported = false;
    std::string refusal;  // why buildChain refused it, once tried
    std::string key;      // the pattern's key (SHA-256), once it turned hot
    // A refused pattern: the keys of the segments reported in its place (Note [Segments of a refused window]).
    std::vector<std::string> segments;
    uint64_t lastWindow = 0;  // the window that last showed it (close's `window`)
  };
  // By windowDigest: windows are counted without building their text.
  const std::map<uint64_t, PatternStats>& patterns() const { return patterns_; }
  // Counts what closing windows taught: a pattern not seen before, one
  // reported hot, one refused (Note [Sampled learning]).
  uint64_t news() const { return news_; }
  // Note [Learning a pattern that recurs]
  // Sampled learning (Note [Sampled learning]) sees a pattern that recurs
  // once in g windows (a block that appears once in a model's step: a
  // ResNet's downsampling blocks, a decoder's last norm) once in
  // learnOneWindowIn of its recurrences, so it would turn hot that many
  // times later than the patterns around it. A sighting of a pattern that is
  // neither reported nor refused yet, g windows after its last one, asks
  // for every window to be learned until 2g windows after it: its next
  // recurrence is learned too, and the one after that asks again, until it
  // is hot (the sighting that makes it hot asks for none). A pattern that
  // does not recur lets the hold run out; one that recurs less often than
  // once in kMaxHoldWindows (a decoder's step at one sequence length, seen
  // once a generation) asks for none. What holds cost is bounded: fewer than
  // hotCalls sightings of each pattern ask for one.
  static constexpr uint64_t kMaxHoldWindows = 4096;
  // Every window up to this one (the engine's count of ended windows) is
  // learned; 0: none asked.
  uint64_t learnUntil() const { return learnUntil_; }

 private:
  int64_t hotCalls_;
  HotCallback onHot_;
  ValueTable values_{false};
  std::vector<chain::RecordedCall> calls_;
  std::map<uint64_t, PatternStats> patterns_;
  uint64_t news_ = 0;
  uint64_t learnUntil_ = 0;
};

}  // namespace hotkernel::fusion
