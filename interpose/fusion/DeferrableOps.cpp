#include "DeferrableOps.h"

#include <string>
#include <unordered_set>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {

const std::vector<DeferrableOp>& deferrableOps() {
  static const std::vector<DeferrableOp> ops = {
      {"aten::neg", "", "out"},
      {"aten::exp", "", "out"},
      {"aten::log", "", "out"},
      {"aten::rsqrt", "", "out"},
      {"aten::sqrt", "", "out"},
      {"aten::tanh", "", "out"},
      {"aten::sigmoid", "", "out"},
      {"aten::silu", "", "out"},
      {"aten::relu", "", "out"},
      {"aten::abs", "", "out"},
      {"aten::reciprocal", "", "out"},
      {"aten::sin", "", "out"},
      {"aten::cos", "", "out"},
      {"aten::erf", "", "out"},
      {"aten::log1p", "", "out"},
      {"aten::expm1", "", "out"},
      {"aten::hardsigmoid", "", "out"},
      {"aten::hardswish", "", "out"},
      {"aten::leaky_relu", "", "out"},
      {"aten::softplus", "", "out"},  // Note [Softplus and Mish in a chain]
      {"aten::mish", "", "out"},
      {"aten::maximum", "", "out"},
      {"aten::minimum", "", "out"},
      {"aten::clamp", "", "out"},  // Note [Clamp in a chain]
      {"aten::clamp_min", "", "out"},
      {"aten::clamp_max", "", "out"},
      {"aten::hardtanh", "", "out"},
      {"aten::gelu", "", "out"},
      {"aten::pow", "Tensor_Scalar", "Tensor_Scalar_out"},
      {"aten::add", "Tensor", "out"},
      {"aten::sub", "Tensor", "out"},
      {"aten::mul", "Tensor", "out"},
      {"aten::div", "Tensor", "out"},
      {"aten::add", "Scalar", "Scalar_out"},
      {"aten::sub", "Scalar", "Scalar_out"},
      {"aten::mul", "Scalar", "Scalar_out"},
      {"aten::div", "Scalar", "Scalar_out"},
      {"aten::rsub", "Scalar", "Scalar_out"},
      {"aten::rsub", "Tensor", "Tensor_out"},
      {"aten::_to_copy", "", nullptr},
      {"aten::clone", "", "out"},  // Note [Relayout copies]
      {"aten::sum", "dim_IntList", "IntList_out"},
      {"aten::mean", "dim", "out"},
      {"aten::amax", "", "out"},
      {"aten::cat", "", "out"},  // Tensor[] tensors, int dim: HF's rotate_half
      {"aten::_softmax", "", "out"},  // Note [Softmax in a chain]
      {"aten::_log_softmax", "", "out"},
      {"aten::native_layer_norm", "", "out"},  // Note [LayerNorm in a chain]: out0, out1, out2
      {"aten::native_group_norm", "", "out"},  // Note [GroupNorm in a chain]: out0, out1, out2
      // Note [Eval BatchNorm in a chain]: out, save_mean, save_invstd (cuDNN's out0-out3); a training call never
      // matches a learned step (its flag differs), so only eval calls are deferred. Only with
      // FusionOptions::evalBatchNorm (HOTKERNEL_FUSION_BATCH_NORM).
      {"aten::native_batch_norm", "", "out"},
      {"aten::cudnn_batch_norm", "", "out"},  // as native_batch_norm: Note [cuDNN's batch norm in a chain]
      // Note [In-place steps]: replayed as themselves, on the value as the chain took it. Only with
      // FusionOptions::inPlace (HOTKERNEL_FUSION_IN_PLACE).
      {"aten::relu_", "", nullptr},
      {"aten::silu_", "", nullptr},
      {"aten::sigmoid_", "", nullptr},
      {"aten::tanh_", "", nullptr},
      {"aten::gelu_", "", nullptr},
      {"aten::hardtanh_", "", nullptr},
      {"aten::hardswish_", "", nullptr},
      {"aten::hardsigmoid_", "", nullptr},
      {"aten::leaky_relu_", "", nullptr},
      {"aten::mish_", "", nullptr},
      {"aten::clamp_", "", nullptr},
      {"aten::clamp_min_", "", nullptr},
      {"aten::clamp_max_", "", nullptr},
      {"aten::neg_", "", nullptr},
      {"aten::exp_", "", nullptr},
      {"aten::rsqrt_", "", nullptr},
      {"aten::sqrt_", "", nullptr},
      {"aten::reciprocal_", "", nullptr},
      {"aten::add_", "Tensor", nullptr},
      {"aten::sub_", "Tensor", nullptr},
      {"aten::mul_", "Tensor", nullptr},
      {"aten::div_", "Tensor", nullptr},
      {"aten::add_", "Scalar", nullptr},
      {"aten::sub_", "Scalar", nullptr},
      {"aten::mul_", "Scalar", nullptr},
      {"aten::div_", "Scalar", nullptr},
  };
  return ops;
}

std::string qualifiedName(const DeferrableOp& op) {
  std::string s = op.name;
  if (op.overload[0] != '\0') s += std::string(".") + op.overload;
  return s;
}

