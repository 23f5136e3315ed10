#pragma once
// What ranks would run on this host, learnt before any starts, for the launcher to compare across hosts
// (docs/DESIGN.md §3.2): the program exec would find on the ranks' PATH; for a Python interpreter
// (argv[0] named python, python3, python3.11, ...) the script's presence and SHA-256, the interpreter's
// version, and the versions of torch and horovod as its sys.path would import them, read from their
// package metadata (dist-info METADATA, egg-info PKG-INFO) without importing them; NCCL's and CUDA's
// versions from their files; the GPUs the NVIDIA driver lists. Nothing here runs a rank's code: the
// interpreter is asked only for its version and sys.path, within kInterpreterTimeout.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/control_message.hpp"

namespace hvrun {

// A program larger than this is not hashed (its path is still compared).
inline constexpr std::uintmax_t kFingerprintHashLimit = 256u << 20;
inline constexpr std::chrono::milliseconds kInterpreterTimeout{5000};
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

// Blocks for at most kInterpreterTimeout (the interpreter's run); every other step reads files.
FingerprintMsg take_fingerprint(const FingerprintRequestMsg& request, const FingerprintRoots& roots = {});

// The version in a distribution's metadata directory name and file: "Version: X" of `dir`/METADATA or
// `dir`/PKG-INFO (or `dir` itself when it is an egg-info file); "" when there is none.
std::string metadata_version(const std::string& dir);

}  // namespace hvrun
