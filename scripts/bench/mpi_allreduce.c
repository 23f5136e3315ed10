/* mpi_allreduce — the Open MPI contender of scripts/bench_allreduce.sh.
 *
 * MPI_Allreduce of floats (sum, out of place), measured like hvrun-allreduce-bench: WARMUP untimed
 * calls, a barrier, ITERS timed calls; the time is the slowest rank's mean per call. Inputs are small
 * integers ((rank + 3i) % 11 - 5), so the sum is exact and every element is checked. Prints one row in
 * hvrun-allreduce-bench's format (size count type redop time(us) algbw busbw #wrong) and
 * "# Avg bus bandwidth : X" (GB/s; busbw = algbw * 2(n-1)/n).
 *
 *   mpirun ... mpi_allreduce [BYTES [ITERS [WARMUP]]]
 *
 * Exit status: 0 when every element is right, 1 when some is wrong, 2 on a bad argument. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static float input_value(int rank, size_t i) { return (float)((int)((rank + 3 * i) % 11) - 5); }

static float expected_value(int size, size_t i) {
  float sum = 0;
  for (int r = 0; r < size; ++r) sum += input_value(r, i);
  return sum;
}

static long parse_number(const char* text, const char* what) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0) {
    fprintf(stderr, "mpi_allreduce: bad %s '%s'\n", what, text);
    exit(2);
  }
  return value;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t bytes = argc > 1 ? (size_t)parse_number(argv[1], "byte count") : (size_t)64 << 20;
  const int iters = argc > 2 ? (int)parse_number(argv[2], "iteration count") : 20;
  const int warmup = argc > 3 ? (int)parse_number(argv[3], "warm-up count") : 5;
  const size_t count = bytes / sizeof(float);

  float* send = malloc(count * sizeof(float) + 1);
  float* recv = malloc(count * sizeof(float) + 1);
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (size_t i = 0; i < count; ++i) { /* both buffers touched before timing */
    send[i] = input_value(rank, i);
    recv[i] = 0.0f;
  }

  /* Where every rank runs (rank 0 prints it), to show the ranks really are on different hosts. */
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(host, &len);
  char* hosts = rank == 0 ? calloc((size_t)size, MPI_MAX_PROCESSOR_NAME) : NULL;
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);

  for (int i = 0; i < warmup; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double seconds = (MPI_Wtime() - start) / (iters > 0 ? iters : 1);
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  long long wrong = 0, wrong_all = 0;
  for (size_t i = 0; i < count; ++i)
    if (recv[i] != expected_value(size, i)) ++wrong;
  MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

  const double algbw = slowest > 0 ? (double)(count * sizeof(float)) / slowest / 1e9 : 0.0;
  const double busbw = size > 1 ? algbw * 2.0 * (size - 1) / size : 0.0;
  if (rank == 0) {
    printf("# mpi_allreduce: %d ranks, float, sum, %d iterations after %d warm-up; hosts:", size, iters, warmup);
    for (int r = 0; r < size; ++r) printf(" %d=%s", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
    printf("\n");
    printf("  %12zu %12zu %8s %6s %10.1f %8.3f %8.3f %8lld\n", count * sizeof(float), count, "float", "sum",
           slowest * 1e6, algbw, busbw, wrong_all);
    printf("# Avg bus bandwidth : %g\n", busbw);
    fflush(stdout);
  }
  free(hosts);
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong_all == 0 ? 0 : 1;
}
