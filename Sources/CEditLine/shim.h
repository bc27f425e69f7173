/* libedit's readline interface (Debian's libedit-dev): line editing and history for `ember chat`. */
#include <stdio.h>
#include <editline/readline.h>
