// WhereSampler (agent/where_sampler.hpp): a running rank asked where its main thread is, through the
// library hvrun preloads, and the libraries whose code counts as waiting on peers. The true answer, a rank
// polling inside a real communication library, is the Horovod case of tests/test_horovod.cpp.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "agent/where_sampler.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/build_paths.hpp"
#include "tests/support/child_process.hpp"

using hvrun::is_communication_library;
using hvrun::test::ChildProcess;
using hvrun::WhereSampler;
using hvrun::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// Asks every 50 ms until an answer comes or `timeout` passes.
std::optional<bool> answer_within(WhereSampler& where, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    where.ask();
    std::this_thread::sleep_for(50ms);
    if (const auto a = where.answer()) return a;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("communication libraries: MPI and its components and transports, Gloo, NCCL, Horovod's modules; not "
          "the C library, torch's compute library, CUDA's driver or the interpreter", "[unit]") {
  for (const char* yes :
       {"/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.5", "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.3",
        "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_vader.so", "/usr/lib/x86_64-linux-gnu/libucp.so.0",
        "/usr/lib/x86_64-linux-gnu/libfabric.so.1", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "/usr/lib/x86_64-linux-gnu/libgloo.so.0", "/usr/lib/x86_64-linux-gnu/libmpich.so.12",
        "/opt/horovod/site/horovod/torch/mpi_lib_v2.cpython-311-x86_64-linux-gnu.so"}) {
    CAPTURE(yes);
    CHECK(is_communication_library(yes));
  }
  for (const char* no : {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so",
                         "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/bin/python3.11", "/opt/horovod/bin/horovodrun",
                         "/home/u/libmpi_wrapper_notes/train", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"}) {
    CAPTURE(no);
    CHECK_FALSE(is_communication_library(no));
  }
}

TEST_CASE("where sampler: a preloaded program that computes answers \"not in a communication library\", its "
          "answer file is removed once read, and a program without the library never answers", "[unit]") {
  TempDir dir;
  const std::string stack_dir = dir.path().string();
  {
    ChildProcess busy({"/bin/sh", "-c", "echo up; while :; do :; done"},
                      {std::string("LD_PRELOAD=") + hvrun::test::build().crash_library, "HVRUN_STACK_DIR=" + stack_dir});
    REQUIRE(busy.wait_for_stdout("up", 1, 10s));
    WhereSampler where(busy.pid(), stack_dir);
    const auto a = answer_within(where, 5s);
    REQUIRE(a.has_value());
    CHECK_FALSE(*a);
    CHECK_FALSE(std::filesystem::exists(stack_dir + "/" + std::to_string(busy.pid()) + ".where"));
  }
  {
    ChildProcess bare({"/bin/sh", "-c", "echo up; while :; do :; done"});
    REQUIRE(bare.wait_for_stdout("up", 1, 10s));
    WhereSampler where(bare.pid(), stack_dir);
    CHECK_FALSE(answer_within(where, 1500ms).has_value());  // 30 asks: past the limit, unanswered
    CHECK(std::filesystem::is_empty(stack_dir));
  }
  {
    WhereSampler nowhere(::getpid(), "");  // no stack directory: nothing is asked or read
    nowhere.ask();
    CHECK_FALSE(nowhere.answer().has_value());
  }
}
