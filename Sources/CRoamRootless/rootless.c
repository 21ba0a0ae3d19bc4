#define _GNU_SOURCE
#include "CRoamRootless.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static uid_t host_uid = (uid_t)-1;
// Root's --rootless run: the host ids its contained identity (ROAM_CONTAINED_ID inside) maps to.
static uid_t contained_host_uid = (uid_t)-1;
static gid_t contained_host_gid = (gid_t)-1;

uid_t roam_rootless_host_uid(void) { return host_uid; }

static int fail(char *message, size_t size, int error, const char *format, ...) {
    if (message && size) {
        va_list arguments;
        va_start(arguments, format);
        int used = vsnprintf(message, size, format, arguments);
        va_end(arguments);
        if (used >= 0 && (size_t)used < size) snprintf(message + used, size - used, ": %s", strerror(error));
    }
    return error;
}

static long read_number(const char *path) {
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    long value = -1;
    if (fscanf(file, "%ld", &value) != 1) value = -1;
    fclose(file);
    return value;
}

static int write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t length = strlen(text);
    ssize_t written = write(fd, text, length);
    int error = written == (ssize_t)length ? 0 : (written < 0 ? errno : EIO);
    close(fd);
    return error;
}

int roam_rootless_check(char *message, size_t size) {
    if (read_number("/proc/sys/user/max_user_namespaces") == 0) {
        return fail(message, size, EPERM, "user namespaces are disabled here (sysctl user.max_user_namespaces = 0); "
                    "an administrator can allow them with `sysctl -w user.max_user_namespaces=15000`, or run roam as root");
    }
    if (read_number("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
        return fail(message, size, EPERM, "unprivileged user namespaces are disabled here (sysctl kernel.unprivileged_userns_clone = 0); "
                    "an administrator can allow them with `sysctl -w kernel.unprivileged_userns_clone=1`, or run roam as root");
    }
    if (getuid() != 0 && read_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
        return fail(message, size, EPERM, "AppArmor restricts unprivileged user namespaces here (sysctl kernel.apparmor_restrict_unprivileged_userns = 1); "
                    "an administrator can allow them for roam with an AppArmor profile granting `userns`, or run roam as root");
    }
    return 0;
}

int roam_rootless_is_inside(void) {
    FILE *file = fopen("/proc/self/uid_map", "re");
    if (!file) return 0;
    unsigned long inside = 0, outside = 0, count = 0;
    int lines = 0, initial = 0;
    while (fscanf(file, "%lu %lu %lu", &inside, &outside, &count) == 3) {
        lines++;
        if (inside == 0 && outside == 0 && count == 4294967295UL) initial = 1;
    }
    fclose(file);
    return !(lines == 1 && initial);
}

int roam_rootless_can_run_as_root(void) {
    if (geteuid() != 0) return 0;
    if (!roam_rootless_is_inside()) return 1;
    // Root of another user namespace builds named namespaces only where its mount namespace
    // is its own (to bind them under /run/netns) and its /run is one it may write: a rootless
    // container's, or a Roam rootless run's. Not after `unshare -Ur` (the host's mounts) or
    // `unshare -Urm` (the host's /run, owned by a user it does not map).
    int user = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    int mounts = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    int owner = mounts >= 0 ? ioctl(mounts, 0xb701 /* NS_GET_USERNS */) : -1;
    struct stat expected, actual;
    int owned = user >= 0 && owner >= 0 && fstat(user, &expected) == 0 && fstat(owner, &actual) == 0
        && expected.st_dev == actual.st_dev && expected.st_ino == actual.st_ino;
    if (user >= 0) close(user);
    if (mounts >= 0) close(mounts);
    if (owner >= 0) close(owner);
    return owned && faccessat(AT_FDCWD, "/run", W_OK, AT_EACCESS) == 0;
}

static unsigned long outer_id(const char *path, unsigned long id) {
    FILE *file = fopen(path, "re");
    if (!file) return (unsigned long)-1;
    unsigned long inside = 0, outside = 0, count = 0, result = (unsigned long)-1;
    while (fscanf(file, "%lu %lu %lu", &inside, &outside, &count) == 3) {
        if (id >= inside && id - inside < count) {
            result = outside + (id - inside);
            break;
        }
    }
    fclose(file);
    return result;
}

static gid_t roam_rootless_outer_gid(gid_t gid) {
    unsigned long outer = outer_id("/proc/self/gid_map", gid);
    return outer == (unsigned long)-1 ? (gid_t)-1 : (gid_t)outer;
}

uid_t roam_rootless_outer_uid(uid_t uid) {
    unsigned long outer = outer_id("/proc/self/uid_map", uid);
    return outer == (unsigned long)-1 ? (uid_t)-1 : (uid_t)outer;
}

/// Binds `name` of the host's /run (open as `directory`) back into the new /run.
static void bind_back(int directory, const char *name) {
    struct stat status;
    if (fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) != 0) return;
    char target[PATH_MAX], source[PATH_MAX];
    snprintf(target, sizeof target, "/run/%s", name);
    snprintf(source, sizeof source, "/proc/self/fd/%d/%s", directory, name);
    if (S_ISLNK(status.st_mode)) {
        char link[PATH_MAX];
        ssize_t length = readlinkat(directory, name, link, sizeof link - 1);
        if (length < 0) return;
        link[length] = 0;
        (void)symlink(link, target);
        return;
    }
    if (S_ISDIR(status.st_mode)) {
        if (mkdir(target, status.st_mode & 07777) != 0 && errno != EEXIST) return;
    } else {
        int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return;
        close(fd);
    }
    // A part of /run this process may not bind (another user's, say) stays an empty placeholder.
    (void)mount(source, target, NULL, MS_BIND | MS_REC, NULL);
}

