// IPAddress, IPPrefix, AddressFamily and OperationalState live in RoamCore (the value types the
// decisions share without libnl); `import Netlink` keeps bringing them.
@_exported import RoamCore
