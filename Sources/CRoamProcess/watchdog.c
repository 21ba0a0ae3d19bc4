#define _GNU_SOURCE
#include "CRoamProcess.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

// Between fork and _exit: only async-signal-safe calls (read, kill, close, _exit, prctl).
static void watch(int input) {
    pid_t groups[ROAM_WATCHDOG_GROUPS];
    int count = 0;
    for (;;) {
        int32_t record;
        ssize_t got = read(input, &record, sizeof record);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)sizeof record) break;
        if (record > 0) {
            if (count < ROAM_WATCHDOG_GROUPS) groups[count++] = record;
        } else if (record < 0) {
            for (int index = 0; index < count; index++) {
                if (groups[index] == -record) {
                    groups[index] = groups[--count];
                    break;
                }
            }
        }
    }
    for (int index = 0; index < count; index++) kill(-groups[index], SIGKILL);
    _exit(0);
}

int roam_watchdog_start(int *writer, pid_t *watchdog) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    sigset_t all, previous;
    sigfillset(&all);
    // Blocked across fork, so that no handler of the parent's runs in the child.
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t pid = fork();
    if (pid == 0) {
        int input = fds[0];
        // Hold nothing of the run open but the pipe's read end.
        if (input > 0) syscall(SYS_close_range, 0, (unsigned)input - 1, 0);
        syscall(SYS_close_range, (unsigned)input + 1, ~0U, 0);
        prctl(PR_SET_NAME, "roam-watchdog", 0, 0, 0);
        watch(input);
    }
    int error = pid < 0 ? errno : 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    close(fds[0]);
    if (pid < 0) {
        close(fds[1]);
        return error;
    }
    *writer = fds[1];
    *watchdog = pid;
    return 0;
}
