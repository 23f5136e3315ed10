/* The --mpi lab test's program: an MPI_Allreduce across every rank, checked on every rank.
 * Prints "mpi rank R of N on HOST: sum S ok" (S = 1 + 2 + ... + N) and exits 0, or exits 1 on a
 * wrong sum. With an argument K, rank K exits with code 3 after the allreduce instead. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, len = 0;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long expected = (long)size * (size + 1) / 2;
  printf("mpi rank %d of %d on %s: sum %ld %s\n", rank, size, host, sum, sum == expected ? "ok" : "WRONG");
  fflush(stdout);
  if (argc > 1 && atoi(argv[1]) == rank) exit(3);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return sum == expected ? 0 : 1;
}
