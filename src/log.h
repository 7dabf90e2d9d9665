/* log.h - levelled log lines on stderr for the top layer (main.c and
 * server.c): "rockstalkd: message". Level 0 always prints; higher levels
 * print with that many -V flags. */
#ifndef ROCKSTALK_LOG_H
#define ROCKSTALK_LOG_H

/* Sets how many -V flags were given. Called once by main before any
 * thread starts. */
void log_set_verbosity(int v);

/* Prints one line if level <= verbosity. */
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
