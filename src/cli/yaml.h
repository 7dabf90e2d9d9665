/* yaml.h - reads the two YAML shapes beanstalkd servers send (stats*:
 * "key: value" lines; list-tubes*: "- item" lines) from a reply body.
 * Pure functions; no state. */
#ifndef ROCKSTALK_CLI_YAML_H
#define ROCKSTALK_CLI_YAML_H

#include <stddef.h>
#include <stdint.h>

/* Copies the value of key (raw, quotes kept) into out, NUL-ended and cut to
 * outcap - 1 bytes. Returns 0, or -1 when body has no such key. */
int yaml_get(const char *body, const char *key, char *out, size_t outcap);

/* The value of key as an unsigned decimal. Returns 0, or -1 when the key is
 * missing or its value is not a number (*out is then left alone). */
int yaml_u64(const char *body, const char *key, uint64_t *out);

/* The value of key as a decimal with an optional fraction ("12.5").
 * Returns 0, or -1 when missing or not a number. */
int yaml_double(const char *body, const char *key, double *out);

/* Splits a "- item" list into *items, an array of *n malloc'd strings that
 * the caller frees with yaml_list_free(). Returns 0, or -1 when out of
 * memory (nothing to free then). */
int yaml_list(const char *body, char ***items, size_t *n);

/* Frees what yaml_list() returned. */
void yaml_list_free(char **items, size_t n);

#endif
