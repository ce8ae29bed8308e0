// chain_kernel_tool: compiles the fused kernel of a named chain
// (hotkernel/chain/NamedChains.h) with NVRTC at a set of parameter points and
// writes each point's cubin with a manifest, for bench/fusion_bench.py to load
// through the driver API, check against eager PyTorch and time. Torch-free; no
// GPU needed (NVRTC only).
//
//   chain_kernel_tool --chain rmsnorm --dtype bfloat16 [--eps 1e-6] --shape 4096x4096 \
//       [--arch sm_90] [--points t256v8r1i0,...] [--jobs N] --out DIR
//
// --chain is rmsnorm (LlamaRMSNorm with its weight; --eps, default 1e-6),
// swiglu, newgelu, residual-add-cast (--to, the cast's dtype, default
// float32), residual-layernorm (GPT-2's and BERT's layer_norm(x + residual)
// with its weight and bias, the sum kept: chain::residualLayerNormChain;
// --eps), rotary (HF's apply_rotary_pos_emb for one of q or k as the
// dispatcher delivers it: chain::rotaryChain in chain::rotaryLayout; --shape
// is BATCHxHEADSxSEQxHEADDIM, the chain's view [BATCH * HEADS * SEQ, HEADDIM])
// or attention-softmax (HF's eager attention scores: softmax(scores * scale +
// mask, -1) with the mask shared by the heads: chain::attentionSoftmaxChain in
// chain::attentionSoftmaxLayout; --shape is BATCHxHEADSxQUERIESxKEYS, --scale
// default 0.125) or transpose-copy (matmul's contiguous copy of k^T in HF's
// eager attention, k a head view of a fused QKV projection of three parts:
// chain::relayoutCopyChain in chain::headTransposeCopyLayout, Note [Transposed
// layouts]; --shape is BATCHxHEADSxSEQxHEADDIM, the chain's view [BATCH *
// HEADS * HEADDIM, SEQ]). Without --points the tuner's space is compiled
// (chainParameterSpace, Note [Chain parameter space]), so that the bench
// measures what the tuner can pick. A point the shape rules out
// (chainVariantProblem) is listed as skipped with the reason; an out-of-range
// point given in --points is a usage error.
//
// Exit status: 0 every point compiled; 1 NVRTC is unavailable, a point failed
// to compile (the manifest still lists it, with the error) or a file could not
// be written; 2 bad arguments, or no point serves the shape.
//
// Note [Chain kernel manifest, v2]
// DIR/manifest.json:
// {
//   "format": "hotkernel-chain-kernels", "version": 2,
//   "chain": "rmsnorm", "dtype": "bfloat16",
//   "eps": 1e-06,                        // rmsnorm and residual-layernorm only
//   "to": "float32",                     // residual-add-cast only
//   "rotary": {"batch": 1, "heads": 32, "seq": 4096, "headDim": 128},  // rotary only
//   "attention": {"batch": 16, "heads": 12, "queries": 512, "keys": 512, "scale": 0.125},  // attention-softmax only
//   "transpose": {"batch": 16, "heads": 12, "seq": 512, "headDim": 64, "parts": 3},  // transpose-copy only
//   "layout": {"rowDims": [...], "strides": [[...], ...]},  // the variant's layout; {} when contiguous
//   "rows": 4096, "cols": 4096, "arch": "sm_90", "nvrtcVersion": 13000,
//   "kernel": "hk_chain",                // the cubin's entry point
//   "ir": {...},                         // the chain (Note [Chain JSON, v2])
//   "points": [{
//     "name": "t256v8r1i0",              // threads, vec, rowsPerCta, items; "f" at the end: folded
//     "params": {"threads": 256, "vec": 8, "rowsPerCta": 1, "items": 0},  // "fold": true when folded
//     "cubin": "t256v8r1i0.cubin",       // next to the manifest; null when the compile failed
//     "source": "t256v8r1i0.cu",         // the generated CUDA source
//     "error": null,                     // NVRTC's message and log when the compile failed
//     "registers": 32, "spillBytes": 0,  // from ptxas' report, -1 when absent
//     "compileSeconds": 0.8,
//     "grid": 4096, "block": 256, "sharedBytes": 0,   // for [rows, cols] (dynamic shared memory)
//     "args": [                          // hk_chain's parameters in order (Note [Chain kernel arguments])
//       {"kind": "input", "node": 0, "dtype": "bfloat16", "shape": "full", "alignment": 16, "cols": 4096,
//        "span": 16777216},
//       {"kind": "input", "node": 1, "dtype": "bfloat16", "shape": "column", "alignment": 16, "cols": 4096,
//        "span": 4096},
//       {"kind": "output", "node": 11, "dtype": "bfloat16", "shape": "full", "alignment": 16, "cols": 4096,
//        "span": 16777216},
//       {"kind": "rows"}, {"kind": "cols"}
//     ]}],
//   "skipped": [{"name": "t128v8r4i16", "params": {...}, "problem": "cols 8192 is over the registers' 4096 ..."}]
// }
// Arg kinds: "input" (a tensor: `const void*`), "scalar_input" (a float32 by
// value), "output" (`void*`), "rows" and "cols" (long long). A pointer's
// "alignment" is the byte alignment its accesses need; "node" indexes "ir"'s
// nodes. Shapes are the chain's classes over [rows, cols] (Note [Chain shape
// classes]): full [rows, cols], column [cols], row [rows, 1], row_flat
// [rows]; a tensor's "cols" is its column extent (Note [Chain column
// extents]) and "span" the elements its memory spans in the layout
// (layoutSpan: rows * cols for a contiguous full value). Version 1 was the
// same without "rotary", "layout", "cols" and "span"; "attention" came with
// the attention-softmax chain and "transpose" with transpose-copy (a reader
// of version 2 that does not know the chain does not ask for it); a
// transposed layout's "layout" holds "colStrides". A later version
// changes "version"; readers refuse versions they do not know.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace {

