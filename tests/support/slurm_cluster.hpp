#pragma once
// Test support: a real Slurm cluster (scripts/slurm_lab.sh) on a lab for the life of one test: lab
// host 0 is the login node with slurmctld, the others are compute nodes with a slurmd each. The
// destructor stops slurmd, slurmctld, munged and every job step, and removes their files, even when
// the test fails.
#include <optional>
#include <string>
#include <vector>

#include "tests/support/lab.hpp"

namespace hvrun::test {

class SlurmCluster {
 public:
  // Why Slurm tests cannot run here beyond the lab's own reasons (no slurmctld, slurmd, munged), or nothing.
  static std::optional<std::string> unavailable_reason();

  // Starts the cluster on `lab` (2 or more hosts); throws with slurm_lab.sh's output when that fails.
  explicit SlurmCluster(const Lab& lab);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // argv that runs `cmd` on the login node (lab host 0) with this cluster's SLURM_CONF.
  std::vector<std::string> on_login(const std::vector<std::string>& cmd) const;
  const std::string& conf() const { return conf_; }

 private:
  std::string prefix_;
  std::string conf_;
};

}  // namespace hvrun::test
