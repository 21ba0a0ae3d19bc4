#ifndef ROAM_CROAMROOTLESS_H
#define ROAM_CROAMROOTLESS_H

#include <stddef.h>
#include <sys/types.h>

// Rootless Roam: the calling process becomes root of a user namespace of its own, with a mount
// namespace owned by it. It stays in the host's network namespace, which it can read but not
// change (its capabilities hold only over namespaces its user namespace owns); the network
// namespaces it creates are its own. Roam then builds scenarios as it would as root, and nothing
// it does can reach the host's network: its namespaces end with the process.
//
// In C because it must run while the process has one thread (unshare(CLONE_NEWUSER) refuses a
// multithreaded process): at the start of `roam`'s main, or from a constructor before main
// (RoamTesting's). Swift reaches it through RoamSystem's `Rootless`.

// Enters: unshare(CLONE_NEWUSER | CLONE_NEWNS); maps the caller's uid and gid to root (setgroups
// denied); makes every mount private; puts a tmpfs on /run with the host's entries bound back
// into it and empty netns/ and roam/ directories of its own. Returns 0, or an errno with
// `message` saying what failed and what to do (a disabled setting is named).
int roam_rootless_enter(char *message, size_t size);

// What roam_rootless_enter checks before it changes anything: the kernel's settings (below) and
// a uid that can be mapped. 0, or an errno with `message` saying what to do.
int roam_rootless_preflight(char *message, size_t size);

// Why an unprivileged user namespace cannot be made here, from the kernel's settings
// (user.max_user_namespaces, kernel.unprivileged_userns_clone,
// kernel.apparmor_restrict_unprivileged_userns); 0 when nothing forbids it.
int roam_rootless_check(char *message, size_t size);

// Root's --rootless run (uid 0 of the initial user namespace entering): the namespace maps root
// to root, as a user's run maps its user, and ROAM_CONTAINED_ID to an unprivileged id of the host
// (the first of root's range in /etc/subuid and /etc/subgid, else 65534, nobody), the maps written
// by a child left in the initial user namespace. Command workloads run as ROAM_CONTAINED_ID, so
// that the host's files are as far from them as from a user's run.
#define ROAM_CONTAINED_ID 65534

// 1, with the host ids ROAM_CONTAINED_ID maps to, when this process entered as root's --rootless
// run; 0 otherwise.
int roam_rootless_contained(uid_t *host_uid, gid_t *host_gid);

// Starts `file` (looked up in PATH) with `argv` and `envp` as ROAM_CONTAINED_ID (uid and gid, no
// supplementary groups), keeping only CAP_NET_ADMIN, CAP_NET_RAW and CAP_NET_BIND_SERVICE of the
// run's user namespace (ambient, so that the programs it runs keep them: they hold over the run's
// network namespaces alone) with no_new_privs set: standard input /dev/null, `output` and
// `errors` on 1 and 2, `from[i]` on `to[i]`, every signal unblocked and SIGINT, SIGTERM, SIGPIPE
// and SIGHUP at their defaults, in a new process group when `new_group`. Returns 0 with `pid`
// set once the program runs, or the errno that stopped it (ENOENT, EACCES, ...). EPERM when the
// process did not enter as root's --rootless run.
int roam_rootless_spawn_contained(const char *file, char *const argv[], char *const envp[], int output, int errors, int new_group,
                                  const int *from, const int *to, int count, pid_t *pid);

// The caller's uid on the host, once roam_rootless_enter succeeded; (uid_t)-1 before.
uid_t roam_rootless_host_uid(void);

// The uid that `uid` of this process's user namespace maps to in the parent namespace
// (/proc/self/uid_map); (uid_t)-1 when it maps to none.
uid_t roam_rootless_outer_uid(uid_t uid);

// 1 when the process can build named network namespaces as root does: uid 0 of the host, or
// uid 0 of a user namespace that owns the process's mount namespace and whose /run it may write
// (a rootless container, a Roam rootless run). 0 otherwise: Roam then runs rootless, in a user
// namespace of its own (nested in the current one).
int roam_rootless_can_run_as_root(void);

// 1 when the process is in a user namespace other than the initial one.
int roam_rootless_is_inside(void);

#endif
