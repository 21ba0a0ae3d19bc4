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
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static uid_t host_uid = (uid_t)-1;

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

int roam_rootless_enter(char *message, size_t size) {
    int error = roam_rootless_preflight(message, size);
    if (error) return error;
    uid_t uid = geteuid();
    gid_t gid = getegid();
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
