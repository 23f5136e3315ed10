// MpiRankFinder (agent/mpi_rank_finder.hpp): the ranks mpirun's daemons start, found by the job's marker
// in their environment, a rank's own children left out.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "agent/mpi_rank_finder.hpp"
#include "tests/support/child_process.hpp"

using hvrun::mpi_rank_in;
using namespace std::chrono_literals;
using namespace std::string_literals;

TEST_CASE("an MPI rank's environment: the marker and OMPI_COMM_WORLD_RANK (or PMIX_RANK) make a rank", "[unit]") {
  const std::string env = "PATH=/bin\0HVRUN_MPI_MARKER=abc\0OMPI_COMM_WORLD_RANK=7\0"s;
  CHECK(mpi_rank_in(env, "abc") == 7);
  CHECK_FALSE(mpi_rank_in(env, "abd").has_value());  // another job's
  CHECK_FALSE(mpi_rank_in(env, "").has_value());
  CHECK(mpi_rank_in("HVRUN_MPI_MARKER=abc\0PMIX_RANK=2"s, "abc") == 2);
  CHECK_FALSE(mpi_rank_in("HVRUN_MPI_MARKER=abc\0OMPI_COMM_WORLD_RANK=x"s, "abc").has_value());
  CHECK_FALSE(mpi_rank_in("HVRUN_MPI_MARKER=abcd\0OMPI_COMM_WORLD_RANK=1"s, "abc").has_value());
  CHECK_FALSE(mpi_rank_in("XHVRUN_MPI_MARKER=abc\0OMPI_COMM_WORLD_RANK=1"s, "abc").has_value());
  CHECK_FALSE(mpi_rank_in("OMPI_COMM_WORLD_RANK=1"s, "abc").has_value());
}

TEST_CASE("MPI rank finder: a marked process is found once, with its rank; its marked child is not; an "
          "unmarked one is not", "[unit]") {
  hvrun::test::ChildProcess rank({"/bin/sh", "-c", "sleep 30 & echo up; wait"},
                                 {"HVRUN_MPI_MARKER=m1", "OMPI_COMM_WORLD_RANK=5"});
  hvrun::test::ChildProcess other({"/bin/sh", "-c", "echo up; sleep 30"},
                                  {"HVRUN_MPI_MARKER=another", "OMPI_COMM_WORLD_RANK=6"});
  REQUIRE(rank.wait_for_stdout("up", 1, 10s));
  REQUIRE(other.wait_for_stdout("up", 1, 10s));
  boost::asio::io_context io;
  std::vector<std::pair<int, pid_t>> found;
  hvrun::MpiRankFinder finder(io, "m1", [&](int r, pid_t pid) { found.emplace_back(r, pid); });
  finder.start();
  io.run_for(2500ms);  // three scans
  finder.stop();
  REQUIRE(found.size() == 1);
  CHECK(found[0] == std::make_pair(5, rank.pid()));
}
