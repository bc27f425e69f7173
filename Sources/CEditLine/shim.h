/* libedit's readline interface (Debian's libedit-dev): line editing and history for `ember chat`. */
#include <stdio.h>
#include <editline/readline.h>

/* Sets libedit's character source (bracketed paste reads a paste whole); a function so Swift does not touch the global. */
static inline void ember_editline_set_getc(int (*getc_function)(FILE *)) { rl_getc_function = getc_function; }
