#pragma once
// The chain kernel generator's emitter (ChainCodegen.h): one instance writes one
// kernel's source. Its row-kernel and plain elementwise bodies are in
// ChainCodegen.cpp, the bodies of chains evaluated per column segment (a Cat or
// a layout) in ChainSegmentCodegen.cpp.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"

namespace hotkernel::chain::detail {

enum class Scope { Element, Row, Uniform };

inline Scope scopeOf(ShapeClass s) {
  if (s == ShapeClass::Full || s == ShapeClass::Column) return Scope::Element;
  if (s == ShapeClass::Scalar) return Scope::Uniform;
  return Scope::Row;
}
inline bool isReduction(const Node& n) { return opInfo(n.op).category == OpCategory::Reduction; }
inline bool isLeaf(const Node& n) { return opInfo(n.op).category == OpCategory::Leaf; }

class Emitter {
 public:
  Emitter(const ChainIR& ir, const ChainKernelParams& p, const ChainLayout& layout);
  std::string source();

 private:
  void signature();
  // The value of node `o` where a node reads it.
  std::string ref(int o) const;
  std::string expr(int i) const;
  // The element-scope nodes (computed, and inputs) that `targets` need in an
  // element loop; Row and Uniform values are available there already.
  // With `kept`, a node kept by an earlier pass of the row kernel (keptFrom_)
  // goes there instead of being computed again (Note [Values kept across passes]).
  void collect(const std::vector<int>& targets, std::set<int>& computed, std::set<int>& inputs,
               std::set<int>* kept = nullptr) const;
  void emitLoads(const std::set<int>& inputs, const std::string& indent, bool pointwise);
  // The j loop's statements: the kept values read back, then the computed
  // nodes in order, each one this pass keeps stored for the later ones.
  void emitComputed(const std::set<int>& computed, const std::string& indent, const std::set<int>& kept = {});
  std::string refAt(int o, int64_t shift) const;
  // The (node, shift) pairs of element-scope computed nodes and inputs that
  // `targets` need in the segment starting at segLo_.
  void collectAt(const std::vector<int>& targets, std::set<std::pair<int, int64_t>>& computed,
                 std::set<std::pair<int, int64_t>>& inputs) const;
  // The tensor argument index of input node `o` or output `m`.
  size_t argOfInput(int o) const { return inputArg_.at(o); }
  // A Full input's column repeat (Note [Repeated columns]); 1 for any other input.
  int64_t repeat(int input) const;
  // The call that loads a repeated input's vector at hk_v (without ", name);" as emitVectorLoad takes it).
  std::string repeatedLoad(int input) const;
  // The macro repeatedLoad calls.
  std::string repeatedLoaders() const;
  // "hk_v0 + " in a cluster's kernel, else "".
  std::string firstVector() const;
  size_t argOfOutput(size_t m) const { return inputArg_.size() + m; }
  // Declares hk_o<k>, the row offset of every Full tensor argument k, at row `row`.
  void rowOffsets(const std::string& row, const std::string& indent);
  // The loads of `inputs` at their shifts, for the vector at column hk_c.
  void emitLoadsAt(const std::set<std::pair<int, int64_t>>& inputs, const std::string& indent);
  // Every segment's code: for the vector at hk_c, `inner` writes the
  // segment's statements after its loads and computed nodes.
  void segments(const std::vector<int>& targets, const std::string& indent,
                const std::function<std::string()>& inner);
  // What `write` writes to os_, returned instead.
  std::string captured(const std::function<void()>& write);
  // Whether the kernel is elementwise with items > 0 (Note [Unrolled elementwise chains]).
  bool unrolled() const { return !rowKernel_ && p_.items > 0; }
  // The elementwise kernels' loop over the hk_nvec vectors, `perVector` writing the statements for the vector
  // hk_v: its position, positionEnd(), then its loads through emitVectorLoad / emitScalarLoad, then the rest
  // (Note [Unrolled elementwise chains]).
  void vectorLoop(const std::function<void()>& perVector);
  // Gathering: what the body wrote so far is the vector's position.
  void positionEnd();
  // `float name[HK_VEC]; call, name);` (call: "hk_load_bf16(in0 + offset"), or gathered.
  void emitVectorLoad(const std::string& indent, const std::string& name, const std::string& call);
  // `const float name = call;`, or gathered.
  void emitScalarLoad(const std::string& indent, const std::string& name, const std::string& call);
  // The statements that place the vector hk_v, `perRow` vectors a row: its row, its column `column`, the row
  // offsets and the Row inputs.
  void vectorPosition(const char* perRow, const char* column);
  void foldedPointwiseVector();
  void segmentedPointwiseVector();
  void pointwiseVector(const std::set<int>& computed, const std::set<int>& inputs, bool rowCol);
  void foldedPointwiseBody();
  void segmentedPointwiseBody();
  void pointwiseBody();
  // One pass over the row: loads (streaming), the j loop with `computed`,
  // then `inner` inside the j loop and `after` after it.
  void rowLoop(const std::set<int>& computed, const std::set<int>& inputs, const std::set<int>& kept,
               const std::string& inner, const std::string& after);
  // The element values the row kernel computes in a pass: a phase's
  // reduction operands (1..phases_), then the element outputs (phases_ + 1).
  std::vector<int> passTargets(int pass) const;
  // A row pass's loop head: over the items held in registers, or streaming with `inputs` loaded.
  void rowPassHead(const std::set<int>& inputs);
  // Fills keptFrom_ (Note [Values kept across passes]).
  void chooseKept();
  void rowBody();
  // A transposed copy's tiled kernel (Note [Transposed copies]; ChainTransposeCodegen.cpp).
  void transposedBody();
  std::string rowBase(int input) const;
  std::string outputBase(size_t m) const;
  // The Row-class computed nodes of `phase`, once per row.
  void emitRowNodes(int phase);
  // Whether node `o` is a Row value a fused kernel divides by (Note [Division by a row value]).
  bool rowDivisor(int o) const;
  // After a row kernel's `const float r<o>`: its scale r<o>_k and reciprocal r<o>_rcp, if rowDivisor(o).
  void emitRowDivisor(int o);

  const ChainIR& ir_;
  const ChainKernelParams& p_;
  const ChainLayout& layout_;
  const std::vector<Node>& nodes_;
  std::map<int, size_t> inputArg_;  // tensor input node -> its tensor argument index
  bool segmented_ = false;          // a layout or a Cat: Note [Chain kernel segments]
  int64_t segLo_ = 0;               // the segment being emitted starts at this column
  int64_t refShift_ = 0;            // the shift of the node being emitted
  std::vector<int> phase_;              // reductions on the longest path to the node, itself included
  std::map<int, int> reductionSlot_;    // reduction node -> its hk_red slot
  int phases_ = 0;
  bool rowKernel_ = false;
  std::map<int, int> keptFrom_;  // element node -> the row kernel pass that computes and keeps it
  int pass_ = 0;                 // the row kernel pass being emitted; 0 outside it
  // Note [Unrolled elementwise chains]: while a body is written for the full step (gather_), its loads go to
  // loads_ and its position to position_, and an input's value is its array at hk_u (item_).
  struct VectorLoad {
    bool scalar;
    std::string name, call;
  };
  bool gather_ = false;
  std::string item_;
  std::string position_;
  std::vector<VectorLoad> loads_;
  std::ostringstream os_;
};

}  // namespace hotkernel::chain::detail