int roam_rootless_preflight(char *message, size_t size) {
    int error = roam_rootless_check(message, size);
    if (error) return error;
    uid_t uid = geteuid();
    // Inside a user namespace that maps no id to this process (`unshare -U` without
    // --map-root-user), its uid shows as the overflow uid, which cannot be mapped again.
    if (roam_rootless_is_inside() && (roam_rootless_outer_uid(uid) == (uid_t)-1 || roam_rootless_outer_gid(getegid()) == (gid_t)-1)) {
        return fail(message, size, EPERM, "this process runs in a user namespace that maps no user or group id to it (its uid shows as %u, "
                    "as after `unshare -U` without --map-root-user), so it cannot map one into a namespace of its own; "
                    "start it with `unshare -U --map-root-user` (or with a mapping such as a rootless container's), or outside",
                    (unsigned)uid);
    }
    return 0;
}

/// The first id of `name`'s subordinate range in `path` (/etc/subuid, /etc/subgid: `name:first:count`
/// or `uid:first:count` lines), or -1 when it has none. Read by root from a root-owned file.
static long subordinate_id(const char *path, const char *name, unsigned long id) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat status;
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_uid != 0 || (status.st_mode & 022) != 0) {
        close(fd);
        return -1;
    }
    FILE *file = fdopen(fd, "re");
    if (!file) {
        close(fd);
        return -1;
    }
    char line[256], number[32];
    long result = -1;
    snprintf(number, sizeof number, "%lu", id);
    while (fgets(line, sizeof line, file)) {
        char *first = strchr(line, ':');
        if (!first) continue;
        *first++ = 0;
        if (strcmp(line, name) != 0 && strcmp(line, number) != 0) continue;
        char *end = NULL;
        unsigned long start = strtoul(first, &end, 10);
        if (end == first || *end != ':') continue;
        unsigned long count = strtoul(end + 1, NULL, 10);
        // A range of at least ROAM_CONTAINED_ID + 1 ids would let Roam map more; one is enough.
        if (start > 0 && start < 4294967295UL && count >= 1) {
            result = (long)start;
            break;
        }
    }
    fclose(file);
    return result;
}

/// Writes the maps of `target`'s new user namespace from a process still in the initial one
/// (what newuidmap does for rootless containers): root as itself, ROAM_CONTAINED_ID as an
/// unprivileged host id. Returns 0 or an errno.
static int write_contained_maps(pid_t target, uid_t uid, gid_t gid) {
    char path[64], map[96];
    int error;
    snprintf(map, sizeof map, "0 0 1\n%u %u 1\n", (unsigned)ROAM_CONTAINED_ID, (unsigned)uid);
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)target);
    if ((error = write_text(path, map)) != 0) return error;
    snprintf(map, sizeof map, "0 0 1\n%u %u 1\n", (unsigned)ROAM_CONTAINED_ID, (unsigned)gid);
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)target);
    return write_text(path, map);
}

/// Root's --rootless: unshare, with a child left in the initial user namespace writing the maps.
static int enter_mounts(char *message, size_t size);

