#ifndef ROAM_CNETLINK_SHIM_H
#define ROAM_CNETLINK_SHIM_H

// The libnl-3 headers Roam uses, plus the kernel UAPI headers whose constants
// the Swift layer needs. No code lives here: see Sources/Netlink.

#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/msg.h>
#include <netlink/attr.h>
#include <netlink/cache.h>
#include <netlink/object.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/route/rtnl.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/route/tc.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/netem.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/genl/genl.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/family.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/net_namespace.h>
#include <linux/fib_rules.h>
#include <linux/pkt_sched.h>
#include <linux/sched.h>
#include <sys/mount.h>
#include <pthread.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <signal.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
// After glibc's netinet/in.h, so that linux/libc-compat.h leaves its structs alone.
#include <linux/mptcp.h>
#include <linux/nl80211.h>

// glibc declares these only under _GNU_SOURCE, which a Swift module cannot set for Glibc.
extern int setns(int fd, int nstype);
extern int unshare(int flags);
extern int pthread_setname_np(pthread_t thread, const char *name);
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);

#endif
