#ifndef ROAM_CNETLINK_SHIM_H
#define ROAM_CNETLINK_SHIM_H

// The libnl-3 headers Roam uses, plus the rtnetlink and generic-netlink UAPI headers whose
// constants the Swift layer needs. No code lives here: see Sources/Netlink. Only Netlink imports
// this module; the rest of Linux that Roam uses is CRoamLinux's.

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
#include <netlink/route/qdisc/prio.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
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
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/nl80211.h>

#endif