using hotkernel::chain::ChainArg;
using hotkernel::chain::ChainIR;
using hotkernel::chain::ChainKernelParams;
using hotkernel::kernels::DType;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr const char* kManifestFormat = "hotkernel-chain-kernels";
constexpr int kManifestVersion = 2;
const std::vector<std::string> kChains = {"rmsnorm", "swiglu", "newgelu", "residual-add-cast", "rotary",
                                          "attention-softmax", "transpose-copy"};
// The fused QKV projection's parts in a transpose-copy (GPT-2's c_attn: q, k, v).
constexpr int64_t kQkvParts = 3;

struct Args {
  std::string chain;
  std::string dtype = "bfloat16";
  double eps = 1e-6;
  std::string to = "float32";
  double scale = 0.125;
  std::string shape;
  std::string arch = "sm_90";
  std::string points;
  std::string out;
  int jobs = 0;
};

// A usage error: printed with the program's name, exit 2.
struct UsageError {
  std::string message;
};

// "t256v8r1i0", "t128v8r1i0f" (folded): the point's name in --points, the manifest and the file names.
std::string pointName(const ChainKernelParams& p) {
  return "t" + std::to_string(p.threads) + "v" + std::to_string(p.vec) + "r" + std::to_string(p.rowsPerCta) + "i" +
         std::to_string(p.items) + (p.fold ? "f" : "");
}

ChainKernelParams parsePoint(const std::string& text) {
  static const std::regex kPoint(R"(t(\d{1,5})v(\d{1,2})r(\d{1,5})i(\d{1,3})(f?))");
  std::smatch m;
  if (!std::regex_match(text, m, kPoint)) {
    throw UsageError{"bad point '" + text + "' (want tTHREADSvVECrROWSiITEMS[f], e.g. t256v8r1i0)"};
  }
  return {std::stoi(m[1].str()), std::stoi(m[2].str()), std::stoi(m[3].str()), std::stoi(m[4].str()), false,
          m[5].length() > 0};
}

