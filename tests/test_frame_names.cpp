// The agent's side of the crash handler's frames: FrameNames names a raw frame (an address and where
// it lies in a file) from the file's ELF symbols, and CrashTextFilter does so on a rank's stderr,
// inside crash reports only, passing every other byte on unchanged; a stripped library's own functions
// come from its separate debug file where one is installed.
#include <catch2/catch.hpp>

#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <filesystem>
#include <sstream>

#include "agent/crash_text_filter.hpp"
#include "agent/frame_names.hpp"
#include "agent/rank_tools.hpp"
#include "common/crash_report.hpp"
#include "tests/support/build_paths.hpp"
#include "tests/support/preloaded_process.hpp"

using namespace std::chrono_literals;

namespace {

std::string hex(std::uintptr_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// `address` as the crash handler writes it for frame `index`: the file mapped there and the offset in it.
std::string raw_frame(int index, const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream f(line);
    std::string range, perms, offset, dev, inode, path;
    f >> range >> perms >> offset >> dev >> inode >> path;
    const auto dash = range.find('-');
    const auto start = std::stoull(range.substr(0, dash), nullptr, 16), end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (a < start || a >= end) continue;
    return "  #" + std::to_string(index) + " " + hex(a) + hvrun::crash_report::kFrameFile + path +
           hvrun::crash_report::kFrameOffset + hex(a - start + std::stoull(offset, nullptr, 16));
  }
  return "";
}

}  // namespace

TEST_CASE("frame names: a raw frame is named from its file's symbols; what is not one is left alone", "[autopsy]") {
  hvrun::FrameNames names;
  // getpid in libc, exported: its .dynsym name, as frame 0 (the exact address) and as a return address
  // one past it (a later frame: the byte before is looked up).
  const auto getpid_at = reinterpret_cast<const char*>(&::getpid);
  const std::string exact = raw_frame(0, getpid_at);
  REQUIRE_FALSE(exact.empty());
  const auto named = names.name_line(exact);
  REQUIRE(named);
  CHECK(named->rfind("  #0 " + hex(reinterpret_cast<std::uintptr_t>(getpid_at)) + " getpid+0x0 (/", 0) == 0);
  CHECK(named->back() == ')');
  const auto returned = names.name_line(raw_frame(3, getpid_at + 1));
  REQUIRE(returned);
  CHECK_THAT(*returned, Catch::Contains(" getpid+0x0 ("));
  // Files that name nothing: gone, not ELF, not a file, not a path.
  for (const std::string path : {"/nonexistent/libgone.so", "/proc/self/status", "/dev/zero", "/", "[vdso]"}) {
    const auto line = names.name_line("  #2 0x7f0000001000" + std::string(hvrun::crash_report::kFrameFile) + path +
                                      hvrun::crash_report::kFrameOffset + "0x1000");
    REQUIRE(line);
    CHECK(*line == "  #2 0x7f0000001000 ?? +0xfff (" + path + ")");
  }
  // Lines that are not raw frames.
  for (const std::string line : {"  #0 0x7f01 clock_nanosleep+0x65 (/lib/libc.so.6)", "  #1 0x55 ??", "hello",
                                 "  #x 0x1 in /a at file offset 0x0", "  #1 0x1 in /a at file offset 12", ""})
    CHECK_FALSE(names.name_line(line));
  CHECK(names.name_text("a\n" + exact + "\nb") == "a\n" + *named + "\nb");
}

