/* Issue 40's MPI case (tests/test_mpi_lab.cpp): MPI_Allreduce as a training step does it, the program
 * knowing nothing of hvrun. Each step, rank SLOW (-1: none) computes 0.2 s more than the others, then
 * every rank all-reduces 4 MiB; the others wait in MPI_Allreduce, where Open MPI polls on a CPU. Runs
 * until rank 0 has run SECONDS (all ranks agree each step through a one-element allreduce) and ends with
 * "mpi done rank=R steps=N".
 *   mpi_steps SECONDS SLOW */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double seconds = argc > 1 ? atof(argv[1]) : 10;
  const int slow = argc > 2 ? atoi(argv[2]) : -1;
  enum { kCount = 1 << 19 };
  double* grads = malloc(sizeof(double) * kCount);
  double* sums = malloc(sizeof(double) * kCount);
  for (int i = 0; i < kCount; ++i) grads[i] = 1;
  const double began = now();
  int steps = 0, go_on = 1;
  volatile double sink = 0;
  while (go_on) {
    if (rank == slow)
      for (const double until = now() + 0.2; now() < until;) sink += 1;
    MPI_Allreduce(grads, sums, kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    ++steps;
    int mine = now() - began < seconds, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    go_on = all;
  }
  printf("mpi done rank=%d steps=%d\n", rank, steps);
  free(grads);
  free(sums);
  MPI_Finalize();
  return 0;
}
