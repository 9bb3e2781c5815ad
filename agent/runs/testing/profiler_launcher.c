/* A profiler's launcher for the back-off tests: runs argv[1..] as its child and waits, as nsys,
 * ncu and rocprofv3 do. The tests call it through a symlink named after the profiler, so its
 * command name is "nsys". */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  pid_t child = fork();
  if (child == 0) {
    execv(argv[1], argv + 1);
    perror("execv");
    _exit(127);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) < 0) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
