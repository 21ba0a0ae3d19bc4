"""The path of this host from roam daemon, over D-Bus with dbus-next (asyncio): the current
path, then a line for every change as it comes (docs/daemon.md).

    python3 roam_path.py            # the system bus (roam.service)
    python3 roam_path.py --user     # a user's roam daemon --dbus session

Each line: `path SEQUENCE RECEIVED STATUS PRIMARY EXPENSIVE JSON`, as Examples/PathBus/roam-path.c
prints it.
"""
import asyncio
import sys
import time

from dbus_next import BusType
from dbus_next.aio import MessageBus

SERVICE = "org.roam.PathMonitor1"
OBJECT = "/org/roam/PathMonitor1"


async def main() -> None:
    bus_type = BusType.SESSION if "--user" in sys.argv[1:] else BusType.SYSTEM
    bus = await MessageBus(bus_type=bus_type).connect()
    introspection = await bus.introspect(SERVICE, OBJECT)
    monitor = bus.get_proxy_object(SERVICE, OBJECT, introspection).get_interface(SERVICE)

    def changed(sequence: int, path: str) -> None:
        received = time.time()

        async def line() -> None:
            status = await monitor.get_status()
            primary = await monitor.get_primary_interface()
            expensive = await monitor.get_is_expensive()
            print(f"path {sequence} {received:.6f} {status} {primary or '-'} {'expensive' if expensive else '-'} {path}", flush=True)

        asyncio.ensure_future(line())

    # Subscribe first, then read: a change between the two is not lost.
    monitor.on_path_changed(changed)
    print(f"current {await monitor.get_sequence()} {await monitor.get_path()}", flush=True)
    await bus.wait_for_disconnect()


if __name__ == "__main__":
    asyncio.run(main())