std::pair<int64_t, int64_t> parseShape(const std::string& text) {
  static const std::regex kShape(R"((\d{1,12})[xX](\d{1,12}))");
  std::smatch m;
  if (!std::regex_match(text, m, kShape)) throw UsageError{"bad --shape '" + text + "' (want ROWSxCOLS, e.g. 4096x4096)"};
  const int64_t rows = std::stoll(m[1].str()), cols = std::stoll(m[2].str());
  if (rows < 1 || cols < 1) throw UsageError{"bad --shape '" + text + "': rows and cols must be >= 1"};
  return {rows, cols};
}

DType parseDTypeArg(const std::string& text, const char* option) {
  try {
    return hotkernel::kernels::parseDType(text);
  } catch (const hotkernel::Error&) {
    throw UsageError{std::string("bad ") + option + " '" + text + "' (float32, float16 or bfloat16)"};
  }
}

ChainIR buildChain(const Args& a, const CLI::App& app) {
  const DType dtype = parseDTypeArg(a.dtype, "--dtype");
  const bool epsGiven = app.count("--eps") > 0, toGiven = app.count("--to") > 0;
  const bool takesEps = a.chain == "rmsnorm" || a.chain == "residual-layernorm";
  if (epsGiven && !takesEps) {
    throw UsageError{"--eps is rmsnorm's and residual-layernorm's; --chain " + a.chain + " has none"};
  }
  if (app.count("--scale") > 0 && a.chain != "attention-softmax") {
    throw UsageError{"--scale is attention-softmax's; --chain " + a.chain + " has none"};
  }
  if (toGiven && a.chain != "residual-add-cast") {
    throw UsageError{"--to is residual-add-cast's; --chain " + a.chain + " has none"};
  }
  if (takesEps && (!std::isfinite(a.eps) || a.eps <= 0)) {
    std::ostringstream text;
    text << "bad --eps " << a.eps << " (want a finite value > 0)";
    throw UsageError{text.str()};
  }
  if (a.chain == "rmsnorm") return hotkernel::chain::rmsNormChain(dtype, a.eps);
  if (a.chain == "residual-layernorm") return hotkernel::chain::residualLayerNormChain(dtype, a.eps);
  if (a.chain == "swiglu") return hotkernel::chain::swigluChain(dtype);
  if (a.chain == "newgelu") return hotkernel::chain::newGeluChain(dtype);
  if (a.chain == "residual-add-cast") {
    return hotkernel::chain::residualAddCastChain(dtype, parseDTypeArg(a.to, "--to"));
  }
  throw UsageError{"unknown --chain '" + a.chain +
                   "' (rmsnorm, swiglu, newgelu, residual-add-cast, residual-layernorm, rotary, attention-softmax, "
                   "transpose-copy)"};
}

// A --shape of four extents AxBxCxD (`form` names them, `example` shows one), each >= 1.
std::array<int64_t, 4> parseFourExtents(const std::string& text, const std::string& chain, const char* form,
                                        const char* example) {
  static const std::regex kShape(R"((\d{1,6})[xX](\d{1,6})[xX](\d{1,9})[xX](\d{1,9}))");
  std::smatch m;
  if (!std::regex_match(text, m, kShape)) {
    throw UsageError{"bad --shape '" + text + "' for " + chain + " (want " + form + ", e.g. " + example + ")"};
  }
  const std::array<int64_t, 4> e = {std::stoll(m[1].str()), std::stoll(m[2].str()), std::stoll(m[3].str()),
                                    std::stoll(m[4].str())};
  if (*std::min_element(e.begin(), e.end()) < 1) throw UsageError{"bad --shape '" + text + "': every extent >= 1"};
  return e;
}

