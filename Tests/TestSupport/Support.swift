import Netlink
