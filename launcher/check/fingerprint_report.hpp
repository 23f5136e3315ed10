#pragma once
// What the ranks would run on each host (FingerprintMsg, from agent/fingerprint.hpp), compared across
// the job's hosts before any rank starts: what would make ranks fail at once (a program not there, a
// script missing) refuses the job, naming hosts and paths; any other difference (a stale script, another
// torch, fewer GPUs than ranks) is worth a warning that names only the odd hosts out. Pure: the job
// (launcher/job/job_launch.cpp, launcher/job/elastic_admission.cpp) collects the fingerprints and says
// what this decides.
#include <string>
#include <vector>

#include "common/control_message.hpp"

namespace hvrun {

struct HostFingerprint {
  std::string host;
  int ranks = 0;  // the ranks it will run
  FingerprintMsg fingerprint;
};

struct FingerprintReport {
  std::vector<std::string> refusals;     // one line each, naming hosts and path; any: no rank may start
  std::vector<std::string> differences;  // one line each: "lab2: torch 1.12.1; lab0, lab1: 1.13.0a0"
  std::string same;                      // what every host agrees on: "python3 3.11.2, torch 1.13.0, ..."
};

// `argv` and `cwd`: the job's command and working directory (they are named in the lines).
FingerprintReport compare_fingerprints(const std::vector<HostFingerprint>& hosts, const std::vector<std::string>& argv,
                                       const std::string& cwd);

}  // namespace hvrun
