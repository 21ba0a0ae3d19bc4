#define _GNU_SOURCE
#include "CRoamBus.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

// Each sd-bus function the daemon calls, resolved once by roam_bus_load.
#define ROAM_BUS_FUNCTIONS(X) \
    X(int, sd_bus_open_system, (sd_bus **)) \
    X(int, sd_bus_open_user, (sd_bus **)) \
    X(int, sd_bus_request_name, (sd_bus *, const char *, uint64_t)) \
    X(int, sd_bus_get_unique_name, (sd_bus *, const char **)) \
    X(int, sd_bus_add_object, (sd_bus *, sd_bus_slot **, const char *, roam_bus_message_handler, void *)) \
    X(int, sd_bus_add_fallback, (sd_bus *, sd_bus_slot **, const char *, roam_bus_message_handler, void *)) \
    X(int, sd_bus_match_signal, (sd_bus *, sd_bus_slot **, const char *, const char *, const char *, const char *, roam_bus_message_handler, void *)) \
    X(int, sd_bus_process, (sd_bus *, sd_bus_message **)) \
    X(int, sd_bus_get_fd, (sd_bus *)) \
    X(int, sd_bus_get_events, (sd_bus *)) \
    X(int, sd_bus_get_timeout, (sd_bus *, uint64_t *)) \
    X(int, sd_bus_set_method_call_timeout, (sd_bus *, uint64_t)) \
    X(int, sd_bus_flush, (sd_bus *)) \
    X(sd_bus *, sd_bus_flush_close_unref, (sd_bus *)) \
    X(sd_bus_slot *, sd_bus_slot_unref, (sd_bus_slot *)) \
    X(int, sd_bus_message_new_method_return, (sd_bus_message *, sd_bus_message **)) \
    X(int, sd_bus_message_new_method_error, (sd_bus_message *, sd_bus_message **, const roam_bus_error *)) \
    X(int, sd_bus_message_new_signal, (sd_bus *, sd_bus_message **, const char *, const char *, const char *)) \
    X(int, sd_bus_message_new_method_call, (sd_bus *, sd_bus_message **, const char *, const char *, const char *, const char *)) \
    X(int, sd_bus_message_append_basic, (sd_bus_message *, char, const void *)) \
    X(int, sd_bus_message_open_container, (sd_bus_message *, char, const char *)) \
    X(int, sd_bus_message_close_container, (sd_bus_message *)) \
    X(int, sd_bus_message_enter_container, (sd_bus_message *, char, const char *)) \
    X(int, sd_bus_message_exit_container, (sd_bus_message *)) \
    X(int, sd_bus_message_read_basic, (sd_bus_message *, char, void *)) \
    X(int, sd_bus_message_peek_type, (sd_bus_message *, char *, const char **)) \
    X(int, sd_bus_message_skip, (sd_bus_message *, const char *)) \
    X(int, sd_bus_message_get_type, (sd_bus_message *, uint8_t *)) \
    X(const char *, sd_bus_message_get_path, (sd_bus_message *)) \
    X(const char *, sd_bus_message_get_interface, (sd_bus_message *)) \
    X(const char *, sd_bus_message_get_member, (sd_bus_message *)) \
    X(const char *, sd_bus_message_get_sender, (sd_bus_message *)) \
    X(const char *, sd_bus_message_get_signature, (sd_bus_message *, int)) \
    X(int, sd_bus_send, (sd_bus *, sd_bus_message *, uint64_t *)) \
    X(int, sd_bus_call, (sd_bus *, sd_bus_message *, uint64_t, roam_bus_error *, sd_bus_message **)) \
    X(sd_bus_message *, sd_bus_message_unref, (sd_bus_message *)) \
    X(void, sd_bus_error_free, (roam_bus_error *)) \
    X(int, sd_bus_query_sender_creds, (sd_bus_message *, uint64_t, sd_bus_creds **)) \
    X(int, sd_bus_creds_get_euid, (sd_bus_creds *, uid_t *)) \
    X(int, sd_bus_creds_get_uid, (sd_bus_creds *, uid_t *)) \
    X(sd_bus_creds *, sd_bus_creds_unref, (sd_bus_creds *))