static int enter_contained(char *message, size_t size) {
    long uid = subordinate_id("/etc/subuid", "root", 0), gid = subordinate_id("/etc/subgid", "root", 0);
    uid_t host_contained_uid = uid > 0 ? (uid_t)uid : (uid_t)ROAM_CONTAINED_ID;
    gid_t host_contained_gid = gid > 0 ? (gid_t)gid : (gid_t)ROAM_CONTAINED_ID;
    int go[2], answer[2];
    if (pipe2(go, O_CLOEXEC) != 0) return fail(message, size, errno, "make a pipe");
    if (pipe2(answer, O_CLOEXEC) != 0) {
        int error = errno;
        close(go[0]);
        close(go[1]);
        return fail(message, size, error, "make a pipe");
    }
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(go[0]); close(go[1]); close(answer[0]); close(answer[1]);
        return fail(message, size, error, "fork the helper that writes the user namespace's maps");
    }
    if (child == 0) {
        close(go[1]);
        close(answer[0]);
        char byte;
        int error = EPIPE;
        if (read(go[0], &byte, 1) == 1) error = write_contained_maps(parent, host_contained_uid, host_contained_gid);
        (void)!write(answer[1], &error, sizeof error);
        _exit(0);
    }
    close(go[0]);
    close(answer[1]);
    int error = 0;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        error = errno;
        close(go[1]);
    } else {
        char byte = 1;
        if (write(go[1], &byte, 1) != 1) error = errno;
        close(go[1]);
        int written = EPIPE;
        if (!error && read(answer[0], &written, sizeof written) != (ssize_t)sizeof written) written = EPIPE;
        if (!error) error = written;
        if (error) {
            close(answer[0]);
            while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
            return fail(message, size, error, "write the user namespace's maps (root as itself, %u as uid %u and gid %u of the host)",
                        (unsigned)ROAM_CONTAINED_ID, (unsigned)host_contained_uid, (unsigned)host_contained_gid);
        }
    }
    close(answer[0]);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    if (error) {
        if (error == EINVAL) return fail(message, size, error, "cannot enter a user namespace: the process already runs several threads");
        return fail(message, size, error, "unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    }
    host_uid = 0;
    contained_host_uid = host_contained_uid;
    contained_host_gid = host_contained_gid;
    return 0;
}

int roam_rootless_contained(uid_t *host_uid_out, gid_t *host_gid_out) {
    if (contained_host_uid == (uid_t)-1) return 0;
    if (host_uid_out) *host_uid_out = contained_host_uid;
    if (host_gid_out) *host_gid_out = contained_host_gid;
    return 1;
}

static int capability_kept(int capability) {
    return capability == CAP_NET_ADMIN || capability == CAP_NET_RAW || capability == CAP_NET_BIND_SERVICE;
}

static void report_and_exit(int channel, int error) {
    (void)!write(channel, &error, sizeof error);
    _exit(127);
}

int roam_rootless_spawn_contained(const char *file, char *const argv[], char *const envp[], int output, int errors, int new_group,
                                  const int *from, const int *to, int count, pid_t *pid) {
    if (contained_host_uid == (uid_t)-1) return EPERM;
    int channel[2];
    if (pipe2(channel, O_CLOEXEC) != 0) return errno;
    // Everything the child needs is ready before fork: after it, only async-signal-safe calls.
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(channel[0]);
        close(channel[1]);
        return error;
    }
    if (child == 0) {
        close(channel[0]);
        sigset_t none;
        sigemptyset(&none);
        struct sigaction standard;
        memset(&standard, 0, sizeof standard);
        standard.sa_handler = SIG_DFL;
        int defaults[] = {SIGINT, SIGTERM, SIGPIPE, SIGHUP};
        for (size_t index = 0; index < sizeof defaults / sizeof defaults[0]; index++) sigaction(defaults[index], &standard, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (new_group && setpgid(0, 0) != 0) report_and_exit(channel[1], errno);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0) report_and_exit(channel[1], errno);
        if (dup2(null, 0) < 0 || dup2(output, 1) < 0 || dup2(errors, 2) < 0) report_and_exit(channel[1], errno);
        for (int index = 0; index < count; index++) {
            if (dup2(from[index], to[index]) < 0) report_and_exit(channel[1], errno);
        }
        // No capability past the network's three, in this process or any program it runs.
        for (int capability = 0; capability <= 63; capability++) {
            if (capability_kept(capability)) continue;
            if (prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 && errno == EINVAL) break;
        }
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) report_and_exit(channel[1], errno);
        if (setgroups(0, NULL) != 0) report_and_exit(channel[1], errno);
        if (setresgid(ROAM_CONTAINED_ID, ROAM_CONTAINED_ID, ROAM_CONTAINED_ID) != 0) report_and_exit(channel[1], errno);
        if (setresuid(ROAM_CONTAINED_ID, ROAM_CONTAINED_ID, ROAM_CONTAINED_ID) != 0) report_and_exit(channel[1], errno);
        struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        unsigned kept = (1u << CAP_NET_ADMIN) | (1u << CAP_NET_RAW) | (1u << CAP_NET_BIND_SERVICE);
        data[0].effective = data[0].permitted = data[0].inheritable = kept;
        if (syscall(SYS_capset, &header, data) != 0) report_and_exit(channel[1], errno);
        int ambient[] = {CAP_NET_ADMIN, CAP_NET_RAW, CAP_NET_BIND_SERVICE};
        for (size_t index = 0; index < 3; index++) {
            if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, ambient[index], 0, 0) != 0) report_and_exit(channel[1], errno);
        }
        // A set-user-ID program of the host's root would make it root of the namespace again,
        // which is the host's root on files: no program it runs gains anything.
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) report_and_exit(channel[1], errno);
        execvpe(file, argv, envp);
        report_and_exit(channel[1], errno);
    }
    close(channel[1]);
    int error = 0;
    ssize_t got;
    while ((got = read(channel[0], &error, sizeof error)) < 0 && errno == EINTR) {}
    close(channel[0]);
    if (got == (ssize_t)sizeof error) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return error ? error : EIO;
    }
    *pid = child;
    return 0;
}

