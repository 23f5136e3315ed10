#pragma once
// What ranks would run on this host, learnt before any starts, for the launcher to compare across hosts
// (docs/DESIGN.md §3.2): the program exec would find on the ranks' PATH; for a Python interpreter
// (argv[0] named python, python3, python3.11, ...) the script's presence and SHA-256, the interpreter's
// version, and the versions of torch and horovod as its sys.path would import them, read from their
// package metadata (dist-info METADATA, egg-info PKG-INFO) without importing them; NCCL's and CUDA's
// versions from their files; the GPUs the NVIDIA driver lists. Nothing here runs a rank's code: the
// interpreter is asked only for its version and sys.path, within kInterpreterTimeout.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "common/control_message.hpp"

namespace hvrun {

// A program larger than this is not hashed (its path is still compared).
inline constexpr std::uintmax_t kFingerprintHashLimit = 256u << 20;
inline constexpr std::chrono::milliseconds kInterpreterTimeout{5000};
inline constexpr std::size_t kInterpreterOutputLimit = 1u << 20;  // the last bytes of its stdout kept
// The distributions whose versions are reported, as their metadata names them.
inline const std::vector<std::string> kFingerprintPackages{"torch", "horovod"};

// Where the NVIDIA driver, CUDA and NCCL are looked for; a test points them elsewhere.
struct FingerprintRoots {
  std::string nvidia_gpus = "/proc/driver/nvidia/gpus";
  std::string cuda = "/usr/local/cuda";
  std::vector<std::string> library_dirs{"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                        "/usr/lib64", "/usr/local/lib"};
  std::vector<std::string> include_dirs{"/usr/local/cuda/include", "/usr/include"};
};

// Blocks for at most twice kInterpreterTimeout (the interpreter's output, then its exit); every other
// step reads files. The agent takes its fingerprints with FingerprintTaker instead, which does not block.
FingerprintMsg take_fingerprint(const FingerprintRequestMsg& request, const FingerprintRoots& roots = {});

// take_fingerprint's steps, for a caller that runs the interpreter itself. fingerprint_files: everything
// but the interpreter (files read and hashed; a program of up to kFingerprintHashLimit), and for a
// Python program the run that asks it for its version and sys.path. add_interpreter_answer: that run's
// stdout, when it exited with 0, and the package versions read from the metadata along that sys.path.
struct FingerprintFiles {
  FingerprintMsg msg;
  std::optional<ChildSpec> interpreter;
};
FingerprintFiles fingerprint_files(const FingerprintRequestMsg& request, const FingerprintRoots& roots = {});
void add_interpreter_answer(FingerprintMsg& f, const std::string& out, const std::string& cwd);

// The version in a distribution's metadata directory name and file: "Version: X" of `dir`/METADATA or
// `dir`/PKG-INFO (or `dir` itself when it is an egg-info file); "" when there is none.
std::string metadata_version(const std::string& dir);

}  // namespace hvrun
