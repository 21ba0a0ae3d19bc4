#ifndef ROAM_CROAMPROCESS_H
#define ROAM_CROAMPROCESS_H

#include <sys/types.h>

// A run's watchdog: a small child process that outlives a `roam run` killed without warning (the
// OOM killer, SIGKILL) and kills the process groups of the run's commands, which would otherwise
// live on in the run's namespaces. In C because it runs between fork and _exit, where only
// async-signal-safe calls are allowed in a multithreaded process. Swift reaches it through
// RoamSystem's `ProcessGroupWatchdog`.
//
// roam_watchdog_start forks it and returns the write end of a pipe (close-on-exec) in `*writer`
// and its pid in `*watchdog`. Each 4-byte record written (host byte order) is a process group: a
// positive id to watch, the negated id to forget. When the pipe reaches end of file (every write
// end closed: the run ended, however it ended), the watchdog sends SIGKILL to every group it
// still watches and exits. It blocks every signal it can, so that a terminal's Ctrl-C to the
// foreground group reaches roam, which stops the run itself. Returns 0 or an errno.
int roam_watchdog_start(int *writer, pid_t *watchdog);

// The most groups one watchdog watches at once; a group past that is killed at once by the
// caller's choice (see ProcessGroupWatchdog).
enum { ROAM_WATCHDOG_GROUPS = 4096 };

#endif
