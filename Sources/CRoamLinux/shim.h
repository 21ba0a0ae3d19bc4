#ifndef ROAM_CROAMLINUX_SHIM_H
#define ROAM_CROAMLINUX_SHIM_H

// The Linux interfaces Roam uses beyond what Swift's Glibc module declares: event and inotify
// descriptors, ppoll and epoll, namespaces and mounts, MPTCP and TCP socket options, posix_spawn, TUN,
// recvmmsg.
// No code lives here but constants Swift cannot import and one-line system call wrappers: see
// Sources/RoamSystem.
// libnl (rtnetlink, generic netlink) is CNetlink's, and only Netlink imports it.

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sched.h>
// After glibc's netinet/in.h, so that linux/libc-compat.h leaves its structs alone.
#include <linux/mptcp.h>

#include <errno.h>
#include <string.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>

// The owner (uid) of the TCP socket of this network namespace whose own end is `local`:`localPort`
// and whose peer is `remote`:`remotePort` (4 or 16 bytes each, by `family`), asked of the kernel
// through sock_diag on `fd` (a NETLINK_SOCK_DIAG socket): 0 with *uid set, or -errno (-ENOENT
// when there is no such socket). The uid is as the user namespace of whoever opened `fd` sees it.
static inline int roam_tcp_socket_owner(int fd, int family, const unsigned char *local, unsigned short localPort,
                                        const unsigned char *remote, unsigned short remotePort, unsigned int *uid) {
    struct { struct nlmsghdr header; struct inet_diag_req_v2 request; } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = (unsigned char)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_sport = htons(localPort);
    message.request.id.idiag_dport = htons(remotePort);
    memcpy(message.request.id.idiag_src, local, family == AF_INET ? 4 : 16);
    memcpy(message.request.id.idiag_dst, remote, family == AF_INET ? 4 : 16);
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (send(fd, &message, sizeof message, 0) < 0) return -errno;
    union { struct nlmsghdr header; char bytes[8192]; } reply;
    ssize_t count = recv(fd, &reply, sizeof reply, 0);
    if (count < 0) return -errno;
    struct nlmsghdr *header = &reply.header;
    if (!NLMSG_OK(header, (unsigned int)count)) return -EBADMSG;
    if (header->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *error = (struct nlmsgerr *)NLMSG_DATA(header);
        return error->error ? error->error : -ENOENT;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) return -EBADMSG;
    *uid = ((struct inet_diag_msg *)NLMSG_DATA(header))->idiag_uid;
    return 0;
}

// glibc declares these only under _GNU_SOURCE, which a Swift module cannot set for Glibc.
extern int setns(int fd, int nstype);
extern int unshare(int flags);
extern int pthread_setname_np(pthread_t thread, const char *name);
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);
extern int pipe2(int fds[2], int flags);

// SO_PEERCRED's value (struct ucred is declared only under _GNU_SOURCE): a control API's peer.
struct roam_ucred { pid_t pid; uid_t uid; gid_t gid; };

// Paths opened without following links, and processes pinned before they are trusted
// (Sources/RoamSystem/SafePath). O_PATH is a GNU extension Glibc's module leaves out.
static const int ROAM_O_PATH = 010000000;
// From linux/nsfs.h: _IO(0xb7, 1) and _IO(0xb7, 4), function-like macros Swift does not import.
static const unsigned long ROAM_NS_GET_USERNS = 0xb701UL;
static const unsigned long ROAM_NS_GET_OWNER_UID = 0xb704UL;
// _IO(0xb7, 3): the kind of namespace a namespace file is (CLONE_NEWNET, ...).
static const unsigned long ROAM_NS_GET_NSTYPE = 0xb703UL;
// The filesystem a descriptor is on (statfs's f_type: NSFS_MAGIC for a namespace file), or -1.
static inline long roam_filesystem_type(int fd) { struct statfs s; return fstatfs(fd, &s) == 0 ? (long)s.f_type : -1; }
// pidfd_open(2) and pidfd_send_signal(2) by number: glibc 2.36 has wrappers, older ones do not.
// A file in memory (MFD_CLOEXEC): a network's resolv.conf, a daemon's configuration.
static inline int roam_memfd_create(const char *name) { return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */); }

// In the calling thread alone: a mount namespace of its own whose mounts do not reach the
// host's (slave), with the file at `source` bound over `target` (a node's /etc/resolv.conf). The
// source is named by path: a descriptor opened before the unshare belongs to the old namespace's
// mount, which the kernel refuses to bind from.
static inline int roam_bind_over(const char *source, const char *target) {
    if (unshare(CLONE_FS | CLONE_NEWNS) != 0) return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) return -1;
    return mount(source, target, NULL, MS_BIND, NULL);
}

// Returns to the kernel the memory malloc holds free in every arena (glibc; 1 if any was).
static inline int roam_malloc_trim(void) { return malloc_trim(0); }
// Every thread's allocations from the main arena (glibc; 1 if set).
static inline int roam_malloc_one_arena(void) { return mallopt(M_ARENA_MAX, 1); }
static inline int roam_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

// recvmmsg(2) without waiting, into `count` (at most 16) rooms of `room` bytes laid end to end
// at `buffer`: how many datagrams it read, each one's length in `lengths` (-1 for one longer than
// its room, MSG_TRUNC), or -1 with errno. By number, with mmsghdr's layout: glibc declares both
// only under _GNU_SOURCE, which Swift's Glibc module is not built with.
struct roam_mmsghdr { struct msghdr msg_hdr; unsigned int msg_len; };
static inline int roam_receive_datagrams(int fd, void *buffer, unsigned int count, size_t room, long *lengths) {
    struct roam_mmsghdr messages[16];
    struct iovec vectors[16];
    if (count > 16) count = 16;
    memset(messages, 0, sizeof messages);
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = (char *)buffer + i * room;
        vectors[i].iov_len = room;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    int received = (int)syscall(SYS_recvmmsg, fd, messages, count, MSG_DONTWAIT, NULL);
    for (int i = 0; i < received; i++) {
        lengths[i] = (messages[i].msg_hdr.msg_flags & MSG_TRUNC) ? -1 : (long)messages[i].msg_len;
    }
    return received;
}
static inline int roam_pidfd_send_signal(int pidfd, int signal) { return (int)syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0); }

// From linux/if_tun.h, whose ioctl numbers are function-like macros Swift does not import.
static const unsigned long ROAM_TUNSETIFF = 0x400454caUL;      // _IOW('T', 202, int)
static const unsigned long ROAM_TUNSETCARRIER = 0x400454e2UL;  // _IOW('T', 226, int)
static const short ROAM_IFF_TUN = 0x0001;
static const short ROAM_IFF_NO_PI = 0x1000;
static const short ROAM_IFF_VNET_HDR = 0x4000;
// An ioctl whose argument is a value, not a pointer (TUNSETOFFLOAD): Swift does not import the
// variadic ioctl for integers.
static inline int roam_ioctl_value(int fd, unsigned long request, unsigned long value) { return ioctl(fd, request, value); }
static const unsigned long ROAM_TUNSETOFFLOAD = 0x400454d0UL;  // _IOW('T', 208, unsigned int)
static const unsigned int ROAM_TUN_F_CSUM = 0x01;
static const unsigned int ROAM_TUN_F_TSO4 = 0x02;
static const unsigned int ROAM_TUN_F_TSO6 = 0x04;
static const unsigned int ROAM_TUN_F_TSO_ECN = 0x08;
static const unsigned int ROAM_TUN_F_USO4 = 0x20;
static const unsigned int ROAM_TUN_F_USO6 = 0x40;

#endif
