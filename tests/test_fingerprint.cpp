// What ranks would run on a host (agent/fingerprint.hpp), learnt from files and the interpreter on this
// machine, and how hosts' fingerprints are compared and worded (launcher/check/fingerprint_report.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agent/fingerprint.hpp"
#include "common/file_digest.hpp"
#include "launcher/check/fingerprint_report.hpp"
#include "tests/sshd_fixture.hpp"

using namespace hvrun;
namespace fs = std::filesystem;

namespace {

FingerprintMsg python_print(const std::string& torch, const std::string& script_sha = "ab12") {
  FingerprintMsg f;
  f.program = "/usr/bin/python3";
  f.script = "/w/train.py";
  f.script_sha256 = script_sha + std::string(60, '0');
  f.python = "3.11.2";
  f.packages = {{"torch", torch}, {"horovod", "0.28.1"}};
  return f;
}

}  // namespace

TEST_CASE("fingerprint: a Python rank's script, interpreter, packages from metadata, NCCL, CUDA, GPUs",
          "[fingerprint]") {
  testing::TempDir dir;
  const fs::path root = dir.path();
  testing::write_text(root / "site/torch-1.2.3.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 1.2.3\n");
  testing::write_text(root / "site/horovod-0.28.1.egg-info/PKG-INFO", "Name: horovod\nVersion: 0.28.1\n");
  testing::write_text(root / "site/torchvision-0.14.1.dist-info/METADATA", "Version: 0.14.1\n");  // not torch
  testing::write_text(root / "work/train.py", "print('hi')\n");
  testing::write_text(root / "cuda/version.json", R"({"cuda" : {"name" : "CUDA SDK", "version" : "12.4.1"}})");
  // As NCCL's packages install it: the soname links to the versioned file. The decoy directory has a
  // versioned file but no soname, so the loader would not find NCCL there.
  testing::write_text(root / "decoy/libnccl.so.2.1.0", "");
  testing::write_text(root / "lib/libnccl.so.2.18.3", "");
  fs::create_symlink("libnccl.so.2.18.3", root / "lib/libnccl.so.2");
  fs::create_directories(root / "gpus/0000:01:00.0");
  fs::create_directories(root / "gpus/0000:02:00.0");
  const FingerprintRoots roots{(root / "gpus").string(), (root / "cuda").string(),
                               {(root / "decoy").string(), (root / "lib").string()}, {}};

  FingerprintRequestMsg r{{"python3", "-u", "train.py", "--lr", "3"},
                          (root / "work").string(),
                          {{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", (root / "site").string()}}};
  const FingerprintMsg f = take_fingerprint(r, roots);
  CHECK(f.cwd_error.empty());
  CHECK(f.program == "/usr/bin/python3");
  CHECK(f.program_sha256.empty());  // an interpreter: its script is what is compared
  CHECK(f.script == (root / "work/train.py").string());
  CHECK(f.script_sha256 == sha256_file((root / "work/train.py").string()));
  CHECK(f.script_error.empty());
  CHECK_THAT(f.python, Catch::Matches("3\\.[0-9]+\\.[0-9]+.*"));
  // PYTHONPATH comes first in sys.path, as import would pick it over the system's torch.
  CHECK(f.packages == std::map<std::string, std::string>{{"torch", "1.2.3"}, {"horovod", "0.28.1"}});
  CHECK(f.nccl == "2.18.3");
  CHECK(f.cuda == "12.4.1");
  CHECK(f.gpus == 2);

  SECTION("a script that is not there") {
    r.argv = {"/usr/bin/python3", "missing.py"};
    const FingerprintMsg g = take_fingerprint(r, roots);
    CHECK(g.script == (root / "work/missing.py").string());
    CHECK(g.script_error == "No such file or directory");
  }
  SECTION("python -m and -c have no script") {
    r.argv = {"python3", "-m", "torch.distributed.run"};
    CHECK(take_fingerprint(r, roots).script.empty());
    r.argv = {"python3", "-c", "print(1)"};
    CHECK(take_fingerprint(r, roots).script.empty());
  }
  SECTION("a program that is not an interpreter is hashed; one not on PATH is not found") {
    r.argv = {"true"};
    const FingerprintMsg g = take_fingerprint(r, roots);
    CHECK((g.program == "/usr/bin/true" || g.program == "/bin/true"));
    CHECK(g.program_sha256 == sha256_file(g.program));
    CHECK(g.python.empty());
    r.argv = {"hvrun-no-such-program-xyz"};
    CHECK(take_fingerprint(r, roots).program.empty());
  }
  SECTION("a working directory that does not exist") {
    r.cwd = (root / "nowhere").string();
    const FingerprintMsg g = take_fingerprint(r, roots);
    CHECK(g.cwd_error == "No such file or directory");
    CHECK(g.program.empty());
  }
  SECTION("no NVIDIA driver, CUDA from its header, NCCL from its header") {
    testing::write_text(root / "cuda2/include/cuda.h",
                        "/* #define CUDA_VERSION 1 */\n#define CUDA_VERSION_DECOY 9\n#define CUDA_VERSION 13000\n");
    testing::write_text(root / "inc/nccl.h", "#define NCCL_MAJORITY 7\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n");
    const FingerprintRoots other{(root / "no-gpus").string(), (root / "cuda2").string(), {}, {(root / "inc").string()}};
    const FingerprintMsg g = take_fingerprint(r, other);
    CHECK(g.gpus == -1);
    CHECK(g.cuda == "13.0");
    CHECK(g.nccl == "2.28.9");
  }
  SECTION("CUDA_VERSION past cuda.h's first 16 KiB, cut by them, or past its first 64 KiB") {
    const FingerprintRoots cuda{(root / "no-gpus").string(), (root / "cuda4").string(), {}, {}};
    const auto header_with_define_at = [&](std::size_t at) {
      std::string text;
      while (text.size() + 81 <= at) text += "/* " + std::string(76, 'x') + " */\n";
      text += std::string(at - text.size() - 1, ' ') + "\n#define CUDA_VERSION 12040\n";
      text += std::string(70u << 10, '\n');
      testing::write_text(root / "cuda4/include/cuda.h", text);
    };
    header_with_define_at(20u << 10);
    CHECK(take_fingerprint(r, cuda).cuda == "12.4");
    header_with_define_at((16u << 10) - 23);  // "#define CUDA_VERSION 12" ends the first 16 KiB
    CHECK(take_fingerprint(r, cuda).cuda == "12.4");
    header_with_define_at(65u << 10);
    CHECK(take_fingerprint(r, cuda).cuda.empty());
  }
  SECTION("a wheel's plain libnccl.so.2: the versioned name beside it, else the header") {
    testing::write_text(root / "wheel/libnccl.so.2", "");
    testing::write_text(root / "inc/nccl.h", "#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n");
    const FingerprintRoots wheel{(root / "no-gpus").string(), (root / "none").string(), {(root / "wheel").string()},
                                 {(root / "inc").string()}};
    CHECK(take_fingerprint(r, wheel).nccl == "2.21.5");
    testing::write_text(root / "wheel/libnccl.so.2.20.3", "");
    CHECK(take_fingerprint(r, wheel).nccl == "2.20.3");
  }
  SECTION("names that are not a version, a broken version.json, metadata that only looks like a Version line") {
    testing::write_text(root / "odd/libnccl.so.2", "");
    for (const char* decoy : {"libnccl.so.2.18", "libnccl.so.2.18.3.bak", "libnccl.so.2..3", "libnccl.so.2.x.3",
                              "libnccl.so.2.18.3-1", "libnccl.so..2.18"})
      testing::write_text(root / "odd" / decoy, "");
    testing::write_text(root / "inc/nccl.h", "#define NCCL_MAJOR 2\n#define NCCL_MINOR 19\n#define NCCL_PATCH 1\n");
    testing::write_text(root / "cuda3/version.json", R"({"cuda": {"version": 12})");  // cut short
    testing::write_text(root / "cuda3/include/cuda.h", "#define CUDA_VERSION 12020\n");
    const FingerprintRoots odd{(root / "no-gpus").string(), (root / "cuda3").string(), {(root / "odd").string()},
                               {(root / "inc").string()}};
    const FingerprintMsg g = take_fingerprint(r, odd);
    CHECK(g.nccl == "2.19.1");
    CHECK(g.cuda == "12.2");
    testing::write_text(root / "cuda3/version.json", R"({"cuda": {"version": 12}, "version": "9.9"})");
    CHECK(take_fingerprint(r, odd).cuda == "12.2");  // not a string: the header's
    testing::write_text(root / "cuda3/version.json", R"({"cuda": {"name": "CUDA SDK", "version": "12.6.77"}})");
    CHECK(take_fingerprint(r, odd).cuda == "12.6.77");

    testing::write_text(root / "meta/crlf", "Name: torch\r\nVersion:\t2.1.0+cpu\r\nSummary: x\r\n");
    CHECK(metadata_version((root / "meta/crlf").string()) == "2.1.0+cpu");
    testing::write_text(root / "meta/mid", "Metadata-Version: 2.1\nSummary: see Version: 9\nVersion: 0.3\n");
    CHECK(metadata_version((root / "meta/mid").string()) == "0.3");
    testing::write_text(root / "meta/none", "Metadata-Version: 2.1\nVersion:\nName: x");
    CHECK(metadata_version((root / "meta/none").string()).empty());
  }
}

TEST_CASE("fingerprint report: only the odd hosts out are named; what would fail at once refuses the job",
          "[fingerprint]") {
  const std::vector<std::string> argv{"python3", "train.py"};
  std::vector<HostFingerprint> hosts{{"lab0", 2, python_print("1.13.0a0")},
                                     {"lab1", 2, python_print("1.13.0a0")},
                                     {"lab2", 2, python_print("1.12.1", "cd34")}};
  FingerprintReport r = compare_fingerprints(hosts, argv, "/w");
  CHECK(r.refusals.empty());
  CHECK(r.differences == std::vector<std::string>{
                             "lab2: train.py differs (sha256 cd3400000000); lab[0-1]: sha256 ab1200000000; make it the same "
                             "everywhere with --sync /w",
                             "lab2: torch 1.12.1; lab[0-1]: 1.13.0a0"});

  hosts[2].fingerprint = python_print("1.13.0a0");
  r = compare_fingerprints(hosts, argv, "/w");
  CHECK(r.differences.empty());
  CHECK(r.same == "train.py sha256 ab1200000000, Python 3.11.2, horovod 0.28.1, torch 1.13.0a0");

  hosts[1].fingerprint.packages.erase("torch");  // not installed there
  hosts[2].fingerprint.gpus = 1;
  hosts[0].fingerprint.gpus = hosts[1].fingerprint.gpus = 4;
  r = compare_fingerprints(hosts, argv, "/w");
  CHECK(r.differences == std::vector<std::string>{"lab1: torch none; lab[0,2]: 1.13.0a0",
                                                  "lab2: GPUs 1; lab[0-1]: 4", "lab2: 2 ranks but 1 GPU"});

  hosts[1].fingerprint.script_sha256.clear();
  hosts[1].fingerprint.script_error = "No such file or directory";
  hosts[2].fingerprint.program.clear();
  r = compare_fingerprints(hosts, argv, "/w");
  CHECK(r.refusals == std::vector<std::string>{
                          "lab2: 'python3' is not on the ranks' PATH there; install it there, or give its full path",
                          "lab1: the script /w/train.py cannot be read there (No such file or directory); copy it "
                          "there (--sync /w does), or start hvrun from a directory every host shares"});
  CHECK(r.differences.empty());  // refused: nothing else is compared

  hosts[0].fingerprint.cwd_error = "No such file or directory";
  r = compare_fingerprints(hosts, argv, "/w");
  CHECK(r.refusals.front() ==
        "working directory '/w' does not exist on lab0; create it there or start hvrun from a directory every host has");
}
