/* A program that carries no seqpoint provider and maps no configured library: attaching to it
 * must fail with a clear NotFound. Prints "ready <pid>" and waits for a line on stdin. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
  char line[64];
  printf("ready %d\n", getpid());
  fflush(stdout);
  return fgets(line, sizeof(line), stdin) ? 0 : 1;
}