#define ROAM_BUS_POINTER(result, name, parameters) static result (*p_##name) parameters;
ROAM_BUS_FUNCTIONS(ROAM_BUS_POINTER)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *failure = "not loaded";
static char failure_text[256];

static void load(void) {
    void *library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *reason = dlerror();
        strncpy(failure_text, reason ? reason : "libsystemd.so.0 cannot be loaded", sizeof failure_text - 1);
        failure = failure_text;
        return;
    }
#define ROAM_BUS_RESOLVE(result, name, parameters) \
    p_##name = (result (*) parameters)dlsym(library, #name); \
    if (!p_##name) { \
        strncpy(failure_text, "libsystemd.so.0 has no " #name " (systemd 246 or later is needed)", sizeof failure_text - 1); \
        failure = failure_text; \
        return; \
    }
    ROAM_BUS_FUNCTIONS(ROAM_BUS_RESOLVE)
    failure = NULL;
}

const char *roam_bus_load(void) {
    pthread_once(&once, load);
    return failure;
}

#define LOADED_OR(value) if (failure) return value;

int roam_bus_open_system(sd_bus **ret) { LOADED_OR(-ENOSYS) return p_sd_bus_open_system(ret); }
int roam_bus_open_user(sd_bus **ret) { LOADED_OR(-ENOSYS) return p_sd_bus_open_user(ret); }
int roam_bus_request_name(sd_bus *bus, const char *name, uint64_t flags) { LOADED_OR(-ENOSYS) return p_sd_bus_request_name(bus, name, flags); }
int roam_bus_get_unique_name(sd_bus *bus, const char **unique) { LOADED_OR(-ENOSYS) return p_sd_bus_get_unique_name(bus, unique); }
int roam_bus_add_object(sd_bus *bus, sd_bus_slot **slot, const char *path, roam_bus_message_handler callback, void *userdata) {
    LOADED_OR(-ENOSYS) return p_sd_bus_add_object(bus, slot, path, callback, userdata);
}
int roam_bus_add_fallback(sd_bus *bus, sd_bus_slot **slot, const char *prefix, roam_bus_message_handler callback, void *userdata) {
    LOADED_OR(-ENOSYS) return p_sd_bus_add_fallback(bus, slot, prefix, callback, userdata);
}
int roam_bus_match_signal(sd_bus *bus, sd_bus_slot **slot, const char *sender, const char *path, const char *interface,
                          const char *member, roam_bus_message_handler callback, void *userdata) {
    LOADED_OR(-ENOSYS) return p_sd_bus_match_signal(bus, slot, sender, path, interface, member, callback, userdata);
}
int roam_bus_process(sd_bus *bus, sd_bus_message **r) { LOADED_OR(-ENOSYS) return p_sd_bus_process(bus, r); }
int roam_bus_get_fd(sd_bus *bus) { LOADED_OR(-ENOSYS) return p_sd_bus_get_fd(bus); }
int roam_bus_get_events(sd_bus *bus) { LOADED_OR(-ENOSYS) return p_sd_bus_get_events(bus); }
int roam_bus_get_timeout(sd_bus *bus, uint64_t *timeout_usec) { LOADED_OR(-ENOSYS) return p_sd_bus_get_timeout(bus, timeout_usec); }
int roam_bus_set_method_call_timeout(sd_bus *bus, uint64_t usec) { LOADED_OR(-ENOSYS) return p_sd_bus_set_method_call_timeout(bus, usec); }
int roam_bus_flush(sd_bus *bus) { LOADED_OR(-ENOSYS) return p_sd_bus_flush(bus); }
void roam_bus_flush_close_unref(sd_bus *bus) { if (!failure && bus) p_sd_bus_flush_close_unref(bus); }
void roam_bus_slot_unref(sd_bus_slot *slot) { if (!failure && slot) p_sd_bus_slot_unref(slot); }