// The attention-softmax chain's --shape: BATCHxHEADSxQUERIESxKEYS.
hotkernel::chain::AttentionShape parseAttentionShape(const std::string& text) {
  const auto e = parseFourExtents(text, "attention-softmax", "BATCHxHEADSxQUERIESxKEYS", "16x12x512x512");
  return hotkernel::chain::AttentionShape{e[0], e[1], e[2], e[3]};
}

// The rotary chain's --shape: BATCHxHEADSxSEQxHEADDIM, an even head dim.
hotkernel::chain::RotaryShape parseRotaryShape(const std::string& text) {
  const auto e = parseFourExtents(text, "rotary", "BATCHxHEADSxSEQxHEADDIM", "1x32x4096x128");
  if (e[3] < 2 || e[3] % 2 != 0) throw UsageError{"bad --shape '" + text + "': every extent >= 1, an even head dim"};
  return hotkernel::chain::RotaryShape{e[0], e[1], e[2], e[3]};
}

// The transpose-copy chain's --shape: BATCHxHEADSxSEQxHEADDIM.
hotkernel::chain::RotaryShape parseTransposeShape(const std::string& text) {
  const auto e = parseFourExtents(text, "transpose-copy", "BATCHxHEADSxSEQxHEADDIM", "16x12x512x64");
  return hotkernel::chain::RotaryShape{e[0], e[1], e[2], e[3]};
}

void addUnique(std::vector<ChainKernelParams>* points, const ChainKernelParams& p) {
  if (std::find(points->begin(), points->end(), p) == points->end()) points->push_back(p);
}

struct Compiled {
  std::string error;
  int registers = -1;
  int spillBytes = -1;
  double seconds = 0;
};

int firstInt(const std::string& log, const std::regex& re) {
  std::smatch m;
  return std::regex_search(log, m, re) ? std::stoi(m[1].str()) : -1;
}

void writeFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  HOTKERNEL_CHECK(static_cast<bool>(f.flush()), "cannot write ", path.string());
}

