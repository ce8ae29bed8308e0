#pragma once
// A group norm's group view of a chain (internal to the builder): Note [The
// group view] in ChainBuilder.h.

#include <cstdint>
#include <optional>
#include <vector>

#include "TensorPlacement.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

struct GroupView {
  std::vector<int64_t> x;  // the norm's input sizes [N, C, *spatial]
  int64_t hw = 0;          // the elements a channel: the spatial dims' product
  int64_t groups = 0;

  int64_t perGroup() const { return x[1] / groups; }
  // The view's [N, G, (C / G) * HxW]: its rows and columns.
  std::vector<int64_t> view() const { return {x[0], groups, perGroup() * hw}; }
};

// The view of an aten::native_group_norm call (input, weight, bias, N, C,
// HxW, group, eps): Error (HOTKERNEL_REQUIRE) when x is not a contiguous
// [N, C, *spatial] of HxW >= 2 the call's N, C and HxW describe, its
// channels do not split into its groups, a weight or bias is not a
// contiguous [C] of x's dtype, or the mean and rstd results are not the
// contiguous [N, G] ATen returns.
GroupView groupViewOf(const RecordedCall& call, const TensorMetas& metas);

// The view of an eval batch norm (aten::native_batch_norm or
// aten::cudnn_batch_norm: input, weight, bias, running_mean, running_var,
// training, momentum, eps): one channel a group (Note [Eval BatchNorm in a
// chain]). Error when training is true or a running statistic is absent (the
// norm then reduces over the batch: no chain step), when x is not a
// contiguous [N, C, *spatial] or a per-channel value is not a contiguous [C]
// of a float dtype. Its other results are no chain value, whatever their size
// (Note [Eval BatchNorm in a chain]).
GroupView batchNormViewOf(const RecordedCall& call, const TensorMetas& metas);

// The group view of a sequence (Note [The group view]): that of its group
// norms and eval batch norms, which must agree; none without either.
std::optional<GroupView> sequenceGroupView(const std::vector<RecordedCall>& calls, const TensorMetas& metas);

// Tensor `m` (value `id`, for messages) read against x's sizes, placed in
// the view by its strides over N, C and the spatial dims; Error saying why a
// tensor is no value of the view.
Placement placeInGroupView(const GroupView& g, const TensorMeta& m, int64_t id, bool layouts);

// The norm's weight or bias ([C], contiguous): per-channel, row strides 0
// and C / G over [N, G], column repeat HxW.
Placement channelPlacement(const GroupView& g);

}  // namespace hotkernel::chain::detail
