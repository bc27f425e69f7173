/*
 * ember_cli_startup.h — the check the `ember` tool makes before Swift's
 * runtime starts. An implementation detail of the CLI; no Swift API.
 */
#ifndef EMBER_CLI_STARTUP_H
#define EMBER_CLI_STARTUP_H

/* The address-space floor (bytes) below which `ember` refuses to start. */
#define EMBER_MINIMUM_ADDRESS_SPACE (512LL << 20)

#endif
