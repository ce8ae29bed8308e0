// The row kernel of a chain with reductions (Note [Chain kernels] in ChainCodegen.h): its passes over the row,
// the values kept across them, the row-scope nodes, and rows split over a cluster.

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ChainEmitter.h"
#include "CodegenDetail.h"

namespace hotkernel::chain::detail {

void Emitter::rowLoop(const std::set<int>& computed, const std::set<int>& inputs, const std::set<int>& kept,
                      const std::string& inner, const std::string& after) {
  rowPassHead(inputs);
  os_ << "#pragma unroll\n      for (int j = 0; j < HK_VEC; ++j) {\n";
  emitComputed(computed, "        ", kept);
  os_ << inner << "      }\n" << after << "    }\n  }\n";
}

void Emitter::rowPassHead(const std::set<int>& inputs) {
  if (p_.items > 0) {
    os_ << "#pragma unroll\n  for (int hk_it = 0; hk_it < HK_ITEMS; ++hk_it) {\n"
           "    const int hk_v = " << firstVector() << "hk_it * HK_ROW_THREADS + hk_tid;\n    if (hk_v < hk_live) {\n";
  } else {
    os_ << "  for (int hk_v = " << firstVector() << "hk_tid; hk_v < hk_live; hk_v += HK_ROW_THREADS) {\n    {\n";
    emitLoads(inputs, "      ", false);
  }
}

std::vector<int> Emitter::passTargets(int pass) const {
  std::vector<int> targets;
  if (pass > phases_) {
    for (int o : ir_.outputs()) {
      if (scopeOf(nodes_[static_cast<size_t>(o)].shape) == Scope::Element) targets.push_back(o);
    }
    return targets;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (isReduction(nodes_[i]) && phase_[i] == pass) targets.push_back(nodes_[i].operands[0]);
  }
  return targets;
}

// Note [Values kept across passes]
// A row kernel reads its row once per reduction depth and once more for its
// outputs, and a value a later pass needs again (softmax's exp(x - max) in the
// sum's pass and in the output's) was computed again there: with a row held
// in registers (items > 0) the kernel is bound by its arithmetic, not memory,
// and the attention scores' softmax paid two expf and three scale-and-mask
// per element. So where the row is in registers, the emitter keeps such
// values: the first pass that computes one stores it in c<node>[HK_ITEMS]
// [HK_VEC], and later passes read it back instead of computing it and what
// it alone needed. A kept value is the same expression of the same inputs and
// earlier reductions, so the kernel's results are the same bits. Registers
// are the cost: greedily, the value whose recomputation costs most (a
// transcendental or a division counts 8, other ops 1; nothing of cost 1 or
// less is kept) while the kept arrays stay within 64 floats a thread; the
// tuner times the register-resident points against the streaming ones.
void Emitter::chooseKept() {
  if (!rowKernel_ || p_.items == 0) return;
  const int64_t perValue = int64_t{p_.items} * p_.vec;
  int64_t room = 64;
  auto weight = [](const Node& n) {
    switch (n.op) {
      case OpKind::Exp: case OpKind::Log: case OpKind::Rsqrt: case OpKind::Sqrt: case OpKind::Tanh:
      case OpKind::Sigmoid: case OpKind::Silu: case OpKind::GeluErf: case OpKind::GeluTanh:
      case OpKind::PowScalar: case OpKind::Reciprocal: case OpKind::Div: case OpKind::Sin: case OpKind::Cos:
      case OpKind::Erf: case OpKind::Log1p: case OpKind::Expm1:
        return 8;
      default:
        return 1;
    }
  };
  while (room >= perValue) {
    std::map<int, int> passes;  // node -> how many passes compute it
    for (int pass = 1; pass <= phases_ + 1; ++pass) {
      pass_ = pass;
      std::set<int> computed, inputs, kept;
      collect(passTargets(pass), computed, inputs, &kept);
      for (int o : computed) passes[o] += 1;
    }
    int best = -1, bestCost = 1;
    pass_ = phases_ + 2;  // every kept value available: the cost of computing a node from them
    for (const auto& [o, count] : passes) {
      if (count < 2) continue;
      std::set<int> computed, inputs, kept;
      collect({o}, computed, inputs, &kept);
      int cost = 0;
      for (int c : computed) cost += weight(nodes_[static_cast<size_t>(c)]);
      if (cost > bestCost) {
        best = o;
        bestCost = cost;
      }
    }
    if (best < 0) break;
    for (int pass = 1; pass <= phases_ + 1 && keptFrom_.count(best) == 0; ++pass) {
      pass_ = pass;
      std::set<int> computed, inputs, kept;
      collect(passTargets(pass), computed, inputs, &kept);
      if (computed.count(best) != 0) keptFrom_[best] = pass;
    }
    room -= perValue;
  }
  pass_ = 0;
}

// Note [Rows split over a cluster]
// A row kernel runs one CTA a row (or several rows a CTA): a variant of few
// long rows (a VAE's group norm: 32 rows of 262,144 elements) keeps as many
// SMs busy as it has rows. With `cluster` C > 1 (one row a CTA) a
// thread-block cluster of C CTAs serves each row: the grid is rows * C, the
// cluster's rank r CTA takes the slice of ceil(vectors / C) vectors from
// r * chunk (hk_v0), and every pass of the kernel runs over that slice only,
// streamed or held in registers. A reduction reduces the slice in the CTA as
// before (hk_row_sum / hk_row_max), thread 0 publishes the CTA's total in its
// hk_part slot (one a reduction, never reused), a cluster barrier, and every
// CTA reads the C totals from the peers' shared memory (mapa, ld.shared::
// cluster) and combines them in rank order: each CTA of the cluster holds the
// same bits, so the row's later passes agree. A last cluster barrier keeps
// each CTA's shared memory alive until its peers have read it. Row outputs
// are written by rank 0; Full and Column outputs by each CTA for its slice.
// The sum's order differs from the one-CTA kernel's (C partial sums, then
// their sum), within the chain's tolerance as any point's is. The kernel
// carries the cluster as __cluster_dims__ and HK_CLUSTER (sm_90); a kernel
// without a cluster writes none of it, so its source and cached entries stay
// as they were.
void Emitter::rowBody() {
  // A row kernel without a reduction (a repeated input's chain) still declares one slot: no array of size 0.
  os_ << "  __shared__ float hk_red[" << std::max<size_t>(reductionSlot_.size(), 1) << "][HK_THREADS / 32];\n";
  os_ << "  const int hk_nvec = static_cast<int>(cols / HK_VEC);\n"
         "  const int hk_tid = threadIdx.x & (HK_ROW_THREADS - 1);\n";
  if (p_.cluster > 1) {
    // Note [Rows split over a cluster]: the cluster's row, and this CTA's slice of its vectors.
    os_ << "  __shared__ float hk_part[" << std::max<size_t>(reductionSlot_.size(), 1) << "];\n"
           "  const long long row = static_cast<long long>(blockIdx.x) / HK_CLUSTER;\n"
           "  const unsigned hk_rank = hk_cta_rank();\n  const bool hk_live_row = row < rows;\n"
           "  const int hk_chunk = (hk_nvec + HK_CLUSTER - 1) / HK_CLUSTER;\n"
           "  const int hk_v0 = min(hk_nvec, static_cast<int>(hk_rank) * hk_chunk);\n"
           "  const int hk_live = hk_live_row ? min(hk_nvec, hk_v0 + hk_chunk) : hk_v0;\n";
  } else {
    os_ << "  const long long row = static_cast<long long>(blockIdx.x) * HK_ROWS + threadIdx.x / HK_ROW_THREADS;\n"
           "  const bool hk_live_row = row < rows;\n  const int hk_live = hk_live_row ? hk_nvec : 0;\n";
  }
  os_ << "  const long long hk_base = (hk_live_row ? row : 0) * cols;\n"
         "  const float hk_mean_factor = __fdiv_rn(static_cast<float>(rows), static_cast<float>(rows * cols));\n"
         "  (void)hk_mean_factor;\n  (void)hk_red;\n";
  if (!layout_.contiguous()) rowOffsets("(hk_live_row ? row : 0)", "  ");
  for (int in : ir_.inputs()) {
    const Node& n = nodes_[static_cast<size_t>(in)];
    if (scopeOf(n.shape) == Scope::Row) {
      os_ << "  const float r" << in << " = hk_ld_" << accessTag(n.dtype) << "(in" << in << " + (hk_live_row ? row : 0));\n";
      emitRowDivisor(in);
    } else if (scopeOf(n.shape) == Scope::Element && p_.items > 0) {
      const std::string id = std::to_string(in), tag = accessTag(n.dtype);
      const std::string offset = n.shape == ShapeClass::Column ? "hk_v * HK_VEC" : rowBase(in) + " + hk_v * HK_VEC";
      const std::string load = repeat(in) > 1 ? repeatedLoad(in) : "hk_load_" + tag + "(in" + id + " + " + offset;
      os_ << "  float x" << id << "[HK_ITEMS][HK_VEC];\n#pragma unroll\n  for (int hk_it = 0; hk_it < HK_ITEMS; ++hk_it) {\n"
          << "    const int hk_v = " << firstVector() << "hk_it * HK_ROW_THREADS + hk_tid;\n"
          << "    if (hk_v < hk_live) {\n      " << load << ", x" << id
          << "[hk_it]);\n    } else {\n#pragma unroll\n      for (int j = 0; j < HK_VEC; ++j) x" << id
          << "[hk_it][j] = 0.0f;\n    }\n  }\n";
    }
  }
  emitRowNodes(0);
  chooseKept();
  for (const auto& [o, pass] : keptFrom_) os_ << "  float c" << o << "[HK_ITEMS][HK_VEC];\n";
  for (int phase = 1; phase <= phases_; ++phase) {
    std::vector<int> reductions;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (isReduction(nodes_[i]) && phase_[i] == phase) reductions.push_back(static_cast<int>(i));
    }
    pass_ = phase;
    std::set<int> computed, inputs, kept;
    collect(passTargets(phase), computed, inputs, &kept);
    std::ostringstream inner;
    for (int r : reductions) {
      const bool max = nodes_[static_cast<size_t>(r)].op == OpKind::Amax;
      os_ << "  float a" << r << " = " << (max ? "hk_neg_inf()" : "0.0f") << ";\n";
      const std::string value = ref(nodes_[static_cast<size_t>(r)].operands[0]);
      inner << "        a" << r << (max ? " = hk_max_nan(a" + std::to_string(r) + ", " + value + ");\n" : " += " + value + ";\n");
    }
    rowLoop(computed, inputs, kept, inner.str(), "");
    for (int r : reductions) {
      const std::string slot = std::to_string(reductionSlot_.at(r));
      const std::string value = detail::rowReduction(nodes_[static_cast<size_t>(r)], "a" + std::to_string(r),
                                                     "hk_red[" + slot + "]", p_.cluster > 1 ? "&hk_part[" + slot + "]" : "");
      os_ << "  const float r" << r << " = "
          << (p_.atenRounding ? detail::roundedAsAten(nodes_[static_cast<size_t>(r)], value) : value) << ";\n";
      emitRowDivisor(r);
    }
    emitRowNodes(phase);
  }
  // The last pass: Full and Column outputs.
  const std::vector<int> elementOutputs = passTargets(phases_ + 1);
  if (!elementOutputs.empty()) {
    pass_ = phases_ + 1;
    std::set<int> computed, inputs, kept;
    collect(elementOutputs, computed, inputs, &kept);
    std::ostringstream declare, inner, after;
    for (size_t m = 0; m < ir_.outputs().size(); ++m) {
      const Node& n = nodes_[static_cast<size_t>(ir_.outputs()[m])];
      if (scopeOf(n.shape) != Scope::Element) continue;
      const std::string id = std::to_string(m), tag = accessTag(n.dtype);
      declare << "      float o" << id << "[HK_VEC];\n";
      inner << "        o" << id << "[j] = " << ref(ir_.outputs()[m]) << ";\n";
      if (n.shape == ShapeClass::Full) {
        after << "      hk_store_" << tag << "(out" << id << " + " << outputBase(m) << " + hk_v * HK_VEC, o" << id
              << ");\n";
      } else {
        after << "      if (row == 0) hk_store_" << tag << "(out" << id << " + hk_v * HK_VEC, o" << id << ");\n";
      }
    }
    // The output arrays live in the loop body, before the j loop.
    rowPassHead(inputs);
    os_ << declare.str() << "#pragma unroll\n      for (int j = 0; j < HK_VEC; ++j) {\n";
    emitComputed(computed, "        ", kept);
    os_ << inner.str() << "      }\n" << after.str() << "    }\n  }\n";
  }
  pass_ = 0;
  for (size_t m = 0; m < ir_.outputs().size(); ++m) {
    const int o = ir_.outputs()[m];
    const Node& n = nodes_[static_cast<size_t>(o)];
    if (scopeOf(n.shape) != Scope::Row) continue;
    os_ << "  if (hk_tid == 0 && hk_live_row" << (p_.cluster > 1 ? " && hk_rank == 0" : "") << ") hk_st_"
        << accessTag(n.dtype) << "(out" << m << " + row, " << ref(o) << ");\n";
  }
  // Note [Rows split over a cluster]: the peers read this CTA's hk_part until their last reduction.
  if (p_.cluster > 1) os_ << "  hk_cluster_sync();\n";
}

