/* log.h - levelled log lines on stderr: "rockstalkd: message". Level 0
 * always prints; higher levels print with that many -V flags. Used by the
 * top layer (main.c, server.c), and by queue.c for a job whose body cannot
 * be read (the operator must know). */
#ifndef ROCKSTALK_LOG_H
#define ROCKSTALK_LOG_H

/* Sets how many -V flags were given. Called once by main before any
 * thread starts. */
void log_set_verbosity(int v);

/* Prints one line if level <= verbosity. */
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
