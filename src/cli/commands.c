/* commands.c - see commands.h. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"

/* clang-format off */
static const CmdSpec table[] = {
    {"put", "", "INSERTED", CMD_BODY, "[PRI DELAY TTR] [FILE]",
     "put a job (body from FILE or stdin) into the used tube"},
    {"reserve", "", "RESERVED", 0, "", "reserve a job from the watched tubes"},
    {"reserve-with-timeout", "n", "RESERVED", 0, "SECONDS",
     "reserve, giving up after SECONDS"},
    {"reserve-job", "n", "RESERVED", 0, "ID", "reserve the job ID"},
    {"delete", "n", "DELETED", 0, "ID", "delete a job"},
    {"release", "nnn", "RELEASED", 0, "ID PRI DELAY",
     "release a reserved job"},
    {"bury", "nn", "BURIED", 0, "ID PRI", "bury a reserved job"},
    {"touch", "n", "TOUCHED", 0, "ID", "renew a reserved job's TTR"},
    {"use", "t", "USING", 0, "TUBE", "put into TUBE"},
    {"watch", "t", "WATCHING", 0, "TUBE", "reserve from TUBE too"},
    {"ignore", "t", "WATCHING", 0, "TUBE", "stop reserving from TUBE"},
    {"peek", "n", "FOUND", 0, "ID", "show a job"},
    {"peek-ready", "", "FOUND", 0, "", "show the next ready job"},
    {"peek-delayed", "", "FOUND", 0, "", "show the next delayed job"},
    {"peek-buried", "", "FOUND", 0, "", "show the next buried job"},
    {"kick", "n", "KICKED", 0, "BOUND", "kick up to BOUND jobs"},
    {"kick-job", "n", "KICKED", 0, "ID", "kick one buried or delayed job"},
    {"stats", "", "OK", 0, "", "server statistics"},
    {"stats-job", "n", "OK", 0, "ID", "job statistics"},
    {"stats-tube", "t", "OK", 0, "TUBE", "tube statistics"},
    {"list-tubes", "", "OK", 0, "", "list the tubes"},
    {"list-tube-used", "", "USING", 0, "", "show the used tube"},
    {"list-tubes-watched", "", "OK", 0, "", "list the watched tubes"},
    {"pause-tube", "tn", "PAUSED", 0, "TUBE SECONDS",
     "pause reserves from TUBE"},
    {"list-jobs", "tsn", "OK", CMD_EXT, "TUBE STATE COUNT",
     "list up to COUNT job ids of TUBE in STATE"},
    {"clear-tube", "t", "CLEARED", CMD_EXT, "TUBE",
     "delete every job of TUBE (no confirmation)"},
    {"put-unique", "k", "INSERTED", CMD_EXT | CMD_BODY,
     "KEY [PRI DELAY TTR] [FILE]", "put a job unless KEY is already queued"},
    {"reserve-batch", "nn", "RESERVED_BATCH", CMD_EXT, "COUNT SECONDS",
     "reserve up to COUNT jobs at once"},
};
/* clang-format on */

const CmdSpec *
commands_all(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}

const CmdSpec *
commands_find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

int
commands_is_number(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

static int
is_state(const char *s)
{
    return strcmp(s, "ready") == 0 || strcmp(s, "delayed") == 0 ||
           strcmp(s, "buried") == 0 || strcmp(s, "reserved") == 0;
}

int
commands_check_arg(char k, const char *a, char *err, size_t errcap)
{
    for (const char *p = a; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            snprintf(err, errcap, "invalid argument '%s': no spaces allowed",
                     a);
            return -1;
        }
    if (!*a) {
        snprintf(err, errcap, "empty argument");
        return -1;
    }
    if (k == 'n' && !commands_is_number(a)) {
        snprintf(err, errcap, "not a number: '%s'", a);
        return -1;
    }
    if (k == 's' && !is_state(a)) {
        snprintf(err, errcap,
                 "unknown job state '%s' (ready, delayed, buried, reserved)",
                 a);
        return -1;
    }
    if ((k == 't' || k == 'k') && strlen(a) > TUBE_NAME_MAX) {
        snprintf(err, errcap, "name longer than %d bytes", TUBE_NAME_MAX);
        return -1;
    }
    return 0;
}

int
commands_check(const CmdSpec *spec, int argc, char **argv, char *err,
               size_t errcap)
{
    int want = (int)strlen(spec->args);
    int max = want + ((spec->flags & CMD_BODY) ? 4 : 0);
    if (argc < want || argc > max) {
        snprintf(err, errcap, "wrong number of arguments; usage: %s%s%s",
                 spec->name, *spec->usage ? " " : "", spec->usage);
        return -1;
    }
    for (int i = 0; i < want; i++)
        if (commands_check_arg(spec->args[i], argv[i], err, errcap)) return -1;
    return 0;
}
