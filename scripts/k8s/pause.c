/* The pod sandbox's process: holds the pod's namespaces, reaps orphans, exits on
 * SIGINT/SIGTERM.  The registry's pause image cannot be pulled here, so the local
 * cluster builds this one (scripts/k8s/images.sh). */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) {
        pause();
    }
}
