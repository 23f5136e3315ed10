/* mpi_allreduce — the Open MPI contender of scripts/bench_allreduce.sh.
 *
 * MPI_Allreduce of floats (sum), out of place and in place (MPI_IN_PLACE), measured like
 * hvrun-allreduce-bench: WARMUP untimed calls, a barrier, ITERS timed calls; the time is the slowest
 * rank's mean per call. Inputs are small integers ((rank + 3i) % 11 - 5), so the sum is exact and every
 * element is checked; in place is timed on zeros, then checked on one call with the input. Prints one
 * row in hvrun-allreduce-bench's format (size count type redop, then time(us) algbw busbw #wrong out of
 * place and again in place) and "# Avg bus bandwidth : X" (GB/s; busbw = algbw * 2(n-1)/n; the mean
 * of the two columns).
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

/* Mean seconds per call of the slowest rank. */
static double timed(const void* send, float* recv, size_t count, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double seconds = (MPI_Wtime() - start) / (iters > 0 ? iters : 1);
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

/* Wrong elements of recv over all ranks. */
static long long wrong_in(const float* recv, size_t count, int size) {
  long long wrong = 0, wrong_all = 0;
  for (size_t i = 0; i < count; ++i)
    if (recv[i] != expected_value(size, i)) ++wrong;
  MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return wrong_all;
}

static double algbw(size_t bytes, double seconds) { return seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0; }

static double busbw(size_t bytes, double seconds, int size) {
  return size > 1 ? algbw(bytes, seconds) * 2.0 * (size - 1) / size : 0.0;
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

  const double out_seconds = timed(send, recv, count, iters, warmup);
  const long long out_wrong = wrong_in(recv, count, size);
  for (size_t i = 0; i < count; ++i) recv[i] = 0.0f;
  const double in_seconds = timed(MPI_IN_PLACE, recv, count, iters, warmup);
  for (size_t i = 0; i < count; ++i) recv[i] = send[i];
  MPI_Allreduce(MPI_IN_PLACE, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const long long in_wrong = wrong_in(recv, count, size);

  const size_t used = count * sizeof(float);
  if (rank == 0) {
    printf("# mpi_allreduce: %d ranks, float, sum, %d iterations after %d warm-up; hosts:", size, iters, warmup);
    for (int r = 0; r < size; ++r) printf(" %d=%s", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
    printf("\n");
    printf("  %12zu %12zu %8s %6s %10.1f %8.3f %8.3f %8lld %10.1f %8.3f %8.3f %8lld\n", used, count, "float", "sum",
           out_seconds * 1e6, algbw(used, out_seconds), busbw(used, out_seconds, size), out_wrong, in_seconds * 1e6,
           algbw(used, in_seconds), busbw(used, in_seconds, size), in_wrong);
    printf("# Avg bus bandwidth : %g\n", (busbw(used, out_seconds, size) + busbw(used, in_seconds, size)) / 2);
    fflush(stdout);
  }
  free(hosts);
  free(send);
  free(recv);
  MPI_Finalize();
  return out_wrong == 0 && in_wrong == 0 ? 0 : 1;
}
