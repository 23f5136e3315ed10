// libhvrun_crash.so: what the agent preloads into every rank (LD_PRELOAD) so that a crash and a hang
// show where they happened, in any program, with nothing to add to it.
//
// - A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes the crashing thread's native
//   stack to stderr, each frame as its address and the file and file offset it lies at, then dies of
//   the same signal (the exit status is unchanged). hvrun's agent names the frames on their way to the
//   launcher (agent/crash_text_filter.hpp). A handler installed later (Python's faulthandler, under
//   PYTHONFAULTHANDLER=1) runs first and chains to this one, so a Python rank shows its Python frames
//   and then its native ones; this library's sigaction() puts a step in front of such a handler that
//   notes the fault's address and instruction, which the chained re-raise no longer carries.
// - SIGURG sent by hvrun's agent with kStackRequest as its value (rt_tgsigqueueinfo to the main
//   thread, so no other sender and no other thread triggers it; SIGURG's default is to ignore, so a
//   process without this handler is not harmed) writes the main thread's Python frames (through the
//   interpreter's own faulthandler dumper, when the process runs Python) and native stack to
//   $HVRUN_STACK_DIR/<pgid>-<pid>.stack, written under a temporary name and renamed when whole; the
//   program goes on. With kWhereRequest instead, only the native frames' addresses are written, to
//   $HVRUN_STACK_DIR/<pid>.where: the agent's ten looks a second at a running rank (issue 40), which tell
//   a rank that spins in a communication library (MPI, Horovod) from one that computes.
//
// The text formats are a contract with the agent and the launcher (agent/frame_names.hpp,
// launcher/output/stderr_digest.hpp, launcher/job/stack_groups.hpp); common/crash_report.hpp spells
// them.
//
// The handlers make only async-signal-safe calls (write, open, read, mmap, rename), take no lock and
// allocate nothing, so that a thread interrupted inside malloc, or another thread inside dlopen, cannot
// stop them: no dladdr or dlsym (the loader's lock), no stdio, no malloc; what needs those is done in
// the constructor. Stacks are walked by libgcc's unwinder linked into this library (-static-libgcc, its
// symbols kept private by --exclude-libs), which finds unwind tables through glibc's lock-free
// _dl_find_object; its one-time set-up is run at load. glibc's backtrace() loads libgcc_s on first use:
// warming that up at load cost every rank about 0.3 ms of CPU and 30 page faults (`true` preloaded:
// 0.67-0.93 ms against 0.46-0.52, perf stat -r 300; docs/BENCHMARKS.md), and loading it later would
// mean dlopen in a signal handler. Built without libstdc++: the library needs glibc only.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>  // rename
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unwind.h>
#include <unistd.h>

#include "agent/crash_handler/frame_places.hpp"
#include "agent/crash_handler/loaded_symbols.hpp"
#include "common/crash_report.hpp"