// The first vector of this CTA's part of the row: a cluster's slice (Note [Rows split over a cluster]), else 0
// (nothing written, so a kernel without a cluster keeps its source).
std::string Emitter::firstVector() const { return p_.cluster > 1 ? "hk_v0 + " : ""; }

void Emitter::emitRowNodes(int phase) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (isLeaf(n) || isReduction(n) || scopeOf(n.shape) != Scope::Row || phase_[i] != phase) continue;
    os_ << "  const float r" << i << " = " << expr(static_cast<int>(i)) << ";\n";
    emitRowDivisor(static_cast<int>(i));
  }
}

bool Emitter::rowDivisor(int o) const {
  if (p_.atenRounding || nodes_[static_cast<size_t>(o)].shape != ShapeClass::Row) return false;
  return std::any_of(nodes_.begin(), nodes_.end(),
                     [o](const Node& n) { return n.op == OpKind::Div && n.operands[1] == o; });
}

void Emitter::emitRowDivisor(int o) {
  if (!rowDivisor(o)) return;
  const std::string r = "r" + std::to_string(o);
  os_ << "  const float " << r << "_k = hk_row_scale(" << r << ");\n"
      << "  const float " << r << "_rcp = __fdiv_rn(1.0f, __fmul_rn(" << r << ", " << r << "_k));\n";
}

}  // namespace hotkernel::chain::detail
