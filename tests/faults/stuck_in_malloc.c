/* A C rank inside malloc (tests/test_faults.cpp, tests/test_hang_autopsy.cpp).
 *   hang: its main thread waits inside malloc for the heap's lock, which a helper thread holds while
 *     malloc_stats() writes to a pipe that nobody reads. Asked for its stack, it must answer with its
 *     own frames (malloc, allocate_here) instead of waiting for that lock itself. Prints "ready" just
 *     before that malloc.
 *   crash: it overwrites the size of the heap's top chunk and allocates again: malloc sees the
 *     corruption and aborts with the heap's lock held. Its stack must still come. */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile pid_t helper_tid;

static void *print_stats(void *arg) {
  (void)arg;
  helper_tid = (pid_t)syscall(SYS_gettid);
  malloc_stats(); /* holds the main heap's lock while it writes to stderr */
  return NULL;
}

static void *idle(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

static void *__attribute__((noinline)) allocate_here(size_t size) {
  void *p = malloc(size);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

/* Whether thread `tid` of this process is inside write(2), by /proc (no stdio: no malloc). */
static int in_write(pid_t tid) {
  char path[64], text[32];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  return atoi(text) == SYS_write;
}

static int hang(void) {
  int full[2];
  if (pipe(full) != 0 || fcntl(full[1], F_SETFL, O_NONBLOCK) != 0) return 1;
  static char block[4096];
  while (write(full[1], block, sizeof block) > 0) {
  }
  while (write(full[1], block, 1) > 0) {
  }
  if (fcntl(full[1], F_SETFL, 0) != 0) return 1;
  const int saved = dup(2);
  if (saved < 0 || dup2(full[1], 2) < 0) return 1;
  pthread_t helper;
  if (pthread_create(&helper, NULL, print_stats, NULL) != 0) return 1;
  while (helper_tid == 0 || !in_write(helper_tid)) usleep(1000);
  if (dup2(saved, 2) < 0) return 1; /* the helper's write keeps the full pipe */
  if (write(1, "ready\n", 6) != 6) return 1;
  allocate_here(64 * 1024);
  return 0;
}

static int crash(void) {
  pthread_t helper; /* a second thread: malloc now takes the heap's lock */
  if (pthread_create(&helper, NULL, idle, NULL) != 0) return 1;
  char *p = allocate_here(0x3f0);
  /* p's chunk is 0x400 bytes from p - 0x10: the top chunk's size field follows at p + 0x3f8. */
  memset(p + 0x3f8, 0xff, sizeof(size_t));
  allocate_here(0x5000);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "hang") == 0) return hang();
  if (argc == 2 && strcmp(argv[1], "crash") == 0) return crash();
  fprintf(stderr, "usage: %s hang|crash\n", argv[0]);
  return 2;
}
