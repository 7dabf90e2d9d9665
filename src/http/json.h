/* json.h - a small streaming JSON writer (RFC 8259) into a growable
 * buffer: objects, arrays, keys, strings, integers, decimals, booleans.
 * Commas are placed by the writer; the caller opens and closes in order
 * (nesting at most JSON_DEPTH_MAX deep). Strings are escaped: '"', '\\'
 * and control characters; '<', '>' and '&' as \u escapes too (so a
 * document stays inert if a page ever embeds it); bytes that are not
 * valid UTF-8 become U+FFFD, so the output is always valid JSON text.
 * Debian's JSON libraries (jansson, json-c) build a tree of allocated
 * nodes; a document rendered once a second wants a flat buffer. Any
 * thread; a Json belongs to one. */
#ifndef ROCKSTALK_JSON_H
#define ROCKSTALK_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Deepest nesting of objects and arrays a Json writes. */
#define JSON_DEPTH_MAX 32

/* A document being written; zero-initialise it ({0}). On allocation
 * failure (or nesting too deep) failed is set and every later call does
 * nothing: check it before using buf. */
typedef struct Json {
    char *buf; /* NUL-terminated; the caller frees it (json_free) */
    size_t len, cap;
    int failed;
    int depth;
    int after_key;     /* a key was written; its value comes next */
    uint32_t has_item; /* bit d: the container at depth d+1 has an item */
} Json;

/* Open and close an object or an array (as a value: after a key, in an
 * array, or at the top). */
void json_obj(Json *j);
void json_obj_end(Json *j);
void json_arr(Json *j);
void json_arr_end(Json *j);

/* A key of the open object (NUL-terminated), escaped as a string. */
void json_key(Json *j, const char *key);

/* Values. json_str writes len bytes of s as a string; json_cstr a
 * NUL-terminated one; json_num writes text that the caller guarantees is
 * a JSON number (say "12.5"); json_dbl a finite double with prec digits
 * after the point (non-finite: 0). */
void json_str(Json *j, const char *s, size_t len);
void json_cstr(Json *j, const char *s);
void json_u64(Json *j, uint64_t v);
void json_i64(Json *j, int64_t v);
void json_dbl(Json *j, double v, int prec);
void json_num(Json *j, const char *text);
void json_bool(Json *j, int v);
void json_null(Json *j);

/* Frees the buffer and resets j to empty. */
void json_free(Json *j);

#endif
