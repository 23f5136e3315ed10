// Built outside hvrun's tree against the installed headers and library, run under the installed hvrun:
// every rank allreduces rank+1 and checks the sum, broadcasts from the last rank, and gathers the ranks.
#include <hvrun/collectives.h>
#include <hvrun/communicator.hpp>
#include <hvrun/error.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = hvrun::Communicator::init();
    const int n = comm.size();
    std::vector<std::int64_t> v(1000, comm.rank() + 1);
    comm.allreduce(std::span<std::int64_t>(v), hvrun::ReduceOp::kSum);
    for (auto x : v) {
      if (x != std::int64_t{n} * (n + 1) / 2) {
        std::fprintf(stderr, "rank %d: wrong sum %lld\n", comm.rank(), static_cast<long long>(x));
        return 1;
      }
    }
    double root_value = comm.rank() == n - 1 ? 2.5 : 0.0;
    comm.broadcast(&root_value, 1, hvrun::DataType::kFloat64, n - 1);
    std::int32_t mine = comm.rank();
    std::vector<std::int32_t> all(n, -1);
    comm.allgather(&mine, all.data(), 1, hvrun::DataType::kInt32);
    for (int r = 0; r < n; ++r) {
      if (all[r] != r) return 1;
    }
    comm.barrier();
    std::printf("outside rank %d of %d: sum, broadcast %.1f and allgather ok\n", comm.rank(), n, root_value);
    return root_value == 2.5 ? 0 : 1;
  } catch (const hvrun::Error& e) {
    std::fprintf(stderr, "outside: %s\n", e.what());
    return 1;
  }
}