TEST_CASE("crash text filter: frames are named inside crash reports only; other bytes pass at once, unchanged",
          "[autopsy]") {
  const std::string frame = raw_frame(0, reinterpret_cast<const void*>(&::getpid));
  REQUIRE_FALSE(frame.empty());
  const std::string report = "hvrun-crash: pid 7 (x) SIGSEGV, fault address 0x0, native stack of thread 7:\n" + frame +
                             "\n  #1 0x10 ??\nhvrun-crash: end of stack\n";
  {
    INFO("plain output, partial lines included, goes on as it comes; a raw frame outside a report stays raw");
    hvrun::CrashTextFilter f;
    CHECK(f.feed("epoch 1 ") == "epoch 1 ");
    CHECK(f.feed("loss 0.3\nstep") == "loss 0.3\nstep");
    CHECK(f.feed(" 2\n" + frame + "\n") == " 2\n" + frame + "\n");
    CHECK(f.feed("hvrun-crash is a word here\n") == "hvrun-crash is a word here\n");
    CHECK(f.flush().empty());
  }
  {
    INFO("a report, one byte at a time: each frame named, the rest as written");
    hvrun::CrashTextFilter f;
    std::string out;
    const std::string text = "before\n" + report + "after";
    for (const char c : text) out += f.feed(std::string(1, c));
    out += f.flush();
    CHECK_THAT(out, Catch::StartsWith("before\nhvrun-crash: pid 7 (x) SIGSEGV") && Catch::Contains(" getpid+0x0 (/") &&
                        Catch::EndsWith("\n  #1 0x10 ??\nhvrun-crash: end of stack\nafter"));
    CHECK(out.find(hvrun::crash_report::kFrameOffset) == std::string::npos);
  }
  {
    INFO("a line that starts as a header does is held until it is whole; then the frames after it are named");
    hvrun::CrashTextFilter f;
    CHECK(f.feed("x\nhvrun-cr") == "x\n");
    CHECK(f.feed("ash: pid 7 (x) SIGSEGV:\n").rfind("hvrun-crash: pid 7", 0) == 0);
    CHECK_THAT(f.feed(frame + "\n"), Catch::Contains(" getpid+0x0 ("));
    CHECK(f.feed("hvrun-crash: end of stack\n" + frame + "\n") == "hvrun-crash: end of stack\n" + frame + "\n");
    CHECK(f.feed("hv") == "");
    CHECK(f.flush() == "hv");  // the stream's end gives back what was held
  }
}

namespace {

// The path of libc's separate debug file as the distribution's libc6-dbg installs it
// (/usr/lib/debug/.build-id/xx/yyyy.debug, from the GNU build id of the libc this process runs).
std::string libc_debug_file() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (std::string(info->dlpi_name).find("/libc.so") == std::string::npos) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_NOTE) continue;
          const auto* at = reinterpret_cast<const unsigned char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
          const auto* end = at + info->dlpi_phdr[i].p_memsz;
          while (at + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
            const auto* desc = at + sizeof *note + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID) {
              std::string hex;
              for (std::uint32_t k = 0; k < note->n_descsz; ++k) {
                hex += "0123456789abcdef"[desc[k] >> 4];
                hex += "0123456789abcdef"[desc[k] & 15];
              }
              *static_cast<std::string*>(data) = "/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
              return 1;
            }
            at = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 0;
      },
      &path);
  return path;
}

}  // namespace

TEST_CASE("crash handler: a stripped library's own functions are named from its separate debug file (libc6-dbg)",
          "[integration]") {
  const std::string debug_file = libc_debug_file();
  if (debug_file.empty() || !std::filesystem::exists(debug_file)) {
    WARN("skipped: libc's separate debug file is not installed (" << debug_file << "; Debian: libc6-dbg)");
    return;
  }
  hvrun::RankTools tools;
  hvrun::test::PreloadedProcess crash({hvrun::test::build().stuck_in_malloc, "crash"}, tools);
  crash.read_until("", 10s);
  crash.wait_status();
  hvrun::FrameNames names;
  const std::string named = names.name_text(crash.err_text);
  INFO(named);
  // Between malloc and abort: libc's functions that its .dynsym does not hold.
  CHECK_THAT(named, Catch::Contains(" _int_malloc+0x") && Catch::Contains(" malloc_printerr+0x") &&
                        Catch::Contains(" malloc+0x"));
}
