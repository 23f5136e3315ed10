#include "agent/crash_handler/loaded_symbols.hpp"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

namespace hvrun::crash_handler {

namespace {

struct Wanted {
  const char* name;
  uint32_t hash;
  bool found;
};

uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (; *s != '\0'; ++s) h = h * 33 + static_cast<unsigned char>(*s);
  return h;
}

// The loader relocates most objects' dynamic entries in place; the vDSO's stay relative to its base.
template <typename T>
const T* dynamic_address(const dl_phdr_info* info, ElfW(Addr) ptr) {
  return reinterpret_cast<const T*>(ptr < info->dlpi_addr ? ptr + info->dlpi_addr : ptr);
}

bool defines(const dl_phdr_info* info, const Wanted& w) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (dyn == nullptr) return false;
  const uint32_t* table = nullptr;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_GNU_HASH) table = dynamic_address<uint32_t>(info, dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_SYMTAB) symbols = dynamic_address<ElfW(Sym)>(info, dyn->d_un.d_ptr);
    else if (dyn->d_tag == DT_STRTAB) strings = dynamic_address<char>(info, dyn->d_un.d_ptr);
  }
  if (table == nullptr || symbols == nullptr || strings == nullptr) return false;
  const uint32_t buckets = table[0], first = table[1], bloom_words = table[2], shift = table[3];
  if (buckets == 0 || bloom_words == 0) return false;
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(table + 4);
  constexpr uint32_t kBits = sizeof(ElfW(Addr)) * 8;
  const ElfW(Addr) word = bloom[(w.hash / kBits) % bloom_words];
  const ElfW(Addr) mask = (ElfW(Addr){1} << (w.hash % kBits)) | (ElfW(Addr){1} << ((w.hash >> shift) % kBits));
  if ((word & mask) != mask) return false;
  const auto* bucket = reinterpret_cast<const uint32_t*>(bloom + bloom_words);
  const uint32_t* chain = bucket + buckets;
  uint32_t index = bucket[w.hash % buckets];
  if (index < first) return false;
  for (;; ++index) {
    const uint32_t h = chain[index - first];
    const ElfW(Sym)& sym = symbols[index];
    if ((h | 1) == (w.hash | 1) && sym.st_shndx != SHN_UNDEF && strcmp(strings + sym.st_name, w.name) == 0) return true;
    if (h & 1) return false;
  }
}

int look_in(dl_phdr_info* info, size_t, void* data) {
  auto* w = static_cast<Wanted*>(data);
  w->found = defines(info, *w);
  return w->found ? 1 : 0;
}

}  // namespace

bool loaded_objects_define(const char* name) {
  Wanted w{name, gnu_hash(name), false};
  dl_iterate_phdr(look_in, &w);
  return w.found;
}

}  // namespace hvrun::crash_handler