namespace {

using hvrun::crash_handler::kMaxFrames;
using hvrun::crash_handler::Place;
using hvrun::crash_handler::FramePlaces;

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[65];
char g_stack_dir[512];
char g_alt_stack[64 * 1024];

// A fixed buffer that is written out whole: one write(2) per line keeps lines whole on a shared pipe.
struct Out {
  explicit Out(int out_fd) : fd(out_fd) {}
  int fd;
  char buf[1024];
  size_t len = 0;
  void put(const char* s) {
    while (*s) {
      if (len == sizeof buf) flush();
      buf[len++] = *s++;
    }
  }
  void put(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (len == sizeof buf) flush();
      buf[len++] = s[i];
    }
  }
  void hex(uintptr_t v) {
    char t[2 + 16];
    int n = 0;
    do {
      t[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v != 0);
    put("0x");
    while (n > 0) put(&t[--n], 1);
  }
  void dec(long v) {
    char t[24];
    int n = 0;
    if (v < 0) {
      put("-");
      v = -v;
    }
    do {
      t[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) put(&t[--n], 1);
  }
  void flush() {
    size_t off = 0;
    while (off < len) {
      const ssize_t w = ::write(fd, buf + off, len - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    len = 0;
  }
};

const char* signal_word(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

// One frame as crash_report.hpp's raw frame: "  #N 0xADDR in FILE at file offset 0xOFF", or
// "  #N 0xADDR ??" outside any file.
void write_frame(Out& out, int index, void* addr, const FramePlaces* s) {
  out.put("  #");
  out.dec(index);
  out.put(" ");
  out.hex(reinterpret_cast<uintptr_t>(addr));
  const Place* place = s != nullptr ? &s->places[index] : nullptr;
  if (place == nullptr || place->path_len == 0) {
    out.put(" ??\n");
    out.flush();
    return;
  }
  out.put(hvrun::crash_report::kFrameFile);
  out.put(s->paths + place->path_at, place->path_len);
  out.put(hvrun::crash_report::kFrameOffset);
  out.hex(place->file_offset);
  out.put("\n");
  out.flush();
}

uintptr_t interrupted_pc(void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  if (uc == nullptr) return 0;
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  return 0;
#endif
}

struct Frames {
  void** pcs;
  int max;
  int n;  // -1 until collect_frames' own frame has gone by
};

_Unwind_Reason_Code take_frame(struct _Unwind_Context* context, void* arg) {
  auto* f = static_cast<Frames*>(arg);
  if (f->n >= 0) f->pcs[f->n] = reinterpret_cast<void*>(_Unwind_GetIP(context));
  return ++f->n == f->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// The return addresses of the calling thread's frames, innermost (the caller's) first, as glibc's
// backtrace() gives them: through the signal trampoline (libgcc knows its frame), without the null
// return address of the outermost frame.
int collect_frames(void** pcs, int max) {
  Frames f{pcs, max, -1};
  (void)_Unwind_Backtrace(take_frame, &f);
  if (f.n > 1 && pcs[f.n - 1] == nullptr) --f.n;
  return f.n < 0 ? 0 : f.n;
}

// The frames from `first` on, each placed in its file; without a scratch area (mmap failed), bare.
void write_frames(Out& out, void* const* frames, int first, int n) {
  void* const* shown = frames + first;
  const int count = n - first;
  void* map = ::mmap(nullptr, sizeof(FramePlaces), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FramePlaces* s = map == MAP_FAILED ? nullptr : static_cast<FramePlaces*>(map);
  if (s != nullptr) hvrun::crash_handler::place_frames(*s, shown, count);
  for (int i = 0; i < count; ++i) write_frame(out, i, shown[i], s);
  if (s != nullptr) ::munmap(map, sizeof(FramePlaces));
}

// The native stack of the calling thread, from the interrupted instruction on (the handler's own
// frames and the signal trampoline are left out when the interrupted pc is found among the frames).
void write_native_stack(Out& out, void* context, uintptr_t fault_pc = 0) {
  void* frames[kMaxFrames];
  const int n = collect_frames(frames, kMaxFrames);
  uintptr_t pc = interrupted_pc(context);
  if (fault_pc != 0)
    for (int i = 0; i < n; ++i)
      if (reinterpret_cast<uintptr_t>(frames[i]) == fault_pc) pc = fault_pc;
  int first = 0;
  for (int i = 0; i < n; ++i)
    if (reinterpret_cast<uintptr_t>(frames[i]) == pc) {
      first = i;
      break;
    }
  if (first == 0 && pc != 0) {
    // The trampoline's frame was not found (no unwind data past it): the interrupted pc alone.
    frames[0] = reinterpret_cast<void*>(pc);
    write_frames(out, frames, 0, 1);
    return;
  }
  write_frames(out, frames, first, n);
}

// The header's start: `header` pid N (COMM), as both texts of crash_report.hpp begin.
void write_who(Out& out, const char* header) {
  out.put(header);
  out.put(" pid ");
  out.dec(::getpid());
  out.put(" (");
  char comm[32];
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? ::read(fd, comm, sizeof comm) : -1;
  if (fd >= 0) ::close(fd);
  while (n > 0 && (comm[n - 1] == '\n' || comm[n - 1] == '\0')) --n;
  out.put(n > 0 ? comm : "?", n > 0 ? static_cast<size_t>(n) : 1);
  out.put(")");
}

// The kernel's fault as a handler installed after ours (Python's faulthandler) received it: that
// handler runs first (through on_fault_first) and re-raises, and the re-raised signal carries no
// address.
struct Fault {
  volatile sig_atomic_t seen;
  void* address;
  uintptr_t pc;  // the faulting instruction: the stack starts there, below the other handler's frames
};
Fault g_fault[65];
struct sigaction g_after[65];   // a program's own handler for a fault signal, run by on_fault_first
bool g_installed[65];           // on_fatal holds the signal
volatile sig_atomic_t g_ready;  // install() is done: sigaction() below wraps

bool is_fault(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

void on_fault_first(int sig, siginfo_t* info, void* context) {
  if (info->si_code > 0) {
    g_fault[sig].address = info->si_addr;
    g_fault[sig].pc = interrupted_pc(context);
    g_fault[sig].seen = 1;
  }
  const struct sigaction& a = g_after[sig];
  if (a.sa_flags & SA_SIGINFO) a.sa_sigaction(sig, info, context);
  else if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN) a.sa_handler(sig);
}

void on_fatal(int sig, siginfo_t* info, void* context) {
  Out out(STDERR_FILENO);
  write_who(out, hvrun::crash_report::kCrashHeader);
  out.put(" ");
  out.put(signal_word(sig));
  // si_code > 0: the kernel's own fault, whose address is known. Otherwise kill(), raise() or abort():
  // the sender, or (re-raised by a handler that ran before this one) nothing more.
  if (info->si_code > 0 && is_fault(sig)) {
    out.put(", fault address ");
    out.hex(reinterpret_cast<uintptr_t>(info->si_addr));
  } else if (is_fault(sig) && g_fault[sig].seen) {
    out.put(", fault address ");
    out.hex(reinterpret_cast<uintptr_t>(g_fault[sig].address));
  } else if (info->si_code == SI_USER && info->si_pid != ::getpid()) {
    out.put(" sent by pid ");
    out.dec(info->si_pid);
  }
  out.put(", native stack of thread ");
  out.dec(static_cast<long>(::syscall(SYS_gettid)));
  out.put(":\n");
  out.flush();
  write_native_stack(out, context, info->si_code <= 0 && is_fault(sig) && g_fault[sig].seen ? g_fault[sig].pc : 0);
  out.put(hvrun::crash_report::kCrashFooter);
  out.put("\n");
  out.flush();
  // Die of the same signal, as without this handler: the default action, re-raised on return for a
  // fault, raised here for one sent by kill() or abort().
  ::signal(sig, SIG_DFL);
  if (info->si_code <= 0) ::raise(sig);
}

using DumpThreads = const char* (*)(int, void*, void*);
using IsInitialized = int (*)();
// The interpreter's own dumper (what faulthandler calls) and its readiness, when the program is Python:
// looked up at load, since dlsym in a signal handler takes the loader's lock.
DumpThreads g_py_dump;
IsInitialized g_py_is_initialized;

// <dir>/<pid><suffix>, with ".tmp" after it when `tmp`; false when it would not fit.
bool rank_file_path(char* path, size_t size, const char* suffix, bool tmp) {
  Out p(-1);
  p.put(g_stack_dir);
  p.put("/");
  p.dec(::getpid());
  p.put(suffix);
  if (tmp) p.put(".tmp");
  if (p.len >= size) return false;
  memcpy(path, p.buf, p.len);
  path[p.len] = '\0';
  return true;
}

// kWhereRequest: the interrupted instruction and the return addresses above it, on one line.
void answer_where(void* context) {
  char tmp[600], final_path[600];
  if (!rank_file_path(tmp, sizeof tmp, hvrun::crash_report::kWhereSuffix, true) ||
      !rank_file_path(final_path, sizeof final_path, hvrun::crash_report::kWhereSuffix, false))
    return;
  void* frames[kMaxFrames];
  const int n = collect_frames(frames, kMaxFrames);
  const uintptr_t pc = interrupted_pc(context);
  int first = n;
  for (int i = 0; i < n; ++i)
    if (reinterpret_cast<uintptr_t>(frames[i]) == pc) {
      first = i;
      break;
    }
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  Out out(fd);
  if (first == n) {
    out.hex(pc);  // no unwind data past the trampoline: the interrupted pc alone
  } else {
    for (int i = first; i < n; ++i) {
      if (i > first) out.put(" ");
      out.hex(reinterpret_cast<uintptr_t>(frames[i]));
    }
  }
  out.put("\n");
  out.flush();
  ::close(fd);
  ::rename(tmp, final_path);
}

void on_stack_request(int sig, siginfo_t* info, void* context) {
  if (info->si_code == SI_QUEUE && info->si_value.sival_int == hvrun::crash_report::kWhereRequest) {
    if (g_stack_dir[0] == '\0') return;
    const int saved_errno = errno;
    answer_where(context);
    errno = saved_errno;
    return;
  }
  if (info->si_code != SI_QUEUE || info->si_value.sival_int != hvrun::crash_report::kStackRequest) {
    const struct sigaction& prev = g_previous[sig];
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
    else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) prev.sa_handler(sig);
    return;
  }
  if (g_stack_dir[0] == '\0') return;
  const int saved_errno = errno;
  char tmp[600], final_path[600];
  // <dir>/<pgid>-<pid>.stack
  Out p(-1);
  p.put(g_stack_dir);
  p.put("/");
  p.dec(::getpgrp());
  p.put("-");
  p.dec(::getpid());
  p.put(".stack");
  memcpy(final_path, p.buf, p.len);
  final_path[p.len] = '\0';
  memcpy(tmp, p.buf, p.len);
  memcpy(tmp + p.len, ".tmp", 5);
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    errno = saved_errno;
    return;
  }
  Out out(fd);
  write_who(out, hvrun::crash_report::kStackHeader);
  out.put("\n");
  out.flush();
  const DumpThreads dump = g_py_dump;
  if (dump != nullptr && g_py_is_initialized != nullptr && g_py_is_initialized()) {
    out.put(hvrun::crash_report::kPythonSection);
    out.put("\n");
    out.flush();
    dump(fd, nullptr, nullptr);
  }
  out.put(hvrun::crash_report::kNativeSection);
  out.put("\n");
  out.flush();
  write_native_stack(out, context);
  ::close(fd);
  ::rename(tmp, final_path);
  errno = saved_errno;
}

_Unwind_Reason_Code first_frame_only(struct _Unwind_Context*, void*) { return _URC_END_OF_STACK; }

// What a handler may not do itself, done at load: the unwinder's one-time set-up (pthread_once for its
// register table) and the look-ups by name (dlsym), only for a program that defines them (a failed
// dlsym costs an error message, and leaves it for the program's next dlerror()).
void prepare() {
  (void)_Unwind_Backtrace(first_frame_only, nullptr);
  if (!hvrun::crash_handler::loaded_objects_define("Py_IsInitialized")) return;
  g_py_is_initialized = reinterpret_cast<IsInitialized>(::dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  g_py_dump = reinterpret_cast<DumpThreads>(::dlsym(RTLD_DEFAULT, "_Py_DumpTracebackThreads"));
  (void)::dlerror();
}

void resolve_next_sigaction();

__attribute__((constructor)) void install() {
  prepare();
  resolve_next_sigaction();
  // In a process that hvrun did not start (the variable is inherited by what ranks run), the
  // handlers still help; the stack directory may be gone, which only stops the hang dumps.
  if (const char* dir = ::getenv(hvrun::crash_report::kStackDirVariable)) {
    const size_t n = strlen(dir);
    if (n < sizeof g_stack_dir) memcpy(g_stack_dir, dir, n + 1);
  }
  stack_t alt{};
  alt.ss_sp = g_alt_stack;
  alt.ss_size = sizeof g_alt_stack;
  (void)::sigaltstack(&alt, nullptr);  // a stack overflow's handler needs a stack of its own

  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (const int sig : kFatalSignals) {
    struct sigaction old {};
    // A program that set its own handler before us (a statically linked runtime) keeps it.
    if (::sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      g_installed[sig] = ::sigaction(sig, &sa, &g_previous[sig]) == 0;
  }
  struct sigaction req {};
  req.sa_sigaction = on_stack_request;
  req.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&req.sa_mask);
  ::sigaction(SIGURG, &req, &g_previous[SIGURG]);
  g_ready = 1;
}

using SigactionCall = int (*)(int, const struct sigaction*, struct sigaction*);

// Set at load, or on a use before (another library's constructor): a handler that calls sigaction
// (faulthandler's, putting back the previous action) must not reach dlsym. Racing first uses store
// the same value.
SigactionCall g_next_sigaction;

void resolve_next_sigaction() {
  if (g_next_sigaction == nullptr) g_next_sigaction = reinterpret_cast<SigactionCall>(::dlsym(RTLD_NEXT, "sigaction"));
}

SigactionCall next_sigaction() {
  resolve_next_sigaction();
  return g_next_sigaction;
}

}  // namespace

// sigaction(2) as the program sees it, with one difference: a handler that the program installs for
// a fault signal that on_fatal holds runs behind on_fault_first, which notes the fault's address
// first. The program gets back the actions it would see without this library.
extern "C" int sigaction(int sig, const struct sigaction* __restrict act, struct sigaction* __restrict old) noexcept {
  const SigactionCall next = next_sigaction();
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const bool wraps = g_ready && sig > 0 && sig < 65 && is_fault(sig) && g_installed[sig];
  if (!wraps) return next(sig, act, old);
  const auto shown = [sig](struct sigaction* a) {
    if (a != nullptr && (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_fault_first) *a = g_after[sig];
  };
  const bool custom = act != nullptr && ((act->sa_flags & SA_SIGINFO) ? act->sa_sigaction != nullptr
                                                                      : act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN);
  if (!custom || ((act->sa_flags & SA_SIGINFO) && (act->sa_sigaction == on_fatal || act->sa_sigaction == on_fault_first))) {
    const int rc = next(sig, act, old);
    if (rc == 0) shown(old);
    return rc;
  }
  const struct sigaction before = g_after[sig];
  g_after[sig] = *act;  // before the wrapper is in place: a fault meanwhile finds it
  struct sigaction wrapped = *act;
  wrapped.sa_sigaction = on_fault_first;
  wrapped.sa_flags = act->sa_flags | SA_SIGINFO;
  struct sigaction previous {};
  const int rc = next(sig, &wrapped, &previous);
  if (rc != 0) {
    g_after[sig] = before;
    return rc;
  }
  if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction == on_fault_first) previous = before;
  if (old != nullptr) *old = previous;
  return 0;
}
