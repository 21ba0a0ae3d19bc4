#ifndef ROAM_CROAMBUS_H
#define ROAM_CROAMBUS_H

#include <stdint.h>
#include <sys/types.h>

// D-Bus for `roam daemon` through systemd's sd-bus, loaded at run time from libsystemd.so.0
// (present on every systemd system; no build dependency, as systemd's own optional libraries
// are loaded). Each roam_bus_* function has the signature of the sd_bus_* function it names and
// returns -ENOSYS if the library was not loaded: call roam_bus_load() first.
//
// Only what the daemon needs: connecting, a name, raw object handlers (the daemon answers
// Introspect and Properties itself), messages built and read one basic value at a time (no
// variadic calls), signals, method calls with replies, signal matches and the sender's
// credentials.

typedef struct sd_bus sd_bus;
typedef struct sd_bus_message sd_bus_message;
typedef struct sd_bus_slot sd_bus_slot;
typedef struct sd_bus_creds sd_bus_creds;

// sd-bus's public error structure (its ABI).
typedef struct {
    const char *name;
    const char *message;
    int _need_free;
} roam_bus_error;

typedef int (*roam_bus_message_handler)(sd_bus_message *m, void *userdata, roam_bus_error *ret_error);

enum {
    ROAM_BUS_MESSAGE_METHOD_CALL = 1,
    ROAM_BUS_MESSAGE_METHOD_RETURN = 2,
    ROAM_BUS_MESSAGE_METHOD_ERROR = 3,
    ROAM_BUS_MESSAGE_SIGNAL = 4,
};

// sd-bus's credential mask bits.
#define ROAM_BUS_CREDS_UID (UINT64_C(1) << 3)
#define ROAM_BUS_CREDS_EUID (UINT64_C(1) << 4)

// Loads libsystemd.so.0 once. Returns NULL, or why it could not (a static string or dlerror's).
const char *roam_bus_load(void);

int roam_bus_open_system(sd_bus **ret);
int roam_bus_open_user(sd_bus **ret);
int roam_bus_request_name(sd_bus *bus, const char *name, uint64_t flags);
int roam_bus_get_unique_name(sd_bus *bus, const char **unique);
int roam_bus_add_object(sd_bus *bus, sd_bus_slot **slot, const char *path, roam_bus_message_handler callback, void *userdata);
int roam_bus_add_fallback(sd_bus *bus, sd_bus_slot **slot, const char *prefix, roam_bus_message_handler callback, void *userdata);
int roam_bus_match_signal(sd_bus *bus, sd_bus_slot **slot, const char *sender, const char *path, const char *interface,
                          const char *member, roam_bus_message_handler callback, void *userdata);
int roam_bus_process(sd_bus *bus, sd_bus_message **r);
int roam_bus_get_fd(sd_bus *bus);
int roam_bus_get_events(sd_bus *bus);
int roam_bus_get_timeout(sd_bus *bus, uint64_t *timeout_usec);
/// How long a method call (and the connection's Hello) waits for its reply (sd-bus's default is 25 s).
int roam_bus_set_method_call_timeout(sd_bus *bus, uint64_t usec);
int roam_bus_flush(sd_bus *bus);
void roam_bus_flush_close_unref(sd_bus *bus);
void roam_bus_slot_unref(sd_bus_slot *slot);

int roam_bus_message_new_method_return(sd_bus_message *call, sd_bus_message **m);
int roam_bus_message_new_method_error(sd_bus_message *call, sd_bus_message **m, const char *name, const char *message);
int roam_bus_message_new_signal(sd_bus *bus, sd_bus_message **m, const char *path, const char *interface, const char *member);
int roam_bus_message_new_method_call(sd_bus *bus, sd_bus_message **m, const char *destination, const char *path,
                                     const char *interface, const char *member);
int roam_bus_message_append_basic(sd_bus_message *m, char type, const void *p);
int roam_bus_message_append_string(sd_bus_message *m, const char *s);
int roam_bus_message_open_container(sd_bus_message *m, char type, const char *contents);
int roam_bus_message_close_container(sd_bus_message *m);
int roam_bus_message_enter_container(sd_bus_message *m, char type, const char *contents);
int roam_bus_message_exit_container(sd_bus_message *m);
int roam_bus_message_read_basic(sd_bus_message *m, char type, void *p);
int roam_bus_message_peek_type(sd_bus_message *m, char *type, const char **contents);
int roam_bus_message_skip(sd_bus_message *m, const char *types);
int roam_bus_message_get_type(sd_bus_message *m, uint8_t *type);
const char *roam_bus_message_get_path(sd_bus_message *m);
const char *roam_bus_message_get_interface(sd_bus_message *m);
const char *roam_bus_message_get_member(sd_bus_message *m);
const char *roam_bus_message_get_sender(sd_bus_message *m);
const char *roam_bus_message_get_signature(sd_bus_message *m, int complete);
int roam_bus_send(sd_bus *bus, sd_bus_message *m, uint64_t *cookie);
// A method call and its reply within `usec` (0: sd-bus's default). On an error reply, returns
// a negative errno and copies the error's name and message (truncated) into the buffers.
int roam_bus_call(sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_message **reply,
                  char *error_name, size_t name_size, char *error_message, size_t message_size);
void roam_bus_message_unref(sd_bus_message *m);

// The sender's effective user id as the bus knows it (the bus daemon's record of the peer's
// SO_PEERCRED; never read from /proc by pid, which another process could have taken). Its user
// id where the bus says only that. Returns 0 or a negative errno.
int roam_bus_sender_euid(sd_bus_message *m, uid_t *euid);

#endif
