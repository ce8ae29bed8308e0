#include "hotkernel/chain/ChainPattern.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::chain {
namespace {

uint64_t bitsOf(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

bool sameArg(const RecordedArg& a, const RecordedArg& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case RecordedArg::Kind::Tensor:
      return a.value == b.value;
    case RecordedArg::Kind::Scalar:
      return bitsOf(a.scalar) == bitsOf(b.scalar);
    case RecordedArg::Kind::IntList:
    case RecordedArg::Kind::TensorList:
      return a.ints == b.ints;
    case RecordedArg::Kind::Bool:
      return a.flag == b.flag;
    case RecordedArg::Kind::String:
      return a.text == b.text;
    case RecordedArg::Kind::None:
      return true;
  }
  return false;
}

bool sameMeta(int64_t id, const TensorMetas& ma, const TensorMetas& mb) {
  auto a = ma.find(id);
  auto b = mb.find(id);
  if (a == ma.end() || b == mb.end()) return false;
  return a->second.scalarType == b->second.scalarType && a->second.sizes == b->second.sizes &&
         a->second.strides == b->second.strides;
}

void writeList(std::ostringstream& os, const std::vector<int64_t>& v) {
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
}

void writeArg(std::ostringstream& os, const RecordedArg& a) {
  switch (a.kind) {
    case RecordedArg::Kind::Tensor:
      os << "%" << a.value;
      break;
    case RecordedArg::Kind::Scalar:
      os << "#" << std::hex << bitsOf(a.scalar) << std::dec;
      break;
    case RecordedArg::Kind::IntList:
      writeList(os, a.ints);
      break;
    case RecordedArg::Kind::Bool:
      os << (a.flag ? "true" : "false");
      break;
    case RecordedArg::Kind::String:
      os << "'" << a.text.size() << ":" << a.text << "'";
      break;
    case RecordedArg::Kind::None:
      os << "None";
      break;
    case RecordedArg::Kind::TensorList:
      os << "[";
      for (size_t i = 0; i < a.ints.size(); ++i) os << (i ? "," : "") << "%" << a.ints[i];
      os << "]";
      break;
  }
}

void writeCall(std::ostringstream& os, const RecordedCall& call) {
  os << call.op << "(";
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (i) os << ",";
    writeArg(os, call.args[i]);
  }
  os << ")->";
  writeList(os, call.outputs);
}

void writeMeta(std::ostringstream& os, int64_t id, const TensorMeta& m) {
  os << "%" << id << ":" << m.scalarType;
  writeList(os, m.sizes);
  writeList(os, m.strides);
}