int roam_rootless_enter(char *message, size_t size) {
    int error = roam_rootless_preflight(message, size);
    if (error) return error;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (uid == 0 && !roam_rootless_is_inside()) {
        // Root's --rootless run: its command workloads run as an unprivileged identity.
        if ((error = enter_contained(message, size)) != 0) return error;
        return enter_mounts(message, size);
    }
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        error = errno;
        if (error == EINVAL) return fail(message, size, error, "cannot enter a user namespace: the process already runs several threads");
        if (error == EPERM || error == ENOSPC || error == EUSERS) {
            return fail(message, size, error, "cannot create a user namespace (a container's seccomp profile or a limit may forbid it; "
                        "user.max_user_namespaces, kernel.unprivileged_userns_clone); run roam as root instead");
        }
        return fail(message, size, error, "unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    }
    char map[64];
    if ((error = write_text("/proc/self/setgroups", "deny")) != 0 && error != ENOENT) {
        return fail(message, size, error, "write /proc/self/setgroups");
    }
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
    if ((error = write_text("/proc/self/uid_map", map)) != 0) return fail(message, size, error, "write /proc/self/uid_map");
    host_uid = uid;
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
    if ((error = write_text("/proc/self/gid_map", map)) != 0) return fail(message, size, error, "write /proc/self/gid_map");
    return enter_mounts(message, size);
}

/// The mount namespace part of entering: private mounts, a /run of the process's own.
static int enter_mounts(char *message, size_t size) {
    int error;
    // Nothing mounted from here on propagates to the host.
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return fail(message, size, errno, "make the mounts private");
    int host = open("/run", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (host < 0) return fail(message, size, errno, "open /run");
    if (mount("roam-run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0) {
        error = errno;
        close(host);
        return fail(message, size, error, "mount a private /run");
    }
    int listing = fcntl(host, F_DUPFD_CLOEXEC, 0);
    DIR *entries = listing >= 0 ? fdopendir(listing) : NULL;
    if (entries) {
        struct dirent *entry;
        while ((entry = readdir(entries)) != NULL) {
            const char *name = entry->d_name;
            if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "netns") || !strcmp(name, "roam")) continue;
            bind_back(host, name);
        }
        closedir(entries);
    } else if (listing >= 0) {
        close(listing);
    }
    close(host);
    if (mkdir("/run/netns", 0755) != 0 && errno != EEXIST) return fail(message, size, errno, "create /run/netns");
    if (mkdir("/run/roam", 0755) != 0 && errno != EEXIST) return fail(message, size, errno, "create /run/roam");

    return 0;
}
