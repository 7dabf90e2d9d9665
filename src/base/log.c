/* log.c - see log.h. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>

/* Written once by main before any thread starts, read-only after. */
static int verbosity;

void
log_set_verbosity(int v)
{
    verbosity = v;
}

void
log_msg(int level, const char *fmt, ...)
{
    if (level > verbosity) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("rockstalkd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