std::vector<ResolvedOp> resolveDeferrableOps(bool evalBatchNorm, bool inPlace) {
  std::vector<ResolvedOp> resolved;
  const auto& table = deferrableOps();
  auto& dispatcher = c10::Dispatcher::singleton();
  for (size_t i = 0; i < table.size(); ++i) {
    const DeferrableOp& d = table[i];
    const std::string name = d.name;
    if (!evalBatchNorm && (name == "aten::native_batch_norm" || name == "aten::cudnn_batch_norm")) continue;
    const bool writesSelf = name.back() == '_';
    if (writesSelf && !inPlace) continue;
    ResolvedOp r;
    r.index = i;
    r.inPlace = writesSelf;
    r.qualified = qualifiedName(d);
    r.op = dispatcher.findSchema({d.name, d.overload});
    if (!r.op) {
      HOTKERNEL_LOG(Debug) << "fusion: " << r.qualified << " is not in this torch";
      continue;
    }
    r.functionalArgs = r.op->schema().arguments().size();
    if (d.outOverload != nullptr) {
      r.out = dispatcher.findSchema({d.name, d.outOverload});
      const size_t results = r.op->schema().returns().size();  // one out= argument each
      if (!r.out || r.out->schema().arguments().size() != r.functionalArgs + results ||
          r.out->schema().returns().size() != results) {
        HOTKERNEL_LOG(Debug) << "fusion: " << r.qualified << " has no usable ." << d.outOverload
                             << " overload; it is not deferred";
        continue;
      }
    }
    resolved.push_back(std::move(r));
  }
  return resolved;
}

namespace {

// Resolves the functional overloads `names` (absent ones said at debug level), indexed from `firstIndex`.
std::vector<ResolvedOp> resolveOthers(const std::vector<const char*>& names, size_t firstIndex, bool passing) {
  std::vector<ResolvedOp> resolved;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const char* name : names) {
    ResolvedOp r;
    r.index = firstIndex + resolved.size();  // after every deferrable op: never a chain step
    r.qualified = name;
    r.passing = passing;
    r.flushing = !passing;
    r.op = dispatcher.findSchema({name, ""});
    if (!r.op) {
      HOTKERNEL_LOG(Debug) << "fusion: " << name << " is not in this torch";
      continue;
    }
    r.functionalArgs = r.op->schema().arguments().size();
    resolved.push_back(std::move(r));
  }
  return resolved;
}

const std::vector<const char*>& passingOpNames() {
  static const std::vector<const char*> names = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"};
  return names;
}

// Passing too with FusionOptions::passConvolutions: cuDNN's, CUDA's depthwise kernel, ATen's own 2-d kernel,
// oneDNN's on the CPU.
const std::vector<const char*>& convolutionOpNames() {
  static const std::vector<const char*> names = {
      "aten::cudnn_convolution",
      "aten::cudnn_convolution_transpose",
      "aten::cudnn_convolution_relu",
      "aten::cudnn_convolution_add_relu",
      "aten::_conv_depthwise2d",
      "aten::_slow_conv2d_forward",
      "aten::mkldnn_convolution",
  };
  return names;
}

}  // namespace

std::vector<ResolvedOp> resolvePassingOps(bool convolutions) {
  std::vector<const char*> names = passingOpNames();
  if (convolutions) names.insert(names.end(), convolutionOpNames().begin(), convolutionOpNames().end());
  return resolveOthers(names, deferrableOps().size(), true);
}

const std::vector<const char*>& flushingOpNames() {
  static const std::vector<const char*> names = {
      // cuDNN
      "aten::_scaled_dot_product_cudnn_attention",
      "aten::_cudnn_attention_forward",
      "aten::cudnn_convolution",
      "aten::cudnn_convolution_transpose",
      "aten::cudnn_convolution_relu",
      "aten::cudnn_convolution_add_relu",
      "aten::cudnn_batch_norm",  // a step instead with FusionOptions::evalBatchNorm (resolveEngineOps)
      "aten::_cudnn_rnn",
      "aten::_cudnn_ctc_loss",
      "aten::cudnn_grid_sampler",
      "aten::cudnn_affine_grid_generator",
      // cuBLAS / cuBLASLt / cuSPARSELt, besides the GEMMs a chain lets pass
      "aten::addmv",
      "aten::dot",
      "aten::vdot",
      "aten::addbmm",
      "aten::_addmm_activation",
      "aten::_scaled_mm",
      "aten::_int_mm",
      "aten::_cslt_sparse_mm",
      // cuFFT
      "aten::_fft_c2c",
      "aten::_fft_r2c",
      "aten::_fft_c2r",
  };
  return names;
}

std::vector<ResolvedOp> resolveFlushingOps() {
  return resolveOthers(flushingOpNames(),
                       deferrableOps().size() + passingOpNames().size() + convolutionOpNames().size(), false);
}

std::vector<ResolvedOp> resolveEngineOps(bool evalBatchNorm, bool inPlace, bool passConvolutions) {
  std::vector<ResolvedOp> ops = resolveDeferrableOps(evalBatchNorm, inPlace);
  std::unordered_set<std::string> taken;
  for (const ResolvedOp& r : ops) taken.insert(r.qualified);
  auto append = [&](std::vector<ResolvedOp> others) {
    for (ResolvedOp& r : others) {
      if (taken.insert(r.qualified).second) ops.push_back(std::move(r));
    }
  };
  append(resolvePassingOps(passConvolutions));
  append(resolveFlushingOps());
  return ops;
}

}  // namespace hotkernel::fusion
