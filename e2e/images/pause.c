/* The pod sandbox's one process: holds the pod's namespaces open, reaps the orphans it
 * inherits as PID 1, and exits at once on SIGINT or SIGTERM so a pod stops without waiting
 * for a kill. Built static by e2e/images.sh; nothing else is in the pause image. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction term = {.sa_handler = stop}, child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0)
    return 1;
  for (;;) pause();
}
