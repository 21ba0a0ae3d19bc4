#include "CRoamTestingRootless.h"
#include "CRoamRootless.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int status = -1;
static char message[512];

__attribute__((constructor)) static void roam_testing_enter_rootless(void) {
    if (roam_rootless_can_run_as_root()) return;
    const char *setting = getenv("ROAM_ROOTLESS");
    if (setting && strcmp(setting, "0") == 0) return;
    status = roam_rootless_enter(message, sizeof message);
}

int roam_testing_rootless_status(void) { return status; }
const char *roam_testing_rootless_message(void) { return message; }
