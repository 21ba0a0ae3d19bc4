#ifndef ROAM_CROAMTESTINGROOTLESS_H
#define ROAM_CROAMTESTINGROOTLESS_H

// RoamTesting's constructor: before main, while the test process has one thread, a process that
// is not root enters a user namespace of its own (CRoamRootless), so that its scenarios can make
// network namespaces. ROAM_ROOTLESS=0 in the environment leaves the process as it is.
// What the constructor did: -1 it did not try (root, or ROAM_ROOTLESS=0), 0 it entered, else the
// errno, with roam_testing_rootless_message() saying why.
int roam_testing_rootless_status(void);
const char *roam_testing_rootless_message(void);

#endif
