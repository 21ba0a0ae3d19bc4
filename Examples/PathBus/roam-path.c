// The path of this host from roam daemon, over D-Bus with systemd's sd-bus: the current path,
// then a line for every change as it comes (docs/daemon.md). A program in C that needs to know
// whether the network is expensive, a portal or gone reads it like this.
//
//   cc roam-path.c $(pkg-config --cflags --libs libsystemd) -o roam-path
//   ./roam-path            # the system bus (roam.service)
//   ./roam-path --user     # a user's roam daemon --dbus session
//
// Each line: `path SEQUENCE RECEIVED STATUS PRIMARY EXPENSIVE JSON`, RECEIVED the wall clock
// (Unix seconds) when the signal arrived, JSON the path as GET /v1/path answers it.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#define SERVICE "org.roam.PathMonitor1"
#define OBJECT "/org/roam/PathMonitor1"

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_REALTIME, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

// PathChanged(t sequence, s path) carries the whole path; the properties hold the same values
// one by one, read here once the signal says they changed.
static int on_path_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    sd_bus *bus = userdata;
    double received = now();
    uint64_t sequence;
    const char *json;
    int r = sd_bus_message_read(message, "ts", &sequence, &json);
    if (r < 0) {
        fprintf(stderr, "roam-path: PathChanged: %s\n", strerror(-r));
        return 0;
    }
    char *status = NULL, *primary = NULL;
    int expensive = 0;
    sd_bus_error failure = SD_BUS_ERROR_NULL;
    if (sd_bus_get_property_string(bus, SERVICE, OBJECT, SERVICE, "Status", &failure, &status) < 0 ||
        sd_bus_get_property_string(bus, SERVICE, OBJECT, SERVICE, "PrimaryInterface", &failure, &primary) < 0 ||
        sd_bus_get_property_trivial(bus, SERVICE, OBJECT, SERVICE, "IsExpensive", &failure, 'b', &expensive) < 0) {
        fprintf(stderr, "roam-path: %s: %s\n", failure.name, failure.message);
    }
    printf("path %" PRIu64 " %.6f %s %s %s %s\n", sequence, received, status ? status : "?",
           primary && *primary ? primary : "-", expensive ? "expensive" : "-", json);
    fflush(stdout);
    sd_bus_error_free(&failure);
    free(status);
    free(primary);
    return 0;
}

int main(int argc, char *argv[]) {
    int user = argc > 1 && strcmp(argv[1], "--user") == 0;
    sd_bus *bus = NULL;
    int r = user ? sd_bus_open_user(&bus) : sd_bus_open_system(&bus);
    if (r < 0) {
        fprintf(stderr, "roam-path: cannot connect to the %s bus: %s\n", user ? "session" : "system", strerror(-r));
        return 1;
    }
    // Subscribe first, then read: a change between the two is not lost.
    r = sd_bus_match_signal(bus, NULL, SERVICE, OBJECT, SERVICE, "PathChanged", on_path_changed, bus);
    if (r < 0) {
        fprintf(stderr, "roam-path: cannot subscribe: %s\n", strerror(-r));
        return 1;
    }
    sd_bus_error failure = SD_BUS_ERROR_NULL;
    char *json = NULL;
    uint64_t sequence = 0;
    if (sd_bus_get_property_trivial(bus, SERVICE, OBJECT, SERVICE, "Sequence", &failure, 't', &sequence) < 0 ||
        sd_bus_get_property_string(bus, SERVICE, OBJECT, SERVICE, "Path", &failure, &json) < 0) {
        fprintf(stderr, "roam-path: is roam daemon --dbus running? %s: %s\n", failure.name, failure.message);
        return 1;
    }
    printf("current %" PRIu64 " %s\n", sequence, json);
    fflush(stdout);
    free(json);
    sd_bus_error_free(&failure);
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) {
            fprintf(stderr, "roam-path: %s\n", strerror(-r));
            return 1;
        }
        if (r > 0) continue;
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0) {
            fprintf(stderr, "roam-path: %s\n", strerror(-r));
            return 1;
        }
    }
}
