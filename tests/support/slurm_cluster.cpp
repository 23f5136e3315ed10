#include "tests/support/slurm_cluster.hpp"

#include <filesystem>
#include <stdexcept>

#include "tests/support/child_process.hpp"

namespace hvrun::test {

using namespace std::chrono_literals;

namespace {

std::string script() { return source_dir() + "/scripts/slurm_lab.sh"; }

std::vector<std::string> env_of(const std::string& prefix) {
  return {"LAB_PREFIX=" + prefix, "LAB_DIR=/tmp/" + prefix, "SLURM_LAB_DIR=/tmp/" + prefix + "-slurm"};
}

}  // namespace

std::optional<std::string> SlurmCluster::unavailable_reason() {
  if (auto why = Lab::unavailable_reason()) return why;
  for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun"})
    if (!std::filesystem::exists(bin))
      return std::string("skipped: Slurm tests need ") + bin +
             " (scripts/slurm_lab.sh installs slurmctld, slurmd, slurm-client and munge as root)";
  return std::nullopt;
}

SlurmCluster::SlurmCluster(const Lab& lab)
    : prefix_(lab.var("LAB_PREFIX")), conf_("/tmp/" + prefix_ + "-slurm/slurm.conf") {
  // A cluster left by a killed run of this test goes first.
  run({script(), "down"}, 60s, env_of(prefix_));
  // Generous: on a fresh machine up installs Slurm's packages first.
  auto up = run({script(), "up"}, 600s, env_of(prefix_));
  if (up.exit_code != 0) {
    run({script(), "down"}, 60s, env_of(prefix_));
    throw std::runtime_error("slurm_lab.sh up failed (" + std::to_string(up.exit_code) + "): " + up.out + up.err);
  }
}

SlurmCluster::~SlurmCluster() { run({script(), "down"}, 60s, env_of(prefix_)); }

std::vector<std::string> SlurmCluster::on_login(const std::vector<std::string>& cmd) const {
  std::vector<std::string> argv{"/usr/bin/env"};
  for (const auto& e : env_of(prefix_)) argv.push_back(e);
  argv.insert(argv.end(), {script(), "run", "0"});
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

}  // namespace hvrun::test
