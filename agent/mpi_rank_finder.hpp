#pragma once
// --mpi (issue 40): the ranks that mpirun's daemons start on this host are not the agent's children, so
// the agent finds them to observe them: each second it reads the environment of this user's processes
// it has not read since their last exec (a pid and its command name, /proc/PID/stat: a daemon's child
// is read again once it has exec'd the rank) for HVRUN_MPI_MARKER=<the job's marker>, which hvrun gave
// mpirun for its ranks, and takes a rank's number from OMPI_COMM_WORLD_RANK. A process whose parent
// carries the marker too is a rank's own child (a data loader, a shell the rank ran), not a rank. Only
// processes in the agent's own network namespace count: hosts that share a kernel (the test lab's
// namespaces, containers on one machine) see each other's processes in /proc.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <string_view>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace hvrun {

// The rank that a process environment (`environ`: NUL-separated NAME=value) names, when it carries
// HVRUN_MPI_MARKER=`marker` and an OMPI_COMM_WORLD_RANK (or PMIX_RANK) that is a number; nullopt otherwise.
std::optional<int> mpi_rank_in(std::string_view environ, std::string_view marker);

class MpiRankFinder {
 public:
  static constexpr std::chrono::milliseconds kScan{1000};

  // `found` runs on the io_context once for each rank process found.
  MpiRankFinder(boost::asio::io_context& io, std::string marker, std::function<void(int rank, pid_t pid)> found);

  void start();  // scans now, then every kScan
  void stop();

 private:
  void scan();
  void arm();

  boost::asio::steady_timer timer_;
  std::string marker_;
  std::function<void(int, pid_t)> found_;
  std::map<pid_t, std::string> read_;  // each process read, with its command name then; forgotten when gone
  std::string net_ns_;                  // this process's /proc/self/ns/net link ("net:[INODE]")
  bool stopped_ = true;
};

}  // namespace hvrun
