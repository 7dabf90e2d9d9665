/* commands.h - the table of protocol commands the client knows (beanstalkd
 * 1.12's and rockstalk's extensions): their arguments, the reply that
 * means success, and their help line. Read-only data; no state. */
#ifndef ROCKSTALK_CLI_COMMANDS_H
#define ROCKSTALK_CLI_COMMANDS_H

#include <stddef.h>

/* CmdSpec.flags */
#define CMD_EXT 1  /* a rockstalk extension: a plain beanstalkd lacks it */
#define CMD_BODY 2 /* put-like: a job body follows the command line */

typedef struct CmdSpec {
    const char *name;  /* the verb as sent */
    const char *args;  /* one letter per argument: n number, t tube name,
                          s job state, k unique key; put-like commands'
                          numbers are optional and not listed here */
    const char *ok;    /* first word of the success reply, NULL: no reply */
    int flags;         /* CMD_* */
    const char *usage; /* arguments as shown in help and usage errors */
    const char *help;  /* one line of help */
} CmdSpec;

/* The spec for name, or NULL when it is not a protocol command. */
const CmdSpec *commands_find(const char *name);

/* The whole table, *n entries, in help order. */
const CmdSpec *commands_all(size_t *n);

/* Checks argc arguments against spec->args: count, and that numbers are
 * decimals, states are ready|delayed|buried|reserved and no argument holds
 * a space or control byte (which would split the command line). A put-like
 * command's optional arguments are only counted here. Returns 0, or -1
 * with a message in err. */
int commands_check(const CmdSpec *spec, int argc, char **argv, char *err,
                   size_t errcap);

/* Nonzero when s is a non-empty string of decimal digits. */
int commands_is_number(const char *s);

/* Checks one argument of kind k (see CmdSpec.args; 'w' is any word).
 * Returns 0, or -1 with a message in err. */
int commands_check_arg(char k, const char *a, char *err, size_t errcap);

#endif
