#include "hotkernel/kernels/VariantOptions.h"

#include <charconv>
#include <sstream>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"

namespace hotkernel::kernels {
namespace {

constexpr CrossEntropyReduction kReductions[] = {CrossEntropyReduction::None, CrossEntropyReduction::Mean,
                                                 CrossEntropyReduction::Sum};

// The whole of `text` as a decimal int64; nullopt for anything else.
std::optional<int64_t> wholeInt64(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string variantString(const VariantKey& key) {
  std::string s = "dtype=" + std::string(dtypeName(static_cast<DType>(key.dtype))) +
                  ";rows=" + std::to_string(key.rows) + ";cols=" + std::to_string(key.cols);
  if (key.inner != 0) s += ";inner=" + std::to_string(key.inner);
  if (key.hasMore()) {
    s += ";more=" + std::to_string(key.more[0]) + "," + std::to_string(key.more[1]) + "," +
         std::to_string(key.more[2]) + "," + std::to_string(key.more[3]);
  }
  if (hasWeight(key)) s += ";weight=1";
  if (hasBias(key)) s += ";bias=1";
  if (reductionOf(key) >= 0) {
    s += std::string(";reduction=") + reductionName(static_cast<CrossEntropyReduction>(reductionOf(key)));
  }
  if ((key.options & variant_options::kLayoutMask) != 0) {
    s += ";layouts=" + std::to_string(layoutOf(key, 0)) + std::to_string(layoutOf(key, 1)) +
         std::to_string(layoutOf(key, 2));
  }
  if ((key.options & variant_options::kCausal) != 0) s += ";causal=1";
  if ((key.options & variant_options::kGqa) != 0) s += ";gqa=1";
  return s;
}

std::optional<VariantKey> parseVariantString(const std::string& s, int device) {
  VariantKey k;
  k.device = device;
  bool haveDtype = false, haveRows = false, haveCols = false;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ';')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string name = part.substr(0, eq), value = part.substr(eq + 1);
    if (name == "dtype") {
      try {
        k.dtype = static_cast<int32_t>(parseDType(value));
      } catch (...) {
        return std::nullopt;
      }
      haveDtype = true;
    } else if (name == "rows" || name == "cols") {
      const std::optional<int64_t> n = wholeInt64(value);
      if (!n) return std::nullopt;
      (name == "rows" ? k.rows : k.cols) = *n;
      (name == "rows" ? haveRows : haveCols) = true;
    } else if (name == "inner") {
      // Absent for a two-extent key; present, a third extent of at least 2.
      const std::optional<int64_t> n = wholeInt64(value);
      if (!n || *n < 2) return std::nullopt;
      k.inner = *n;
    } else if (name == "reduction") {
      int32_t r = -1;
      for (CrossEntropyReduction red : kReductions) {
        if (value == reductionName(red)) r = static_cast<int32_t>(red);
      }
      if (r < 0) return std::nullopt;
      k.options = (k.options & ~variant_options::kReductionMask) | reductionOptions(r);
    } else if (name == "more") {
      std::stringstream values(value);
      std::string item;
      int n = 0;
      while (std::getline(values, item, ',')) {
        const std::optional<int64_t> m = wholeInt64(item);
        if (!m || *m < 1 || n == 4) return std::nullopt;
        k.more[n++] = *m;
      }
      if (n != 4 || value.back() == ',') return std::nullopt;
    } else if (name == "layouts") {
      if (value.size() != 3) return std::nullopt;
      int32_t classes[3];
      for (int i = 0; i < 3; ++i) {
        if (value[i] < '0' || value[i] > '3') return std::nullopt;
        classes[i] = value[i] - '0';
      }
      k.options = (k.options & ~variant_options::kLayoutMask) | layoutOptions(classes[0], classes[1], classes[2]);
    } else if (name == "weight" || name == "bias" || name == "causal" || name == "gqa") {
      if (value != "0" && value != "1") return std::nullopt;
      if (value == "1") {
        k.options |= name == "weight"   ? variant_options::kWeight
                     : name == "bias"   ? variant_options::kBias
                     : name == "causal" ? variant_options::kCausal
                                        : variant_options::kGqa;
      }
    }
  }
  if (!(haveDtype && haveRows && haveCols) || k.rows < 1 || k.cols < 1) return std::nullopt;
  return k;
}

}  // namespace hotkernel::kernels
