/* A minimal JSON reader for tests: parses a document into a tree, checks
 * syntax strictly. Not part of the library. */
#ifndef MP_JSONR_H
#define MP_JSONR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JR_NULL, JR_BOOL, JR_NUM, JR_STR, JR_ARR, JR_OBJ } jr_type;

typedef struct jr {
    jr_type type;
    bool b;
    double num;
    int64_t i;          /* exact value when the number is an integer */
    bool is_int;
    char *s;            /* JR_STR: decoded; object member: key in `key` */
    char *key;
    struct jr *child;   /* first element/member */
    struct jr *next;
} jr;

/* NULL on a syntax error (err gets the byte offset). */
jr *jr_parse(const char *text, size_t len, size_t *err);
void jr_free(jr *j);
const jr *jr_get(const jr *obj, const char *key);
int jr_len(const jr *arr);
const jr *jr_at(const jr *arr, int i);
/* Path lookup "total.params"; NULL when absent. */
const jr *jr_path(const jr *root, const char *path);
/* Read a whole file; NULL on error. Caller frees. */
char *jr_slurp(const char *path, size_t *len);

#endif
