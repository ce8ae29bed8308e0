#include "hotkernel/chain/RecordedCall.h"

#include <sstream>

namespace hotkernel::chain {

RecordedArg RecordedArg::tensor(int64_t id) {
  RecordedArg a;
  a.kind = Kind::Tensor;
  a.value = id;
  return a;
}

RecordedArg RecordedArg::number(double v) {
  RecordedArg a;
  a.kind = Kind::Scalar;
  a.scalar = v;
  return a;
}

RecordedArg RecordedArg::intList(std::vector<int64_t> v) {
  RecordedArg a;
  a.kind = Kind::IntList;
  a.ints = std::move(v);
  return a;
}

RecordedArg RecordedArg::boolean(bool v) {
  RecordedArg a;
  a.kind = Kind::Bool;
  a.flag = v;
  return a;
}

RecordedArg RecordedArg::string(std::string v) {
  RecordedArg a;
  a.kind = Kind::String;
  a.text = std::move(v);
  return a;
}

RecordedArg RecordedArg::none() { return RecordedArg{}; }

RecordedArg RecordedArg::tensorList(std::vector<int64_t> ids) {
  RecordedArg a;
  a.kind = Kind::TensorList;
  a.ints = std::move(ids);
  return a;
}

std::string describeCall(const RecordedCall& call) {
  std::ostringstream os;
  os << call.op << "(";
  for (size_t i = 0; i < call.args.size(); ++i) {
    const RecordedArg& a = call.args[i];
    if (i) os << ", ";
    switch (a.kind) {
      case RecordedArg::Kind::Tensor:
        os << "%" << a.value;
        break;
      case RecordedArg::Kind::Scalar:
        os << a.scalar;
        break;
      case RecordedArg::Kind::IntList:
        os << "[";
        for (size_t k = 0; k < a.ints.size(); ++k) os << (k ? ", " : "") << a.ints[k];
        os << "]";
        break;
      case RecordedArg::Kind::Bool:
        os << (a.flag ? "True" : "False");
        break;
      case RecordedArg::Kind::String:
        os << "'" << a.text << "'";
        break;
      case RecordedArg::Kind::None:
        os << "None";
        break;
      case RecordedArg::Kind::TensorList:
        os << "[";
        for (size_t k = 0; k < a.ints.size(); ++k) os << (k ? ", " : "") << "%" << a.ints[k];
        os << "]";
        break;
    }
  }
  os << ") -> (";
  for (size_t i = 0; i < call.outputs.size(); ++i) os << (i ? ", " : "") << "%" << call.outputs[i];
  os << ")";
  return os.str();
}

}  // namespace hotkernel::chain
