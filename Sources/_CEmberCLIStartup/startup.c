/*
 * startup.c — under an address-space limit (ulimit -v) of a few hundred MiB,
 * Swift's async main never begins: libdispatch sleeps and retries forever for
 * a thread it cannot create, and OpenBLAS's thread retries its 128 MiB buffer
 * forever. So the `ember` tool checks the limit before main and, when it is
 * below the floor, says so and exits 1 instead of hanging. Above the floor the
 * runtime's own check (AddressSpace.blasShortfall) takes over.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
#include "ember_cli_startup.h"

__attribute__((constructor)) static void ember_check_address_space(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
    if ((long long)limit.rlim_cur >= EMBER_MINIMUM_ADDRESS_SPACE) return;
    fprintf(stderr, "Error: out of memory: the address-space limit (ulimit -v) of %lld MiB is below the %lld MiB ember needs "
                    "to start (Swift's runtime and OpenBLAS reserve that much); raise it (ulimit -v %lld or more)\n",
            (long long)limit.rlim_cur >> 20, EMBER_MINIMUM_ADDRESS_SPACE >> 20, EMBER_MINIMUM_ADDRESS_SPACE >> 10);
    _exit(1);
}
