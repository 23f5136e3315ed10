// raw_gloo_allreduce — the "raw Gloo" contender of scripts/bench_allreduce.sh.
//
// One process per rank, started by hand on each host (no launcher, no hvrun library): Gloo's TCP
// transport bound to a named NIC, a full mesh connected through gloo::rendezvous::FileStore on a
// directory every rank can see, then gloo::allreduce (AllreduceOptions, default algorithm, float sum,
// out of place and in place) — the same Gloo calls hvrun's Gloo backend makes
// (collectives/gloo_backend.cpp), so the difference between the two is whatever hvrun adds.
//
// Measured like hvrun-allreduce-bench: WARMUP untimed calls, a barrier, ITERS timed calls; the time
// is the slowest rank's mean per call. Inputs are small integers ((rank + 3i) % 11 - 5), so the sum is
// exact and every element is checked. In place is timed on zeros and then checked on one call with the
// input, as hvrun-allreduce-bench does. Prints one row in hvrun-allreduce-bench's format (size count
// type redop, then time(us) algbw busbw #wrong out of place and again in place) and
// "# Avg bus bandwidth : X" (GB/s, the mean of the two columns).
//
//   raw_gloo_allreduce RANK SIZE IFACE STORE_DIR [BYTES [ITERS [WARMUP]]]
//
// Exit status: 0 when every element is right, 1 when some is wrong, 2 on any error.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

float input_value(int rank, std::size_t i) { return static_cast<float>(static_cast<int>((rank + 3 * i) % 11) - 5); }

float expected_value(int size, std::size_t i) {
  float sum = 0;
  for (int r = 0; r < size; ++r) sum += input_value(r, i);
  return sum;
}

long parse_number(const char* text, const char* what) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0) {
    std::fprintf(stderr, "raw_gloo_allreduce: bad %s '%s'\n", what, text);
    std::exit(2);
  }
  return value;
}

int run(int rank, int size, const std::string& iface, const std::string& store_dir, std::size_t bytes, int iters,
        int warmup) {
  const std::chrono::seconds timeout(120);

  // TCP device on the NIC, IPv4 as hvrun does for an IPv4 HVRUN_ADDR (the lab's fabric NIC also has
  // IPv6 addresses; a link-local one must not be taken).
  gloo::transport::tcp::attr attr;
  attr.iface = iface;
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);

  // Full mesh through a store of files (each key a file in STORE_DIR, shared by the hosts).
  gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  context->connectFullMesh(store, device);

  const std::size_t count = bytes / sizeof(float);
  std::vector<float> send(count), recv(count, 0.0f);  // both touched before timing
  for (std::size_t i = 0; i < count; ++i) send[i] = input_value(rank, i);

  std::uint32_t tag = 0;
  auto allreduce = [&](float* in, float* out, std::size_t n, void (*fn)(void*, const void*, const void*, std::size_t)) {
    gloo::AllreduceOptions opts(context);
    opts.setTag(tag++);
    opts.setTimeout(timeout);
    opts.setInput(in, n);
    opts.setOutput(out, n);
    opts.setReduceFunction(fn);
    gloo::allreduce(opts);
  };
  using Fn = void (*)(void*, const void*, const void*, std::size_t);
  const Fn sum = static_cast<Fn>(&gloo::sum<float>);

  using MaxFn = void (*)(void*, const void*, const void*, std::size_t);
  // Mean seconds per call of the slowest rank.
  auto timed = [&](float* in, float* out) {
    for (int i = 0; i < warmup; ++i) allreduce(in, out, count, sum);
    gloo::BarrierOptions barrier(context);
    barrier.setTag(tag++);
    gloo::barrier(barrier);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) allreduce(in, out, count, sum);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count() / (iters > 0 ? iters : 1);
    gloo::AllreduceOptions opts(context);
    opts.setTag(tag++);
    opts.setOutput(&seconds, 1);
    opts.setReduceFunction(static_cast<MaxFn>(&gloo::max<double>));
    gloo::allreduce(opts);
    return seconds;
  };
  // Wrong elements of recv over all ranks.
  auto wrong_in_recv = [&] {
    double wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (recv[i] != expected_value(size, i)) wrong += 1;
    gloo::AllreduceOptions opts(context);
    opts.setTag(tag++);
    opts.setOutput(&wrong, 1);
    opts.setReduceFunction(static_cast<MaxFn>(&gloo::sum<double>));
    gloo::allreduce(opts);
    return static_cast<long long>(wrong);
  };

  const double out_seconds = timed(send.data(), recv.data());
  const long long out_wrong = wrong_in_recv();
  std::fill(recv.begin(), recv.end(), 0.0f);
  const double in_seconds = timed(recv.data(), recv.data());
  recv = send;
  allreduce(recv.data(), recv.data(), count, sum);
  const long long in_wrong = wrong_in_recv();

  const std::size_t used = count * sizeof(float);
  auto algbw = [&](double seconds) { return seconds > 0 ? static_cast<double>(used) / seconds / 1e9 : 0.0; };
  auto busbw = [&](double seconds) { return size > 1 ? algbw(seconds) * 2.0 * (size - 1) / size : 0.0; };
  if (rank == 0) {
    std::printf("# raw_gloo_allreduce: %d ranks, Gloo on %s, float, sum, %d iterations after %d warm-up\n", size,
                device->str().c_str(), iters, warmup);
    std::printf("  %12zu %12zu %8s %6s %10.1f %8.3f %8.3f %8lld %10.1f %8.3f %8.3f %8lld\n", used, count, "float",
                "sum", out_seconds * 1e6, algbw(out_seconds), busbw(out_seconds), out_wrong, in_seconds * 1e6,
                algbw(in_seconds), busbw(in_seconds), in_wrong);
    std::printf("# Avg bus bandwidth : %g\n", (busbw(out_seconds) + busbw(in_seconds)) / 2);
    std::fflush(stdout);
  }
  return out_wrong == 0 && in_wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 8) {
    std::fprintf(stderr, "usage: raw_gloo_allreduce RANK SIZE IFACE STORE_DIR [BYTES [ITERS [WARMUP]]]\n");
    return 2;
  }
  const int rank = static_cast<int>(parse_number(argv[1], "rank"));
  const int size = static_cast<int>(parse_number(argv[2], "size"));
  const std::size_t bytes = argc > 5 ? static_cast<std::size_t>(parse_number(argv[5], "byte count")) : 64u << 20;
  const int iters = argc > 6 ? static_cast<int>(parse_number(argv[6], "iteration count")) : 20;
  const int warmup = argc > 7 ? static_cast<int>(parse_number(argv[7], "warm-up count")) : 5;
  if (size < 1 || rank >= size) {
    std::fprintf(stderr, "raw_gloo_allreduce: rank %d out of range for size %d\n", rank, size);
    return 2;
  }
  try {
    return run(rank, size, argv[3], argv[4], bytes, iters, warmup);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw_gloo_allreduce: rank %d: %s\n", rank, e.what());
    return 2;
  }
}
