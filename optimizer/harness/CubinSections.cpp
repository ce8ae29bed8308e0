#include "hotkernel/optimizer/CubinSections.h"

#include <cstdint>
#include <cstring>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// ELF64 layout (System V gABI): the fields read here, little-endian.
constexpr size_t kEhdrSize = 64;
constexpr size_t kShdrSize = 64;
constexpr uint64_t kShfWrite = 0x1;
constexpr uint64_t kShfAlloc = 0x2;
constexpr uint32_t kShtNobits = 8;

template <typename T>
T readAt(const std::string& image, uint64_t offset) {
  HOTKERNEL_CHECK(offset <= image.size() && image.size() - offset >= sizeof(T), "ELF image truncated at offset ",
                  offset);
  T v;
  std::memcpy(&v, image.data() + offset, sizeof(T));
  return v;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<CubinSection> cubinSections(const std::string& image) {
  HOTKERNEL_CHECK(image.size() >= kEhdrSize && image.compare(0, 4, "\x7f" "ELF") == 0, "not an ELF image");
  HOTKERNEL_CHECK(image[4] == 2, "not a 64-bit ELF image");
  HOTKERNEL_CHECK(image[5] == 1, "not a little-endian ELF image");
  const uint64_t shoff = readAt<uint64_t>(image, 0x28);
  const uint16_t shentsize = readAt<uint16_t>(image, 0x3A);
  const uint16_t shnum = readAt<uint16_t>(image, 0x3C);
  const uint16_t shstrndx = readAt<uint16_t>(image, 0x3E);
  if (shnum == 0) return {};
  HOTKERNEL_CHECK(shentsize == kShdrSize, "unexpected ELF section header size ", shentsize);
  HOTKERNEL_CHECK(shstrndx < shnum, "ELF section name table index ", shstrndx, " out of range");
  HOTKERNEL_CHECK(shoff <= image.size() && (image.size() - shoff) / kShdrSize >= shnum,
                  "ELF section headers beyond the image");
  auto header = [&](uint16_t i) { return shoff + uint64_t{i} * kShdrSize; };
  const uint64_t namesOffset = readAt<uint64_t>(image, header(shstrndx) + 0x18);
  const uint64_t namesSize = readAt<uint64_t>(image, header(shstrndx) + 0x20);
  HOTKERNEL_CHECK(namesOffset <= image.size() && image.size() - namesOffset >= namesSize,
                  "ELF section name table beyond the image");
  std::vector<CubinSection> sections;
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t h = header(i);
    const uint32_t nameAt = readAt<uint32_t>(image, h);
    const uint32_t type = readAt<uint32_t>(image, h + 0x04);
    const uint64_t flags = readAt<uint64_t>(image, h + 0x08);
    const uint64_t offset = readAt<uint64_t>(image, h + 0x18);
    const uint64_t size = readAt<uint64_t>(image, h + 0x20);
    HOTKERNEL_CHECK(nameAt < namesSize || (i == 0 && nameAt == 0), "ELF section ", i, " name out of range");
    if (type != kShtNobits) {
      HOTKERNEL_CHECK(offset <= image.size() && image.size() - offset >= size, "ELF section ", i,
                      " beyond the image");
    }
    CubinSection s;
    if (namesSize > 0) {
      const char* begin = image.data() + namesOffset + nameAt;
      s.name.assign(begin, strnlen(begin, namesSize - nameAt));
    }
    s.size = size;
    s.writable = (flags & kShfWrite) != 0;
    s.allocated = (flags & kShfAlloc) != 0;
    s.nobits = type == kShtNobits;
    sections.push_back(std::move(s));
  }
  return sections;
}

bool holdsWritableGlobalData(const CubinSection& s) {
  if (s.size == 0) return false;
  // Per CTA or per thread, never initialized: NOBITS only (Note [Agent kernels hold no state]).
  const bool perCtaOrThread = s.nobits && (startsWith(s.name, ".nv.shared.") || startsWith(s.name, ".nv.local."));
  if (s.writable && s.allocated) return !perCtaOrThread;
  // The names the loader gives module-lifetime storage, whatever flags a crafted image claims.
  return s.name == ".nv.global" || startsWith(s.name, ".nv.global.") || s.name == ".data" ||
         startsWith(s.name, ".data.") || s.name == ".bss" || startsWith(s.name, ".bss.");
}

std::vector<std::string> writableGlobalData(const std::string& image) {
  std::vector<std::string> found;
  for (const CubinSection& s : cubinSections(image)) {
    if (holdsWritableGlobalData(s)) found.push_back(s.name + " (" + std::to_string(s.size) + " bytes)");
  }
  return found;
}

}  // namespace hotkernel
