/* A policy's text in memory, checked for encoding before any token is read. */
#ifndef UMPOL_SOURCE_H
#define UMPOL_SOURCE_H

#include <stddef.h>

/* Policies are small; anything larger is certainly not one. */
#define SOURCE_MAX_BYTES (16u * 1024 * 1024)

/* 1-based lines, 1-based columns counted in characters (UTF-8 code points).
 * The layout matches what bison's %locations expects of YYLTYPE. */
struct loc {
    int first_line, first_column;
    int last_line, last_column; /* last_column is one past the end */
};

struct source {
    char *name;   /* as given on the command line */
    char *text;   /* NUL-terminated copy of the file */
    size_t len;
    size_t *line_starts; /* byte offset of each line's start */
    size_t line_count;
};

/* Why a text cannot be read as a policy. The loader only describes the
 * problem; turning it into a diagnostic is its caller's business. */
enum source_problem { SOURCE_OK, SOURCE_IO, SOURCE_TOO_LARGE, SOURCE_ENCODING, SOURCE_NO_MEMORY };

struct source_error {
    enum source_problem problem;
    struct loc loc; /* line 0: the whole file */
    char message[128];
};

/* Reads PATH ("-" is stdin). Returns 0 on success; on failure fills ERR
 * (I/O, size, encoding, memory) and returns -1. */
int source_load(struct source *src, const char *path, struct source_error *err);
/* Same checks on text already in memory (tests, fuzzing, benchmarks). */
int source_from_memory(struct source *src, const char *name, const char *text, size_t len,
                       struct source_error *err);
void source_free(struct source *src);

/* Pointer to the start of LINE (1-based) and its length without the newline. */
const char *source_line(const struct source *src, int line, size_t *len);

#endif