Compiled compilePoint(const ChainIR& ir, const ChainKernelParams& p, const hotkernel::chain::ChainLayout& layout,
                      const std::string& arch, const std::filesystem::path& dir) {
  Compiled c;
  const std::string name = pointName(p);
  try {
    const std::string source = hotkernel::chain::generateChainSource(ir, p, layout);
    writeFile(dir / (name + ".cu"), source);
    std::vector<std::string> options = hotkernel::chain::chainCompileOptions();
    options.push_back("--ptxas-options=-v");
    const hotkernel::NvrtcOutput out = hotkernel::compileToCubin(source, name + ".cu", arch, options);
    c.seconds = out.compileSeconds;
    static const std::regex kRegisters(R"(Used (\d+) registers)");
    static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
    static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
    c.registers = firstInt(out.log, kRegisters);
    const int stores = firstInt(out.log, kSpillStores), loads = firstInt(out.log, kSpillLoads);
    c.spillBytes = stores < 0 || loads < 0 ? -1 : stores + loads;
    if (out.cubin.size() < 4 || out.cubin.compare(0, 4, "\x7f" "ELF") != 0) {
      c.error = "NVRTC's output is not an ELF image";
      return c;
    }
    writeFile(dir / (name + ".cubin"), out.cubin);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

const char* argKindName(ChainArg::Kind kind) {
  switch (kind) {
    case ChainArg::Kind::Input: return "input";
    case ChainArg::Kind::ScalarInput: return "scalar_input";
    case ChainArg::Kind::Output: return "output";
    case ChainArg::Kind::Rows: return "rows";
    case ChainArg::Kind::Cols: return "cols";
  }
  return "?";
}

nlohmann::json paramsJson(const ChainKernelParams& p) {
  nlohmann::json j = {{"threads", p.threads}, {"vec", p.vec}, {"rowsPerCta", p.rowsPerCta}, {"items", p.items}};
  if (p.fold) j["fold"] = true;
  return j;
}

nlohmann::json argsJson(const ChainIR& ir, const ChainKernelParams& p, const hotkernel::chain::ChainLayout& layout,
                        int64_t rows, int64_t cols) {
  nlohmann::json args = nlohmann::json::array();
  size_t tensorArg = 0;
  for (const ChainArg& a : hotkernel::chain::chainKernelLayout(ir, p, layout)) {
    nlohmann::json j = {{"kind", argKindName(a.kind)}};
    if (a.kind == ChainArg::Kind::Input || a.kind == ChainArg::Kind::ScalarInput || a.kind == ChainArg::Kind::Output) {
      j["node"] = a.node;
      j["dtype"] = hotkernel::kernels::dtypeName(a.dtype);
      j["shape"] = hotkernel::chain::shapeClassName(a.shape);
      j["alignment"] = a.alignmentBytes;
    }
    if (a.kind == ChainArg::Kind::Input || a.kind == ChainArg::Kind::Output) {
      j["cols"] = hotkernel::chain::extentOf(ir.node(a.node), cols);
      j["span"] = hotkernel::chain::layoutSpan(ir, layout, tensorArg++, rows, cols);
    }
    args.push_back(j);
  }
  return args;
}

int run(const Args& a, const CLI::App& app) {
  const bool rotary = a.chain == "rotary", attention = a.chain == "attention-softmax";
  const bool transpose = a.chain == "transpose-copy";
  hotkernel::chain::RotaryShape rotaryShape, transposeShape;
  hotkernel::chain::AttentionShape attentionShape;
  hotkernel::chain::ChainLayout layout;
  ChainIR ir;
  int64_t rows = 0, cols = 0;
  if (rotary) {
    rotaryShape = parseRotaryShape(a.shape);
    ir = hotkernel::chain::rotaryChain(parseDTypeArg(a.dtype, "--dtype"), rotaryShape.headDim);
    layout = hotkernel::chain::rotaryLayout(rotaryShape);
    rows = hotkernel::chain::rotaryRows(rotaryShape);
    cols = rotaryShape.headDim;
  } else if (attention) {
    if (!std::isfinite(a.scale) || a.scale <= 0) {
      std::ostringstream text;
      text << "bad --scale " << a.scale << " (want a finite value > 0)";
      throw UsageError{text.str()};
    }
    attentionShape = parseAttentionShape(a.shape);
    ir = hotkernel::chain::attentionSoftmaxChain(parseDTypeArg(a.dtype, "--dtype"), a.scale);
    layout = hotkernel::chain::attentionSoftmaxLayout(attentionShape);
    rows = hotkernel::chain::attentionRows(attentionShape);
    cols = attentionShape.keys;
  } else if (transpose) {
    if (app.count("--eps") > 0 || app.count("--to") > 0 || app.count("--scale") > 0) {
      throw UsageError{"--eps, --to and --scale are other chains'; --chain transpose-copy has none"};
    }
    transposeShape = parseTransposeShape(a.shape);
    ir = hotkernel::chain::relayoutCopyChain(parseDTypeArg(a.dtype, "--dtype"));
    layout = hotkernel::chain::headTransposeCopyLayout(transposeShape, kQkvParts);
    rows = transposeShape.batch * transposeShape.heads * transposeShape.headDim;
    cols = transposeShape.seq;
    if (!layout.transposed()) {
      throw UsageError{"--shape '" + a.shape + "' makes no transposed copy (a sequence of 1 is a plain copy)"};
    }
  } else {
    ir = buildChain(a, app);
    std::tie(rows, cols) = parseShape(a.shape);
  }
  static const std::regex kArch(R"(sm_\d{2,3}a?)");
  if (!std::regex_match(a.arch, kArch)) throw UsageError{"bad --arch '" + a.arch + "' (e.g. sm_90, sm_90a, sm_80)"};
  if (a.jobs < 0) throw UsageError{"bad --jobs " + std::to_string(a.jobs) + " (want >= 1, or 0 for every core)"};

  std::vector<ChainKernelParams> candidates;
  if (a.points.empty()) {
    candidates = hotkernel::chain::chainParameterSpace(ir, rows, cols, layout);  // what the tuner can pick
  } else {
    size_t start = 0;
    while (start <= a.points.size()) {
      const size_t comma = std::min(a.points.find(',', start), a.points.size());
      const ChainKernelParams p = parsePoint(a.points.substr(start, comma - start));
      try {
        hotkernel::chain::checkChainKernel(ir, p);
      } catch (const hotkernel::Error& e) {
        throw UsageError{"point " + pointName(p) + " is out of range for " + a.chain + ": " + e.what()};
      }
      addUnique(&candidates, p);
      start = comma + 1;
    }
  }
  nlohmann::json skipped = nlohmann::json::array();
  std::vector<ChainKernelParams> points;
  for (const ChainKernelParams& p : candidates) {
    const std::string problem = hotkernel::chain::chainVariantProblem(ir, p, rows, cols, layout);
    if (problem.empty()) {
      points.push_back(p);
    } else {
      skipped.push_back({{"name", pointName(p)}, {"params", paramsJson(p)}, {"problem", problem}});
    }
  }
  if (points.empty()) {
    std::string why;
    for (const auto& s : skipped) why += "\n  " + s["name"].get<std::string>() + ": " + s["problem"].get<std::string>();
    throw UsageError{"no parameter point serves [" + std::to_string(rows) + ", " + std::to_string(cols) + "]" + why};
  }

  if (!hotkernel::nvrtcAvailable()) {
    std::cerr << "chain_kernel_tool: NVRTC is unavailable: " << hotkernel::nvrtcUnavailableReason() << "\n";
    return kExitFailed;
  }
  const std::filesystem::path dir(a.out);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::cerr << "chain_kernel_tool: cannot create " << a.out << ": " << ec.message() << "\n";
    return kExitFailed;
  }

  // NVRTC compiles each program on its own thread (Note [NVRTC thread safety]).
  std::vector<Compiled> compiled(points.size());
  const unsigned workers = std::min<unsigned>(
      static_cast<unsigned>(points.size()),
      a.jobs > 0 ? static_cast<unsigned>(a.jobs) : std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < points.size(); i = next++) compiled[i] = compilePoint(ir, points[i], layout, a.arch, dir);
    });
  }
  for (std::thread& t : threads) t.join();

  nlohmann::json manifest = {{"format", kManifestFormat},
                             {"version", kManifestVersion},
                             {"chain", a.chain},
                             {"dtype", hotkernel::kernels::dtypeName(parseDTypeArg(a.dtype, "--dtype"))}};
  if (a.chain == "rmsnorm" || a.chain == "residual-layernorm") manifest["eps"] = a.eps;
  if (a.chain == "residual-add-cast") manifest["to"] = hotkernel::kernels::dtypeName(parseDTypeArg(a.to, "--to"));
  if (rotary) {
    manifest["rotary"] = {{"batch", rotaryShape.batch},
                          {"heads", rotaryShape.heads},
                          {"seq", rotaryShape.seq},
                          {"headDim", rotaryShape.headDim}};
  }
  if (attention) {
    manifest["attention"] = {{"batch", attentionShape.batch},     {"heads", attentionShape.heads},
                             {"queries", attentionShape.queries}, {"keys", attentionShape.keys},
                             {"scale", a.scale}};
  }
  if (transpose) {
    manifest["transpose"] = {{"batch", transposeShape.batch},
                             {"heads", transposeShape.heads},
                             {"seq", transposeShape.seq},
                             {"headDim", transposeShape.headDim},
                             {"parts", kQkvParts}};
  }
  manifest["layout"] = layout.contiguous() ? nlohmann::json::object() : hotkernel::chain::layoutToJson(layout);
  manifest["rows"] = rows;
  manifest["cols"] = cols;
  manifest["arch"] = a.arch;
  manifest["nvrtcVersion"] = hotkernel::nvrtcVersion();
  manifest["kernel"] = hotkernel::chain::kChainKernelName;
  manifest["ir"] = hotkernel::chain::chainToJson(ir);
  manifest["points"] = nlohmann::json::array();
  int failures = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const ChainKernelParams& p = points[i];
    const Compiled& c = compiled[i];
    const hotkernel::kernels::LaunchGeometry g = hotkernel::chain::chainLaunchGeometry(ir, p, rows, cols, layout);
    const std::string name = pointName(p);
    nlohmann::json point = {{"name", name},
                            {"params", paramsJson(p)},
                            {"cubin", c.error.empty() ? nlohmann::json(name + ".cubin") : nlohmann::json(nullptr)},
                            {"source", name + ".cu"},
                            {"error", c.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.error)},
                            {"registers", c.registers},
                            {"spillBytes", c.spillBytes},
                            {"compileSeconds", std::round(c.seconds * 1000) / 1000},
                            {"grid", g.gridX},
                            {"block", g.blockX},
                            {"sharedBytes", g.sharedBytes},
                            {"args", argsJson(ir, p, layout, rows, cols)}};
    manifest["points"].push_back(point);
    failures += !c.error.empty();
    std::printf("%-14s %s grid %u block %u registers %d spills %d%s%s\n", name.c_str(),
                c.error.empty() ? "ok  " : "FAIL", g.gridX, g.blockX, c.registers, c.spillBytes,
                c.error.empty() ? "" : ": ", c.error.substr(0, c.error.find('\n')).c_str());
  }
  for (const auto& s : skipped) {
    std::printf("%-14s skip %s\n", s["name"].get<std::string>().c_str(), s["problem"].get<std::string>().c_str());
  }
  manifest["skipped"] = skipped;
  const std::filesystem::path tmp = dir / "manifest.json.tmp";
  writeFile(tmp, manifest.dump(1) + "\n");
  std::filesystem::rename(tmp, dir / "manifest.json");
  std::printf("%s %s [%lld, %lld] %s: %zu compiled, %d failed, %zu skipped; %s\n", a.chain.c_str(),
              a.dtype.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), a.arch.c_str(),
              points.size() - failures, failures, skipped.size(), (dir / "manifest.json").string().c_str());
  return failures == 0 ? kExitOk : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Compiles a named chain's fused kernel with NVRTC at parameter points: cubins and a manifest",
               "chain_kernel_tool"};
  app.add_option("--chain", a.chain,
                 "rmsnorm, swiglu, newgelu, residual-add-cast, rotary, attention-softmax or transpose-copy")
      ->required();
  app.add_option("--dtype", a.dtype, "the chain's dtype: float32, float16, bfloat16")->capture_default_str();
  app.add_option("--eps", a.eps, "rmsnorm's and residual-layernorm's eps")->capture_default_str();
  app.add_option("--to", a.to, "residual-add-cast's cast dtype")->capture_default_str();
  app.add_option("--scale", a.scale, "attention-softmax's scale of the scores")->capture_default_str();
  app.add_option("--shape", a.shape, "ROWSxCOLS of the chain's [rows, cols] view (rotary: BxHxSxD; attention-softmax: BxHxQxK)")
      ->required();
  app.add_option("--arch", a.arch, "NVRTC's real architecture")->capture_default_str();
  app.add_option("--points", a.points, "comma list of tTHREADSvVECrROWSiITEMS (default: the chain kind's set)");
  app.add_option("--jobs", a.jobs, "parallel compiles (0: one a core)")->capture_default_str();
  app.add_option("--out", a.out, "directory for the cubins, sources and manifest.json")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help arrives here too, with 0
  }
  try {
    return run(a, app);
  } catch (const UsageError& e) {
    std::cerr << "chain_kernel_tool: " << e.message << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "chain_kernel_tool: error: " << e.what() << "\n";
    return kExitFailed;
  }
}
