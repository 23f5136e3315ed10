#include "agent/frame_names.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "common/crash_report.hpp"
#include "common/unique_fd.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kFrameStart = "  #";
// How many symbols below an address are looked at for one that holds it: nested and aliased symbols
// sit close together; a symbol spanning more than this many others is not a function.
constexpr std::size_t kLookBack = 256;

std::optional<std::uint64_t> parse_hex(std::string_view s) {
  if (s.substr(0, 2) != "0x" || s.size() == 2) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string hex(std::uint64_t v) {
  char buf[2 + 16];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  (void)ec;
  return "0x" + std::string(buf, end);
}

// A raw frame's parts: "  #N 0xADDR in FILE at file offset 0xOFF".
struct RawFrame {
  int index = 0;
  std::string_view head;  // "  #N 0xADDR"
  std::string_view path;
  std::uint64_t offset = 0;
};

std::optional<RawFrame> parse_raw(std::string_view line) {
  if (line.substr(0, kFrameStart.size()) != kFrameStart) return std::nullopt;
  std::size_t i = kFrameStart.size();
  RawFrame f;
  const auto [after_index, ec] = std::from_chars(line.data() + i, line.data() + line.size(), f.index);
  if (ec != std::errc() || f.index < 0) return std::nullopt;
  i = static_cast<std::size_t>(after_index - line.data());
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  const std::size_t addr_end = line.find(' ', i + 1);
  if (addr_end == std::string_view::npos || !parse_hex(line.substr(i + 1, addr_end - i - 1))) return std::nullopt;
  f.head = line.substr(0, addr_end);
  const std::string_view file_word = crash_report::kFrameFile, offset_words = crash_report::kFrameOffset;
  if (line.substr(addr_end, file_word.size()) != file_word) return std::nullopt;
  const std::size_t at = line.rfind(offset_words);
  const std::size_t path_begin = addr_end + file_word.size();
  if (at == std::string_view::npos || at <= path_begin) return std::nullopt;
  const auto offset = parse_hex(line.substr(at + offset_words.size()));
  if (!offset) return std::nullopt;
  f.path = line.substr(path_begin, at - path_begin);
  f.offset = *offset;
  return f;
}

}  // namespace

// Outside the anonymous namespace: FrameNames::ElfSymbols holds it (GCC's -Wsubobject-linkage in a
// unity build), so its name is unique in the project.
// A regular file mapped read-only, unmapped with the object; empty when it cannot be.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr))))
      return;
    void* map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (map == MAP_FAILED) return;
    data_ = static_cast<const unsigned char*>(map);
    size_ = static_cast<std::size_t>(st.st_size);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  bool within(std::uint64_t offset, std::uint64_t length) const { return offset <= size_ && length <= size_ - offset; }
  // A copy of the T at `offset`, which the caller has checked is within.
  template <typename T>
  T at(std::uint64_t offset) const {
    T t;
    std::memcpy(&t, data_ + offset, sizeof t);
    return t;
  }
  const unsigned char* data() const { return data_; }

  // The ELF header of a file of this host's class, or nullopt.
  std::optional<ElfW(Ehdr)> elf_header() const {
    if (data_ == nullptr) return std::nullopt;
    const auto eh = at<ElfW(Ehdr)>(0);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32))
      return std::nullopt;
    return eh;
  }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

// One ELF file: its loadable segments (file offset to virtual address) and its function symbols,
// sorted by address; those of .symtab from its separate debug file (/usr/lib/debug/.build-id/, where
// the distribution's -dbg packages put them) when the file itself was stripped of it.
class FrameNames::ElfSymbols {
 public:
  explicit ElfSymbols(const std::string& path) : file_(path) {
    const auto eh = file_.elf_header();
    if (!eh || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
        !file_.within(eh->e_phoff, std::uint64_t{eh->e_phnum} * sizeof(ElfW(Phdr))))
      return;
    std::string build_id;
    for (unsigned i = 0; i < eh->e_phnum; ++i) {
      const auto ph = file_.at<ElfW(Phdr)>(eh->e_phoff + i * sizeof(ElfW(Phdr)));
      if (ph.p_type == PT_LOAD) loads_.push_back(Load{ph.p_offset, ph.p_filesz, ph.p_vaddr});
      if (ph.p_type == PT_NOTE && build_id.empty()) build_id = gnu_build_id(ph);
    }
    if (!read_symbols(file_) && !build_id.empty()) {
      debug_ = std::make_unique<MappedFile>(kDebugRoot + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug");
      read_symbols(*debug_);
    }
    std::sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
  }

  std::optional<std::uint64_t> vaddr_of(std::uint64_t offset) const {
    for (const Load& l : loads_)
      if (offset >= l.offset && offset - l.offset < l.size) return offset - l.offset + l.vaddr;
    return std::nullopt;
  }

  struct Found {
    std::string_view name;
    std::uint64_t start = 0;
  };
  // The function that holds `vaddr`: a .dynsym one before a .symtab one, then the closest start; of
  // aliases, the public name ("malloc", not "__libc_malloc": fewer leading underscores), then a global
  // binding before a weak one before a local one.
  std::optional<Found> symbol_at(std::uint64_t vaddr) const {
    auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                               [](std::uint64_t v, const Symbol& s) { return v < s.value; });
    const Symbol* best = nullptr;
    for (std::size_t n = 0; it != symbols_.begin() && n < kLookBack; ++n) {
      const Symbol& s = *--it;
      const bool holds = s.size == 0 ? vaddr == s.value : vaddr - s.value < s.size;
      if (!holds) continue;
      const auto rank = [](const Symbol& x) {
        return std::make_tuple(x.dynamic, x.value, -static_cast<int>(x.name.find_first_not_of('_')), x.binding);
      };
      if (best == nullptr || rank(s) > rank(*best)) best = &s;
    }
    if (best == nullptr) return std::nullopt;
    return Found{best->name, best->value};
  }

