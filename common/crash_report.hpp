#pragma once
// The texts that libhvrun_crash.so (agent/crash_handler/) writes and hvrun reads: the header and footer
// of a crash's native stack on a rank's stderr, and the sections of a stack file written on hvrun's
// request. Constants only, so that the preload library, built without libstdc++, can use them.
namespace hvrun::crash_report {

// On stderr: "hvrun-crash: pid N (COMM) SIGSEGV, fault address 0x0, native stack of thread T:", the
// frames, then the footer line.
inline constexpr const char kCrashHeader[] = "hvrun-crash:";
inline constexpr const char kCrashFooter[] = "hvrun-crash: end of stack";

// A frame as the library writes it, from a signal handler that may not look names up: its address
// and where that lies in a mapped file, "  #0 0xADDR in FILE at file offset 0xOFF" ("  #0 0xADDR ??"
// outside any file). hvrun's agent rewrites such lines, on the rank's host, into named frames
// ("  #0 0xADDR name+0xOFF (FILE)", or "  #0 0xADDR ?? +0xVADDR (FILE)" where no symbol holds it)
// before they leave the host: the launcher reads only named ones.
inline constexpr const char kFrameFile[] = " in ";
inline constexpr const char kFrameOffset[] = " at file offset ";

// A stack file: "hvrun-stack: pid N (COMM)", then the Python section (faulthandler's text, all
// threads, the main thread first as "Current thread") when the process runs Python, then the native
// section (frames as above, the main thread's).
inline constexpr const char kStackHeader[] = "hvrun-stack:";
inline constexpr const char kPythonSection[] = "python:";
inline constexpr const char kNativeSection[] = "native:";

// The environment variable that tells the library where stack files go; the value of the SIGURG
// that asks for one (sigqueue's si_value), so that no other SIGURG writes a file.
inline constexpr const char kStackDirVariable[] = "HVRUN_STACK_DIR";
inline constexpr int kStackRequest = 0x68767275;  // "hvru"
// Issue 40: the SIGURG value that asks only where the main thread is: the library writes the return
// addresses of its native frames, innermost (the interrupted instruction) first, as hexadecimal words on
// one line ("0x7f.. 0x55..\n"), to $HVRUN_STACK_DIR/<pid>.where (under a temporary name, renamed when
// whole); the agent reads and removes it (agent/where_sampler.hpp).
inline constexpr int kWhereRequest = 0x68767277;  // "hvrw"
inline constexpr const char kWhereSuffix[] = ".where";
// How ExitedMsg::cause starts for a rank the kernel's OOM killer ended (the launcher adds the peak RSS).
inline constexpr const char kOomKillCause[] = "sent by the kernel's OOM killer";

// Set to 0 by the user (-x HVRUN_CRASH_HANDLER=0): the agent preloads nothing.
inline constexpr const char kCrashHandlerVariable[] = "HVRUN_CRASH_HANDLER";

}  // namespace hvrun::crash_report