int roam_bus_message_new_method_return(sd_bus_message *call, sd_bus_message **m) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_new_method_return(call, m);
}
int roam_bus_message_new_method_error(sd_bus_message *call, sd_bus_message **m, const char *name, const char *message) {
    LOADED_OR(-ENOSYS)
    roam_bus_error error = { name, message, 0 };
    return p_sd_bus_message_new_method_error(call, m, &error);
}
int roam_bus_message_new_signal(sd_bus *bus, sd_bus_message **m, const char *path, const char *interface, const char *member) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_new_signal(bus, m, path, interface, member);
}
int roam_bus_message_new_method_call(sd_bus *bus, sd_bus_message **m, const char *destination, const char *path,
                                     const char *interface, const char *member) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_new_method_call(bus, m, destination, path, interface, member);
}
int roam_bus_message_append_basic(sd_bus_message *m, char type, const void *p) { LOADED_OR(-ENOSYS) return p_sd_bus_message_append_basic(m, type, p); }
int roam_bus_message_append_string(sd_bus_message *m, const char *s) { LOADED_OR(-ENOSYS) return p_sd_bus_message_append_basic(m, 's', s); }
int roam_bus_message_open_container(sd_bus_message *m, char type, const char *contents) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_open_container(m, type, contents);
}
int roam_bus_message_close_container(sd_bus_message *m) { LOADED_OR(-ENOSYS) return p_sd_bus_message_close_container(m); }
int roam_bus_message_enter_container(sd_bus_message *m, char type, const char *contents) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_enter_container(m, type, contents);
}
int roam_bus_message_exit_container(sd_bus_message *m) { LOADED_OR(-ENOSYS) return p_sd_bus_message_exit_container(m); }
int roam_bus_message_read_basic(sd_bus_message *m, char type, void *p) { LOADED_OR(-ENOSYS) return p_sd_bus_message_read_basic(m, type, p); }
int roam_bus_message_peek_type(sd_bus_message *m, char *type, const char **contents) {
    LOADED_OR(-ENOSYS) return p_sd_bus_message_peek_type(m, type, contents);
}
int roam_bus_message_skip(sd_bus_message *m, const char *types) { LOADED_OR(-ENOSYS) return p_sd_bus_message_skip(m, types); }
int roam_bus_message_get_type(sd_bus_message *m, uint8_t *type) { LOADED_OR(-ENOSYS) return p_sd_bus_message_get_type(m, type); }
const char *roam_bus_message_get_path(sd_bus_message *m) { LOADED_OR(NULL) return p_sd_bus_message_get_path(m); }
const char *roam_bus_message_get_interface(sd_bus_message *m) { LOADED_OR(NULL) return p_sd_bus_message_get_interface(m); }
const char *roam_bus_message_get_member(sd_bus_message *m) { LOADED_OR(NULL) return p_sd_bus_message_get_member(m); }
const char *roam_bus_message_get_sender(sd_bus_message *m) { LOADED_OR(NULL) return p_sd_bus_message_get_sender(m); }
const char *roam_bus_message_get_signature(sd_bus_message *m, int complete) { LOADED_OR(NULL) return p_sd_bus_message_get_signature(m, complete); }
int roam_bus_send(sd_bus *bus, sd_bus_message *m, uint64_t *cookie) { LOADED_OR(-ENOSYS) return p_sd_bus_send(bus, m, cookie); }

static void copy(char *buffer, size_t size, const char *text) {
    if (!buffer || size == 0) return;
    buffer[0] = 0;
    if (text) {
        strncpy(buffer, text, size - 1);
        buffer[size - 1] = 0;
    }
}

int roam_bus_call(sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_message **reply,
                  char *error_name, size_t name_size, char *error_message, size_t message_size) {
    LOADED_OR(-ENOSYS)
    roam_bus_error error = { NULL, NULL, 0 };
    int r = p_sd_bus_call(bus, m, usec, &error, reply);
    copy(error_name, name_size, error.name);
    copy(error_message, message_size, error.message);
    p_sd_bus_error_free(&error);
    return r;
}
void roam_bus_message_unref(sd_bus_message *m) { if (!failure && m) p_sd_bus_message_unref(m); }

int roam_bus_sender_euid(sd_bus_message *m, uid_t *euid) {
    LOADED_OR(-ENOSYS)
    sd_bus_creds *creds = NULL;
    int r = p_sd_bus_query_sender_creds(m, ROAM_BUS_CREDS_EUID | ROAM_BUS_CREDS_UID, &creds);
    if (r < 0) return r;
    r = p_sd_bus_creds_get_euid(creds, euid);
    if (r < 0) r = p_sd_bus_creds_get_uid(creds, euid);
    p_sd_bus_creds_unref(creds);
    return r < 0 ? r : 0;
}
