// The part the peers' preload libraries (cpuid_avx2.c, xgetbv_avx2.c) share: they answer one signal themselves
// (HELD_SIGNAL, defined before this header is included) and must not let the program take it from them. Programs
// install handlers of their own (Python's faulthandler, crash reporters): `sigaction` and `signal` are wrapped so that
// such a handler is recorded rather than installed, and gets every HELD_SIGNAL the library does not answer.
//
// The library sets `holding` once its own handler is installed, and calls `forward_fault` for a signal not its own.
#ifndef HELD_SIGNAL
#error "define HELD_SIGNAL (the signal the preload library answers) before including held_signal.h"
#endif
#include <dlfcn.h>
#include <signal.h>
#include <string.h>

typedef int (*sigaction_function)(int, const struct sigaction *, struct sigaction *);
static sigaction_function next_sigaction;  // the C library's
static int holding;                        // the library's handler is installed
static struct sigaction program_action;    // the handler the program asked for (SIG_DFL at first)

static int call_next_sigaction(int sig, const struct sigaction *action, struct sigaction *old) {
    if (!next_sigaction) next_sigaction = (sigaction_function)dlsym(RTLD_NEXT, "sigaction");
    return next_sigaction(sig, action, old);
}

int sigaction(int sig, const struct sigaction *action, struct sigaction *old) {
    if (sig != HELD_SIGNAL || !holding) return call_next_sigaction(sig, action, old);
    if (old) *old = program_action;
    if (action) program_action = *action;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction action, old;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(sig, &action, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

// Puts the C library's default action back for sig.
static void restore_default_action(int sig) {
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    call_next_sigaction(sig, &fallback, NULL);
}

// A signal that is not the library's goes where the program said; with no handler of its own, the default action
// (re-installed, the faulting instruction runs again and ends the process as it would have).
static void forward_fault(int sig, siginfo_t *info, void *context) {
    if (program_action.sa_flags & SA_SIGINFO) {
        program_action.sa_sigaction(sig, info, context);
    } else if (program_action.sa_handler != SIG_DFL && program_action.sa_handler != SIG_IGN) {
        program_action.sa_handler(sig);
    } else {
        restore_default_action(sig);
    }
}

// Installs `handler` for HELD_SIGNAL (with siginfo, re-entrant); the program's own handler starts as SIG_DFL.
static int install_held_handler(void (*handler)(int, siginfo_t *, void *)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    program_action.sa_handler = SIG_DFL;
    return call_next_sigaction(HELD_SIGNAL, &action, NULL);
}
