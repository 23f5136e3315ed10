// hvrun-allreduce-bench: allreduce bandwidth in the style of nccl-tests' all_reduce_perf, run under
// hvrun (`hvrun -np 4 hvrun-allreduce-bench -b 8 -e 64M -f 4`). Every result is checked against a known
// answer; a wrong element anywhere makes the exit code 1. Only rank 0 prints the table, with an
// out-of-place (send != recv) and an in-place (send == recv) column as nccl-tests has.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <vector>

#include "common/error.hpp"
#include "collectives/bench_plan.hpp"
#include "hvrun/communicator.hpp"
#if HVRUN_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using hvrun::Communicator;
using hvrun::DataType;
using hvrun::ReduceOp;

struct Settings {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string backend = "gloo";
};

// Where the benchmark's two buffers live: host memory for Gloo, device memory (with a host mirror for
// filling and checking) for NCCL.
class Buffers {
 public:
  Buffers(Communicator& comm, bool gpu, std::size_t bytes) : comm_(comm), gpu_(gpu), host_send_(bytes), host_recv_(bytes) {
#if HVRUN_HAVE_NCCL
    if (gpu_) {
      cuda(cudaMalloc(&dev_send_, std::max<std::size_t>(bytes, 1)), "cudaMalloc");
      cuda(cudaMalloc(&dev_recv_, std::max<std::size_t>(bytes, 1)), "cudaMalloc");
    }
#endif
  }
  ~Buffers() {
#if HVRUN_HAVE_NCCL
    if (dev_send_) cudaFree(dev_send_);
    if (dev_recv_) cudaFree(dev_recv_);
#endif
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  void* host_send() { return host_send_.data(); }
  void* host_recv() { return host_recv_.data(); }

  // Host input → where the collective reads it; recv cleared so a collective that does nothing shows.
  void upload(std::size_t bytes) {
    std::fill(host_recv_.begin(), host_recv_.end(), '\0');
#if HVRUN_HAVE_NCCL
    if (gpu_) {
      cuda(cudaMemcpy(dev_send_, host_send_.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      cuda(cudaMemset(dev_recv_, 0, std::max<std::size_t>(bytes, 1)), "cudaMemset");
    }
#endif
    (void)bytes;
  }

  // Out of place reads send and writes recv; in place reduces recv into itself.
  void allreduce(std::size_t count, DataType type, ReduceOp op, bool in_place) {
    if (!gpu_) {
      if (in_place) return comm_.allreduce(host_recv_.data(), count, type, op);
      return comm_.allreduce(host_send_.data(), host_recv_.data(), count, type, op);
    }
#if HVRUN_HAVE_NCCL
    comm_.gpu_allreduce(in_place ? dev_recv_ : dev_send_, dev_recv_, count, type, op);
#endif
  }

  // The in-place runs start from the input: send's first bytes copied into recv.
  void input_to_recv(std::size_t bytes) {
    std::copy_n(host_send_.begin(), bytes, host_recv_.begin());
#if HVRUN_HAVE_NCCL
    if (gpu_) cuda(cudaMemcpy(dev_recv_, dev_send_, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
#endif
  }

  // Zeroes recv, for the timed in-place calls: x op x of zeros stays zero for every op and type, so
  // repeated calls neither overflow nor slow down on denormals; the work is the same as on any data.
  void zero_recv(std::size_t bytes) {
    std::fill_n(host_recv_.begin(), bytes, '\0');
#if HVRUN_HAVE_NCCL
    if (gpu_) cuda(cudaMemset(dev_recv_, 0, std::max<std::size_t>(bytes, 1)), "cudaMemset");
#endif
  }

  // Waits until every enqueued collective finished (NCCL; Gloo's calls return when done).
  void finish() {
    if (gpu_) comm_.gpu_synchronize();
  }

  void download(std::size_t bytes) {
#if HVRUN_HAVE_NCCL
    if (gpu_) cuda(cudaMemcpy(host_recv_.data(), dev_recv_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
#endif
    (void)bytes;
  }

 private:
#if HVRUN_HAVE_NCCL
  static void cuda(cudaError_t e, const char* call) {
    if (e != cudaSuccess) throw hvrun::CollectiveError(std::string(call) + " failed: " + cudaGetErrorString(e));
  }
  void* dev_send_ = nullptr;
  void* dev_recv_ = nullptr;
#endif
  Communicator& comm_;
  bool gpu_;
  std::vector<char> host_send_, host_recv_;
};

int run(const Settings& s) {
  const auto sizes = hvrun::bench::sweep(s.min_bytes, s.max_bytes, s.factor);
  Communicator comm = Communicator::init();
  const bool gpu = s.backend == "nccl";
  if (gpu) comm.init_gpu();
  const int n = comm.size();
  const std::size_t esize = hvrun::data_type_size(s.type);
  const bool printer = comm.rank() == 0;

  if (printer) {
    std::printf("# hvrun-allreduce-bench: %d ranks, backend %s, %s, %s, %d iterations after %d warm-up\n", n,
                s.backend.c_str(), hvrun::data_type_name(s.type), hvrun::reduce_op_name(s.op), s.iters, s.warmup);
    std::printf("# rank 0: Gloo on %s%s%s\n", comm.device_description().c_str(),
                gpu ? ", NCCL on CUDA device " : "", gpu ? std::to_string(comm.gpu_device()).c_str() : "");
    std::printf("#\n");
    std::printf("# %12s %12s %8s %6s %37s %37s\n", "", "", "", "", "out-of-place", "in-place");
    std::printf("# %12s %12s %8s %6s %10s %8s %8s %8s %10s %8s %8s %8s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %12s %12s %8s %6s %10s %8s %8s %8s %10s %8s %8s %8s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  Buffers buffers(comm, gpu, sizes.back());
  double busbw_sum = 0;
  std::int64_t wrong_total = 0;
  for (const std::uint64_t bytes_asked : sizes) {
    const std::size_t count = bytes_asked / esize;
    const std::size_t bytes = count * esize;
    hvrun::bench::fill_input(buffers.host_send(), count, s.type, s.op, comm.rank(), n);
    buffers.upload(bytes);

    // Mean seconds per call of the slowest rank, over s.iters calls after s.warmup.
    auto timed = [&](bool in_place) {
      for (int i = 0; i < s.warmup; ++i) buffers.allreduce(count, s.type, s.op, in_place);
      buffers.finish();
      comm.barrier();
      const auto start = Clock::now();
      for (int i = 0; i < s.iters; ++i) buffers.allreduce(count, s.type, s.op, in_place);
      buffers.finish();
      double seconds = std::chrono::duration<double>(Clock::now() - start).count() / std::max(s.iters, 1);
      comm.allreduce(&seconds, 1, DataType::kFloat64, ReduceOp::kMax);
      return seconds;
    };
    // Wrong elements of recv over all ranks.
    auto wrong_in_recv = [&] {
      buffers.download(bytes);
      auto wrong = static_cast<std::int64_t>(hvrun::bench::count_wrong(buffers.host_recv(), count, s.type, s.op, n));
      comm.allreduce(&wrong, 1, DataType::kInt64, ReduceOp::kSum);
      return wrong;
    };

    // Out of place: every timed call recomputes recv from send, so the last one is checked.
    const double out_seconds = timed(false);
    const std::int64_t out_wrong = wrong_in_recv();
    // In place, as nccl-tests: timed on a buffer of zeros, then one call on the input, checked.
    buffers.zero_recv(bytes);
    const double in_seconds = timed(true);
    buffers.input_to_recv(bytes);
    buffers.allreduce(count, s.type, s.op, true);
    buffers.finish();
    const std::int64_t in_wrong = wrong_in_recv();
    wrong_total += out_wrong + in_wrong;

    auto algbw = [&](double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; };
    const double out_busbw = hvrun::bench::bus_bandwidth(algbw(out_seconds), n);
    const double in_busbw = hvrun::bench::bus_bandwidth(algbw(in_seconds), n);
    busbw_sum += (out_busbw + in_busbw) / 2;
    if (printer) {
      std::printf("  %12zu %12zu %8s %6s %10.1f %8.3f %8.3f %8lld %10.1f %8.3f %8.3f %8lld\n", bytes, count,
                  hvrun::data_type_name(s.type), hvrun::reduce_op_name(s.op), out_seconds * 1e6, algbw(out_seconds),
                  out_busbw, static_cast<long long>(out_wrong), in_seconds * 1e6, algbw(in_seconds), in_busbw,
                  static_cast<long long>(in_wrong));
      std::fflush(stdout);
    }
  }
  if (printer) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
                wrong_total == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth : %g\n", busbw_sum / static_cast<double>(sizes.size()));
    std::printf("#\n");
    std::fflush(stdout);
  }
  if (wrong_total != 0) {
    std::fprintf(stderr, "hvrun-allreduce-bench: rank %d: %lld wrong elements in total\n", comm.rank(),
                 static_cast<long long>(wrong_total));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_logger_st("hvrun"));
  spdlog::set_pattern("%v");
  CLI::App app("Allreduce bandwidth over hvrun's collectives, in the style of nccl-tests' all_reduce_perf. "
               "Run it under hvrun: hvrun -np 4 hvrun-allreduce-bench -b 8 -e 64M -f 4",
               "hvrun-allreduce-bench");
  Settings s;
  std::string min_text = "8", max_text = "32M", type_text = "float", op_text = "sum";
  app.add_option("-b,--minbytes", min_text, "smallest size in bytes (K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_text, "largest size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", s.factor, "multiply the size by this each step")->capture_default_str();
  app.add_option("-n,--iters", s.iters, "timed iterations per size")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", s.warmup, "untimed iterations first")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("-d,--datatype", type_text, "float, double, int32 or int64")->capture_default_str();
  app.add_option("-o,--op", op_text, "sum, min, max or prod")->capture_default_str();
  app.add_option("--backend", s.backend, "gloo (host buffers) or nccl (GPU buffers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gloo", "nccl"}));
  CLI11_PARSE(app, argc, argv);
  try {
    s.min_bytes = hvrun::bench::parse_byte_size(min_text);
    s.max_bytes = hvrun::bench::parse_byte_size(max_text);
    const auto type = hvrun::parse_data_type(type_text);
    if (!type || hvrun::data_type_size(*type) == 2)
      throw hvrun::UsageError("-d " + type_text + ": use float, double, int32 or int64");
    s.type = *type;
    const auto op = hvrun::parse_reduce_op(op_text);
    if (!op) throw hvrun::UsageError("-o " + op_text + ": use sum, min, max or prod");
    s.op = *op;
    if (s.backend == "nccl" && !Communicator::nccl_built())
      throw hvrun::UsageError("--backend nccl: this build has no NCCL (configure with -DHVRUN_WITH_NCCL=ON)");
    hvrun::bench::sweep(s.min_bytes, s.max_bytes, s.factor);  // reject a bad sweep before connecting
  } catch (const hvrun::UsageError& e) {
    std::cerr << "hvrun-allreduce-bench: " << e.what() << "\n";
    return 2;
  }
  try {
    return run(s);
  } catch (const hvrun::UsageError& e) {
    std::cerr << "hvrun-allreduce-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "hvrun-allreduce-bench: " << e.what() << "\n";
    return 1;
  }
}