// The in-memory digest of steps and windows (never stored): a word at a time,
// each word mixed by a multiply and a shift, since it runs on every learned
// call (a byte at a time was the learner's largest own cost).
struct Digest {
  uint64_t h = 1469598103934665603ull;
  void word(uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  void bytes(const void* p, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (; n >= 8; n -= 8, c += 8) {
      uint64_t w;
      std::memcpy(&w, c, 8);
      word(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, c, n);
    word(tail);
  }
  void i64(int64_t v) { word(static_cast<uint64_t>(v)); }
  void str(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void list(const std::vector<int64_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  void meta(int64_t id, const TensorMetas& metas) {
    auto it = metas.find(id);
    if (it == metas.end()) {
      i64(-1);
      return;
    }
    str(it->second.scalarType);
    list(it->second.sizes);
    list(it->second.strides);
  }
  void call(const RecordedCall& c, const TensorMetas& metas, bool withOutputs) {
    str(c.op);
    i64(static_cast<int64_t>(c.args.size()));
    for (const RecordedArg& a : c.args) {
      i64(static_cast<int64_t>(a.kind));
      switch (a.kind) {
        case RecordedArg::Kind::Tensor:
          i64(a.value);
          meta(a.value, metas);
          break;
        case RecordedArg::Kind::Scalar:
          i64(static_cast<int64_t>(bitsOf(a.scalar)));
          break;
        case RecordedArg::Kind::IntList:
          list(a.ints);
          break;
        case RecordedArg::Kind::Bool:
          i64(a.flag ? 1 : 0);
          break;
        case RecordedArg::Kind::String:
          str(a.text);
          break;
        case RecordedArg::Kind::None:
          break;
        case RecordedArg::Kind::TensorList:
          list(a.ints);
          for (int64_t id : a.ints) meta(id, metas);
          break;
      }
    }
    if (!withOutputs) return;
    list(c.outputs);
    for (int64_t out : c.outputs) meta(out, metas);
  }
};

}  // namespace

uint64_t stepDigest(const RecordedCall& call, const TensorMetas& metas, bool withOutputs) {
  Digest f;
  f.call(call, metas, withOutputs);
  return f.h;
}

uint64_t windowDigest(const std::vector<RecordedCall>& calls, const TensorMetas& metas,
                      const std::vector<int64_t>& live) {
  Digest f;
  for (const RecordedCall& c : calls) f.call(c, metas, true);
  f.list(live);
  return f.h;
}

bool sameStep(const RecordedCall& a, const TensorMetas& ma, const RecordedCall& b, const TensorMetas& mb) {
  return sameStep(a, ma, ma, b, mb);
}

bool sameStep(const RecordedCall& a, const TensorMetas& maArgs, const TensorMetas& maOutputs, const RecordedCall& b,
              const TensorMetas& mb) {
  if (a.op != b.op || a.args.size() != b.args.size() || a.outputs != b.outputs) return false;
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (!sameArg(a.args[i], b.args[i])) return false;
    for (int64_t id : a.args[i].tensorIds()) {
      if (!sameMeta(id, maArgs, mb)) return false;
    }
  }
  for (int64_t out : a.outputs) {
    if (!sameMeta(out, maOutputs, mb)) return false;
  }
  return true;
}

std::string stepText(const RecordedCall& call, const TensorMetas& metas) {
  std::ostringstream os;
  writeCall(os, call);
  auto meta = [&](int64_t id) {
    auto it = metas.find(id);
    HOTKERNEL_REQUIRE(it != metas.end(), "value %", id, " has no tensor metadata");
    os << " ";
    writeMeta(os, id, it->second);
  };
  for (const RecordedArg& a : call.args) {
    for (int64_t id : a.tensorIds()) meta(id);
  }
  for (int64_t out : call.outputs) meta(out);
  return os.str();
}

std::string ChainPattern::text() const {
  std::ostringstream os;
  os << "hotkernel-chain-pattern v1\n";
  for (const RecordedCall& c : calls) {
    writeCall(os, c);
    os << "\n";
  }
  for (const auto& [id, m] : metas) {
    writeMeta(os, id, m);
    os << "\n";
  }
  os << "live";
  writeList(os, live);
  os << "\n";
  return os.str();
}

std::string ChainPattern::key() const { return sha256Hex(text()); }

ChainPattern canonicalPattern(const std::vector<RecordedCall>& calls, const TensorMetas& metas,
                              const std::vector<int64_t>& live) {
  std::map<int64_t, int64_t> renumber;
  ChainPattern p;
  auto idOf = [&](int64_t v) {
    auto it = renumber.find(v);
    if (it != renumber.end()) return it->second;
    auto m = metas.find(v);
    HOTKERNEL_REQUIRE(m != metas.end(), "value %", v, " has no tensor metadata");
    const int64_t id = static_cast<int64_t>(renumber.size());
    renumber[v] = id;
    p.metas[id] = m->second;
    return id;
  };
  for (const RecordedCall& call : calls) {
    RecordedCall c = call;
    for (RecordedArg& a : c.args) {
      if (a.kind == RecordedArg::Kind::Tensor) a.value = idOf(a.value);
      if (a.kind == RecordedArg::Kind::TensorList) {
        for (int64_t& id : a.ints) id = idOf(id);
      }
    }
    for (int64_t& out : c.outputs) out = idOf(out);
    p.calls.push_back(std::move(c));
  }
  for (int64_t v : live) {
    auto it = renumber.find(v);
    HOTKERNEL_REQUIRE(it != renumber.end(), "live value %", v, " is not a value of the calls");
    p.live.push_back(it->second);
  }
  std::sort(p.live.begin(), p.live.end());
  p.live.erase(std::unique(p.live.begin(), p.live.end()), p.live.end());
  return p;
}

}  // namespace hotkernel::chain
