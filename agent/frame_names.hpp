#pragma once
// Names for the frames that libhvrun_crash.so writes raw (common/crash_report.hpp: "  #N 0xADDR in
// FILE at file offset 0xOFF"), looked up here, on the rank's host, in the ELF symbol tables of those
// files: .dynsym first (the exported name, as dladdr would give it), else .symtab (a program's own
// static functions; for a stripped file, from its separate debug file under /usr/lib/debug/.build-id/
// where one is installed). The library cannot do it itself: a signal handler may not take the loader's lock
// or allocate. A line becomes "  #N 0xADDR name+0xOFF (FILE)", or "  #N 0xADDR ?? +0xVADDR (FILE)"
// where no symbol holds the address (VADDR: the address in the file's own terms, what addr2line -e
// FILE takes; the file offset where the file cannot be read as ELF).
//
// One object serves one report: each file named is opened and mapped once, and kept mapped while the
// object lives. Files are whatever a rank names: anything that is not a regular ELF file of this
// host's class, or is malformed, names nothing.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

class FrameNames {
 public:
  FrameNames();
  ~FrameNames();
  FrameNames(const FrameNames&) = delete;
  FrameNames& operator=(const FrameNames&) = delete;

  // `line` (without its newline) named, when it is a raw frame; nullopt otherwise.
  std::optional<std::string> name_line(std::string_view line);
  // `text` with each raw frame line named and every other line as it was.
  std::string name_text(std::string_view text);

 private:
  class ElfSymbols;
  const ElfSymbols& file(const std::string& path);

  std::map<std::string, std::unique_ptr<ElfSymbols>> files_;
};

}  // namespace hvrun