 private:
  static constexpr const char* kDebugRoot = "/usr/lib/debug/.build-id/";

  struct Load {
    std::uint64_t offset, size, vaddr;
  };
  struct Symbol {
    std::uint64_t value, size;
    std::string_view name;
    bool dynamic;  // from .dynsym
    int binding;   // 2 global, 1 weak, 0 local
  };

  // The GNU build id in hex from the notes of segment `ph`, or "".
  std::string gnu_build_id(const ElfW(Phdr)& ph) const {
    if (!file_.within(ph.p_offset, ph.p_filesz)) return "";
    for (std::uint64_t at = ph.p_offset; at + sizeof(ElfW(Nhdr)) <= ph.p_offset + ph.p_filesz;) {
      const auto note = file_.at<ElfW(Nhdr)>(at);
      const std::uint64_t name_at = at + sizeof note, desc_at = name_at + ((note.n_namesz + 3) & ~3u);
      const std::uint64_t next = desc_at + ((note.n_descsz + 3) & ~3u);
      if (next > ph.p_offset + ph.p_filesz) return "";
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(file_.data() + name_at, "GNU", 4) == 0 &&
          note.n_descsz >= 2) {
        std::string hex_id;
        for (std::uint32_t i = 0; i < note.n_descsz; ++i) {
          const unsigned byte = file_.data()[desc_at + i];
          hex_id += "0123456789abcdef"[byte >> 4];
          hex_id += "0123456789abcdef"[byte & 15];
        }
        return hex_id;
      }
      at = next;
    }
    return "";
  }

  // The function symbols of `f`'s .dynsym and .symtab; whether it has a .symtab.
  bool read_symbols(const MappedFile& f) {
    const auto eh = f.elf_header();
    if (!eh || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        !f.within(eh->e_shoff, std::uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr))))
      return false;
    const auto section = [&](unsigned i) { return f.at<ElfW(Shdr)>(eh->e_shoff + i * sizeof(ElfW(Shdr))); };
    bool symtab = false;
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      const ElfW(Shdr) sh = section(i);
      if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_link >= eh->e_shnum ||
          sh.sh_entsize != sizeof(ElfW(Sym)) || !f.within(sh.sh_offset, sh.sh_size))
        continue;
      const ElfW(Shdr) strs = section(sh.sh_link);
      if (strs.sh_type != SHT_STRTAB || !f.within(strs.sh_offset, strs.sh_size)) continue;
      symtab = symtab || sh.sh_type == SHT_SYMTAB;
      const char* names = reinterpret_cast<const char*>(f.data() + strs.sh_offset);
      for (std::uint64_t k = 0; k < sh.sh_size / sizeof(ElfW(Sym)); ++k) {
        const auto sym = f.at<ElfW(Sym)>(sh.sh_offset + k * sizeof(ElfW(Sym)));
        const int type = ELF64_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0 ||
            sym.st_name >= strs.sh_size)
          continue;
        const char* name = names + sym.st_name;
        const std::size_t len = strnlen(name, strs.sh_size - sym.st_name);
        if (len == 0) continue;
        const int bind = ELF64_ST_BIND(sym.st_info);
        symbols_.push_back(Symbol{sym.st_value, sym.st_size, std::string_view(name, len), sh.sh_type == SHT_DYNSYM,
                                  bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0});
      }
    }
    return symtab;
  }

  MappedFile file_;
  std::unique_ptr<MappedFile> debug_;  // holds the names of the debug file's symbols
  std::vector<Load> loads_;
  std::vector<Symbol> symbols_;
};

FrameNames::FrameNames() = default;
FrameNames::~FrameNames() = default;

const FrameNames::ElfSymbols& FrameNames::file(const std::string& path) {
  auto& slot = files_[path];
  if (!slot) slot = std::make_unique<ElfSymbols>(path);
  return *slot;
}

std::optional<std::string> FrameNames::name_line(std::string_view line) {
  const auto raw = parse_raw(line);
  if (!raw) return std::nullopt;
  const std::string path(raw->path);
  // A return address points after its call: the call, one byte before, is what is named.
  const std::uint64_t offset = raw->offset - (raw->index > 0 && raw->offset > 0 ? 1 : 0);
  std::string out(raw->head);
  const ElfSymbols* elf = path.empty() || path.front() != '/' ? nullptr : &file(path);
  const auto vaddr = elf != nullptr ? elf->vaddr_of(offset) : std::nullopt;
  const auto symbol = vaddr ? elf->symbol_at(*vaddr) : std::nullopt;
  if (symbol) out += " " + std::string(symbol->name) + "+" + hex(*vaddr - symbol->start);
  else out += " ?? +" + hex(vaddr ? *vaddr : offset);
  return out + " (" + path + ")";
}

std::string FrameNames::name_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (auto named = name_line(line)) out += *named;
    else out += line;
    if (nl == std::string_view::npos) break;
    out += '\n';
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace hvrun
