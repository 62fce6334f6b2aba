/* Unit tests of the policy front end: source checks, globs, interning,
 * parsing, checking, compiling and classifying. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lang/check.h"
#include "lang/glob.h"
#include "lang/parse.h"
#include "lang/policy.h"
#include "lang/strset.h"

/* ---- helpers ---- */

static struct policy load(const char *text)
{
    struct policy pol;
    policy_load_text(&pol, "test.umpol", text, strlen(text));
    return pol;
}

/* What explain says of POL: its text, then its JSON (free the result). */
static char *explained(const struct policy *pol)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    program_explain(out, pol->program);
    program_explain_json(out, pol->program);
    fclose(out);
    return text;
}


static bool has_code(const struct policy *pol, enum diag_code code)
{
    for (size_t i = 0; i < pol->diags.count; i++)
        if (pol->diags.items[i].code == code)
            return true;
    return false;
}

/* Classify one allocation; phases and tags are given by name. */
static int classify(const struct program *p, uint64_t size, unsigned api, int device, uint64_t seq,
                    const char *phase, const char *tag)
{
    uint64_t *phase_bits = calloc(program_bitset_words(p->phase_glob_count), 8);
    uint64_t *tag_bits = calloc(program_bitset_words(p->tag_count), 8);
    assert_non_null(phase_bits);
    assert_non_null(tag_bits);
    if (phase)
        program_match_phase(p, phase, phase_bits);
    if (tag) {
        int t = program_tag_index(p, tag);
        if (t >= 0)
            tag_bits[t / 64] |= 1ull << (t % 64);
    }
    struct alloc_ctx ctx = {size, seq, api, device, phase_bits, tag_bits, false, 0};
    int cls = program_classify(p, &ctx);
    free(phase_bits);
    free(tag_bits);
    return cls;
}

/* ---- glob ---- */

static void test_glob_match_cases(void **state)
{
    (void)state;
    assert_true(glob_match("*", ""));
    assert_true(glob_match("*", "anything"));
    assert_true(glob_match("model.init*", "model.init"));
    assert_true(glob_match("model.init*", "model.init.layers.3"));
    assert_false(glob_match("model.init*", "model.ini"));
    assert_true(glob_match("*step", "optimizer.step"));
    assert_false(glob_match("*step", "optimizer.steps"));
    assert_true(glob_match("a?c", "abc"));
    assert_false(glob_match("a?c", "ac"));
    assert_true(glob_match("a*b*c", "aXXbYYc"));
    assert_false(glob_match("a*b*c", "aXXbYY"));
    assert_true(glob_match("lit\\*", "lit*"));
    assert_false(glob_match("lit\\*", "litX"));
    assert_true(glob_match("forward", "forward"));
    assert_false(glob_match("forward", "forwards"));
}

static void test_glob_pathological_is_fast(void **state)
{
    (void)state;
    char text[4097];
    memset(text, 'a', 4096);
    text[4096] = '\0';
    /* Exponential in a naive recursive matcher; linear-ish here. */
    assert_false(glob_match("*a*a*a*a*a*a*a*a*a*a*a*b", text));
}

/* ---- strset ---- */

static void test_strset_interns(void **state)
{
    (void)state;
    struct strset s;
    strset_init(&s);
    char names[1000][16];
    for (int i = 0; i < 1000; i++) {
        snprintf(names[i], sizeof names[i], "name%d", i);
        assert_int_equal(strset_add(&s, names[i]), i);
    }
    for (int i = 0; i < 1000; i++)
        assert_int_equal(strset_find(&s, names[i]), i);
    assert_int_equal(strset_add(&s, "name7"), 7);
    assert_int_equal(strset_find(&s, "missing"), -1);
    strset_free(&s);
}

/* ---- source ---- */

static void test_source_lines_and_columns(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass é { match any; }\n");
    /* é is not an identifier character: column counts characters, not bytes. */
    assert_true(has_code(&pol, E_BAD_CHAR));
    assert_int_equal(pol.diags.items[0].loc.first_line, 2);
    assert_int_equal(pol.diags.items[0].loc.first_column, 7);
    size_t len;
    const char *line = source_line(&pol.src, 2, &len);
    assert_non_null(line);
    assert_int_equal(len, strlen("class é { match any; }"));
    assert_null(source_line(&pol.src, 99, &len));
    policy_free(&pol);
}

static void test_source_rejects_nul_and_bad_utf8(void **state)
{
    (void)state;
    static const char nul[] = "umpol 1;\nclass a { match any; }\0junk";
    struct policy pol;
    assert_int_equal(policy_load_text(&pol, "t", nul, sizeof nul - 1), POLICY_INVALID);
    assert_true(has_code(&pol, E_ENCODING));
    policy_free(&pol);
    static const char *const bad_utf8[] = {
        "umpol 1; # \xff\n", "umpol 1; # \xc0\xaf\n", /* overlong '/' */
        "umpol 1; # \xed\xa0\x80\n",                  /* surrogate */
        "umpol 1; # \xe2\x82\n",                      /* truncated */
    };
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
        pol = load(bad_utf8[i]);
        assert_true(has_code(&pol, E_ENCODING));
        policy_free(&pol);
    }
    pol = load("umpol 1; # naïve — ✓ 𝄞\nclass a { match any; }\n");
    assert_non_null(pol.program);
    policy_free(&pol);
}

static void test_source_size_limit(void **state)
{
    (void)state;
    size_t len = SOURCE_MAX_BYTES + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, '#', len);
    struct policy pol;
    assert_int_equal(policy_load_text(&pol, "big", big, len), POLICY_INVALID);
    assert_true(has_code(&pol, E_TOO_LARGE));
    policy_free(&pol);
    free(big);
}

/* ---- errors: one table row per code ---- */

struct bad_case {
    const char *text;
    enum diag_code code;
};

static const struct bad_case bad_cases[] = {
    {"umpol 1;\nclass a { match any }\n", E_SYNTAX},
    {"umpol 1;\nclass a { mtch any; }\n", E_UNKNOWN_KEYWORD},
    {"umpol 1;\nclass a { match any; } $\n", E_BAD_CHAR},
    {"umpol 1;\nclass a { match phase \"x; }\n", E_UNTERMINATED},
    {"umpol 1;\nclass a { match ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "(((((((any))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))); }\n",
     E_TOO_DEEP},
    {"class a { match any; }\n", E_NO_HEADER},
    {"umpol 3;\nclass a { match any; }\n", E_VERSION},
    {"umpol 1;\nclass a { match any; }\nclass a { match any; }\n", E_DUP_CLASS},
    {"umpol 1;\nclass a { match any; match any; }\n", E_DUP_DIRECTIVE},
    {"umpol 1;\nclass a { match any; memory device; access gpu; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory host; access gpu; }\n", E_CONFLICT},
    {"umpol 1;\nlearn step \"\";\nclass a { match any; }\n", E_EMPTY_PATTERN},
    {"umpol 1;\nlearn stp;\nclass a { match any; }\n", E_UNKNOWN_KEYWORD},
    {"umpol 1;\nlearn step;\nlearn step;\nclass a { match any; }\n", E_DUP_GLOBAL},
    {"umpol 1;\nclass a { match any; memory host; place gpu; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory host; prefetch gpu on alloc; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory host; advise read_mostly; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory movable; advise read_mostly; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory movable; access gpu; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory movable; prefetch gpu 1 on enter \"x\"; }\n",
     E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory movable; place gpu 0; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match any; memory movable; prefetch gpu on alloc; }\n", E_CONFLICT},
    {"umpol 1;\nclass a { match saved; memory movable; }\nclass b { match any; }\n",
     E_SAVED_DEVICE},
    {"umpol 1;\nslab 18446744073709551616;\nclass a { match any; }\n", E_OVERFLOW},
    {"umpol 1;\nslab 17179869184TiB;\nclass a { match any; }\n", E_OVERFLOW},
    {"umpol 1;\nbudget gpu 101%;\nclass a { match any; }\n", E_PERCENT},
    {"umpol 1;\nclass a { match size 2..1; }\n", E_RANGE},
    {"umpol 1;\nclass a { match size > 18446744073709551615; }\n", E_RANGE},
    {"umpol 1;\nclass a { match tag \"\"; }\n", E_EMPTY_PATTERN},
    {"umpol 1;\nclass a { match any; prefetch gpu on exit \"\"; }\n", E_EMPTY_PATTERN},
    {"umpol 1;\nclass a { match any; prefetch on alloc; }\n", E_PREFETCH_NO_LOC},
    {"umpol 1;\nslab 2MiB;\nslab 4MiB;\nclass a { match any; }\n", E_DUP_GLOBAL},
    {"umpol 1;\nclass a { priority 3; }\n", E_NO_MATCH},
    {"umpol 1;\nclass a { match api malloc; }\n", E_UNKNOWN_API},
    {"umpol 1;\nclass a { match size > 3GB; }\n", E_UNKNOWN_UNIT},
    {"umpol 1;\nclass a { match device 5000; }\n", E_OUT_OF_RANGE},
    {"umpol 1;\nclass a { match any; place host numa 2000; }\n", E_OUT_OF_RANGE},
    {"umpol 1;\nclass a { match any; access none; }\n", E_BAD_LOCATION},
    {"umpol 1;\n", E_NO_CLASSES},
    {"umpol 1;\nclass a { match phase \"f*\" and saved; memory device; }\n", E_SAVED_DEVICE},
    {"umpol 1;\nclass a { match not (size < 1 or not saved); memory device; }\n", E_SAVED_DEVICE},
    {"umpol 1;\nclass a { match savd; }\n", E_UNKNOWN_KEYWORD},
};

/* `saved`: false when a block is allocated, true when it is classified
 * again after umpol_note_saved; `not saved` in a device class is no error. */
static void test_saved_predicate(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "class acts { match phase \"forward*\" and saved; priority 1; }\n"
                             "class temps { match not saved and phase \"forward*\"; memory device; }\n"
                             "class rest { match any; }\n");
    const struct program *p = pol.program;
    assert_non_null(p);
    assert_int_equal(pol.diags.errors, 0);
    assert_true(p->classes[0].takes_saved);
    assert_false(p->classes[1].takes_saved);
    assert_false(p->classes[2].takes_saved);
    assert_true(p->filters[0].need_saved);
    assert_false(p->filters[1].need_saved);
    uint64_t fwd[1] = {0};
    program_match_phase(p, "forward.layer3", fwd);
    struct alloc_ctx ctx = {.size = 4096, .api = API_CUDA_MALLOC, .phase_bits = fwd};
    assert_int_equal(program_classify(p, &ctx), 1);
    ctx.saved = true;
    assert_int_equal(program_classify(p, &ctx), 0);
    uint64_t none[1] = {0};
    ctx.phase_bits = none;
    assert_int_equal(program_classify(p, &ctx), 2); /* saved outside forward */
    char *text = explained(&pol);
    assert_non_null(strstr(text, "match:    phase \"forward*\" and saved\n"));
    assert_non_null(strstr(text, "match:    not saved and phase \"forward*\"\n"));
    assert_non_null(strstr(text, "saved:    a block reported saved"));
    assert_non_null(strstr(text, "\"name\":\"acts\",\"line\":2,\"match\":\"phase \\\"forward*\\\" and "
                                 "saved\",\"always\":false,\"takes_saved\":true"));
    assert_non_null(strstr(text, "\"name\":\"temps\""));
    assert_null(strstr(strstr(text, "\"name\":\"temps\""), "\"takes_saved\":true"));
    free(text);
    policy_free(&pol);
    /* The error points at the `saved` that lets blocks in, with a note on `memory device`. */
    pol = load("umpol 1;\nclass a { match size > 1 and saved; memory device; }\n");
    assert_null(pol.program);
    assert_int_equal(pol.diags.errors, 1);
    const struct diag *d = NULL;
    for (size_t i = 0; i < pol.diags.count; i++)
        if (pol.diags.items[i].code == E_SAVED_DEVICE)
            d = &pol.diags.items[i];
    assert_non_null(d);
    assert_int_equal(d->loc.first_line, 2);
    assert_int_equal(d->loc.first_column, 30);
    assert_int_equal(d->loc.last_column, 35);
    assert_true(d->has_note);
    assert_int_equal(d->note_loc.first_column, 37);
    policy_free(&pol);
}

/* W106: a class whose terms are all among a later saved class's takes its
 * blocks first; a class that says something about `saved`, or that the
 * saved class does not imply, does not. */
static void test_saved_class_shadowed(void **state)
{
    (void)state;
    static const struct {
        const char *before, *saved_class;
        bool warned;
    } cases[] = {
        {"phase \"f*\"", "phase \"f*\" and saved", true},
        {"phase \"f*\" and size >= 1MiB", "size >= 1MiB and saved and phase \"f*\"", true},
        {"phase \"f*\" and size >= 1MiB", "phase \"f*\" and saved", false},
        {"phase \"f*\" and not saved", "phase \"f*\" and saved", false},
        {"phase \"g*\"", "phase \"f*\" and saved", false},
        {"phase \"f*\" or tag \"t\"", "(phase \"f*\" or tag \"t\") and saved", true},
        {"tag \"t\"", "tag \"u\" and saved", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "umpol 1;\nclass a { match %s; }\nclass s { match %s; }\nclass r { match any; }\n",
                 cases[i].before, cases[i].saved_class);
        struct policy pol = load(text);
        assert_non_null(pol.program); /* a warning: still valid */
        if (has_code(&pol, W_SAVED_SHADOWED) != cases[i].warned)
            fail_msg("case %zu: W106 %s for: %s", i, cases[i].warned ? "missing" : "unexpected",
                     text);
        policy_free(&pol);
    }
    /* Saved class first: no warning. */
    struct policy pol = load("umpol 1;\nclass s { match phase \"f*\" and saved; }\n"
                             "class a { match phase \"f*\"; }\nclass r { match any; }\n");
    assert_false(has_code(&pol, W_SAVED_SHADOWED));
    policy_free(&pol);
}

static void test_check_rejects_each_error(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        struct policy pol = load(bad_cases[i].text);
        if (!has_code(&pol, bad_cases[i].code) || pol.program)
            fail_msg("case %zu: expected code %d for: %s", i, bad_cases[i].code,
                     bad_cases[i].text);
        policy_free(&pol);
    }
}

static void test_check_error_cap(void **state)
{
    (void)state;
    char text[8192] = "umpol 1;\n";
    for (int i = 0; i < 40; i++)
        strcat(text, "class a { bogus; }\n");
    struct policy pol = load(text);
    assert_true(has_code(&pol, E_TOO_MANY_ERRORS));
    assert_true(pol.diags.errors <= PARSE_MAX_ERRORS + 1);
    policy_free(&pol);
}

static size_t count_code(const struct policy *pol, enum diag_code code)
{
    size_t n = 0;
    for (size_t i = 0; i < pol->diags.count; i++)
        n += pol->diags.items[i].code == code;
    return n;
}

/* A policy as text made of COUNT copies of LINE after the header; the caller frees it. */
static char *repeated(const char *line, size_t count, const char *tail)
{
    size_t len = strlen("umpol 1;\n") + strlen(line) * count + strlen(tail) + 1;
    char *text = malloc(len), *p = text;
    assert_non_null(text);
    p += sprintf(p, "umpol 1;\n");
    for (size_t i = 0; i < count; i++)
        p += sprintf(p, "%s", line);
    strcpy(p, tail);
    return text;
}

/* Eight independent mistakes, syntax and semantic, all reported in one run. */
static void test_recovery_reports_every_mistake(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "budget gpu 120%;\n"
                             "class w {\n"
                             "    match size >= 64MB;\n"
                             "    place gpu\n"
                             "    priority 10;\n"
                             "}\n"
                             "Class s { match tag \"s\"; }\n"
                             "class o { match any; memory devices; prefetch on alloc; }\n"
                             "class w { match tag \"f\"; }\n"
                             "class k { match api cudaMaloc; }\n");
    assert_int_equal(pol.diags.errors, 8);
    static const enum diag_code want[] = {E_PERCENT,         E_UNKNOWN_UNIT,    E_SYNTAX,
                                          E_UNKNOWN_KEYWORD, E_UNKNOWN_KEYWORD, E_PREFETCH_NO_LOC,
                                          E_DUP_CLASS,       E_UNKNOWN_API};
    size_t n = 0;
    for (size_t i = 0; i < pol.diags.count; i++) /* errors in the order of the file */
        if (pol.diags.items[i].severity == DIAG_ERROR)
            assert_int_equal(pol.diags.items[i].code, want[n++]);
    assert_int_equal(n, 8);
    policy_free(&pol);
}

/* A missing ';' is placed right after the token that lacks it, and the
 * statement is kept: no follow-on error, the next line is read normally. */
static void test_recovery_missing_semicolon_after_token(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass a {\n    place gpu\n    match any;\n}\n");
    assert_int_equal(pol.diags.errors, 1);
    const struct diag *d = &pol.diags.items[0];
    assert_int_equal(d->code, E_SYNTAX);
    assert_int_equal(d->loc.first_line, 3);
    assert_int_equal(d->loc.first_column, 14); /* just past "gpu" */
    assert_non_null(strstr(d->message, "missing ';' after 'gpu'"));
    assert_false(has_code(&pol, E_NO_MATCH)); /* `match any;` on the next line was read */
    policy_free(&pol);

    pol = load("umpol 1\nclass a { match phase \"x\" }\n");
    assert_int_equal(pol.diags.errors, 2);
    assert_int_equal(pol.diags.items[0].loc.first_line, 1);
    assert_int_equal(pol.diags.items[0].loc.first_column, 8);
    assert_non_null(strstr(pol.diags.items[1].message, "missing ';' after \"x\""));
    policy_free(&pol);
}

/* A misspelt or capitalised keyword gives one error, and the block after it
 * is still read for mistakes of its own. */
static void test_recovery_misspelt_class_keyword(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nClass a { match any; }\n");
    assert_int_equal(pol.diags.errors, 1);
    assert_int_equal(pol.diags.items[0].code, E_UNKNOWN_KEYWORD);
    assert_non_null(strstr(pol.diags.items[0].message, "did you mean 'class'?"));
    policy_free(&pol);
    pol = load("umpol 1;\nklass a { match api cudaMaloc; }\nclass rest { match any; }\n");
    assert_int_equal(pol.diags.errors, 2);
    assert_true(has_code(&pol, E_UNKNOWN_API));
    policy_free(&pol);
}

/* A class left open ends before the next statement; the next class is read. */
static void test_recovery_unclosed_class(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass a { match size > 1;\nclass b { match tag; }\n");
    assert_int_equal(pol.diags.errors, 2);
    assert_non_null(strstr(pol.diags.items[0].message, "class 'a' is not closed"));
    assert_true(pol.diags.items[0].has_note);
    assert_int_equal(pol.diags.items[1].loc.first_line, 3); /* `tag;` in class b */
    policy_free(&pol);
}

/* 65,000 copies of one class name: a capped list, not 129,998 diagnostics. */
static void test_check_semantic_error_cap(void **state)
{
    (void)state;
    char *text = repeated("class a { match any; }\n", 65000, "");
    struct policy pol = load(text);
    free(text);
    assert_null(pol.program);
    assert_int_equal(count_code(&pol, E_DUP_CLASS), DIAG_MAX_ERRORS);
    assert_int_equal(count_code(&pol, E_TOO_MANY_ERRORS), 1);
    assert_true(pol.diags.count <= 2 * DIAG_MAX_ERRORS + 2);
    policy_free(&pol);
}

/* Warnings past the cap are counted, not kept. */
static void test_check_warning_cap(void **state)
{
    (void)state;
    char line[64];
    char *text = repeated("", 0, "class all { match any; }\n");
    size_t len = strlen(text);
    for (int i = 0; i < 200; i++) {
        snprintf(line, sizeof line, "class c%d { match any; }\n", i);
        text = realloc(text, len + strlen(line) + 1);
        assert_non_null(text);
        strcpy(text + len, line);
        len += strlen(line);
    }
    struct policy pol = load(text);
    free(text);
    assert_non_null(pol.program);
    assert_int_equal(pol.diags.warnings, 200);
    assert_int_equal(pol.diags.count, DIAG_MAX_WARNINGS);
    assert_int_equal(pol.diags.hidden_warnings, 200 - DIAG_MAX_WARNINGS);
    policy_free(&pol);
}

static bool only_node_zero(int node, const void *ctx)
{
    (void)ctx;
    return node == 0;
}

static struct policy load_on(const char *text, const struct policy_machine *m)
{
    char path[] = "/tmp/umpol-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct policy pol;
    policy_load_file_on(&pol, path, m);
    unlink(path);
    return pol;
}

/* --topology: W104 points at the location token; with no GPU visible, one
 * note says which GPU numbers went unchecked. */
static void test_check_machine(void **state)
{
    (void)state;
    static const char text[] = "umpol 1;\n"
                               "class a {\n"
                               "    match device 5;\n"
                               "    place gpu 3;\n"
                               "    access gpu, host numa 2;\n"
                               "}\n"
                               "class rest { match any; }\n";
    struct policy_machine two = {2, NULL, only_node_zero, NULL};
    struct policy pol = load_on(text, &two);
    assert_int_equal(count_code(&pol, W_TOPOLOGY), 3);
    assert_int_equal(pol.diags.notes, 0);
    const struct diag *place = &pol.diags.items[1];
    assert_int_equal(place->loc.first_line, 4);
    assert_int_equal(place->loc.first_column, 11); /* "gpu 3", not "class" */
    assert_non_null(strstr(place->message, "no GPU 3 (it has 2)"));
    assert_non_null(pol.program);
    policy_free(&pol);

    struct policy_machine none = {-1, "no CUDA driver", only_node_zero, NULL};
    pol = load_on(text, &none);
    assert_int_equal(pol.diags.notes, 1);
    assert_int_equal(pol.diags.warnings, 1); /* the NUMA node is still checked */
    const struct diag *note = &pol.diags.items[0];
    assert_int_equal(note->severity, DIAG_NOTE);
    assert_int_equal(note->loc.first_line, 3);
    assert_string_equal(note->message, "no GPU visible (no CUDA driver): GPU numbers not checked "
                                       "(device 5, and 1 more)");
    assert_non_null(pol.program);
    policy_free(&pol);
}

/* What `umpol explain` prints for POL, then its --json form (free it). */
static void test_program_explain_default_cap(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass a { match any; }\n");
    char *text = explained(&pol);
    assert_non_null(strstr(text, "budget gpu:   none\n"));
    assert_non_null(strstr(text, "cap managed:  90% of each GPU's memory (default)\n"));
    assert_non_null(strstr(text, "\"cap_managed\":{\"percent\":90,\"default\":true}"));
    free(text);
    policy_free(&pol);
    pol = load("umpol 1;\ncap managed 50%;\nbudget gpu 8GiB;\nclass a { match any; }\n");
    text = explained(&pol);
    assert_non_null(strstr(text, "cap managed:  50% of each GPU's memory\n"));
    assert_non_null(strstr(text, "budget gpu:   8 GiB per GPU\n"));
    free(text);
    policy_free(&pol);
}

/* A class's doc comment: the whole-line comments directly above `class`. */
static void test_program_class_doc_comments(void **state)
{
    (void)state;
    struct policy pol = load("# the file's header, then a blank line\n"
                             "umpol 1;\n"
                             "\n"
                             "# Weights: read by every step.\n"
                             "  #   indented, and a blank comment line:\n"
                             "#\n"
                             "#no space after the hash   \n"
                             "class a { match size >= 1MiB; }\n"
                             "# not above b: a blank line follows\n"
                             "\n"
                             "class b { match size >= 1KiB; }  # after a token\n"
                             "class c {\n"
                             "    match phase \"x\";\n"
                             "    # inside the body, before its '}'\n"
                             "}\n"
                             "class d { match tag \"t\"; } # a trailing comment\n"
                             "class e { match any; }\n");
    assert_non_null(pol.program);
    assert_int_equal(pol.program->class_count, 5);
    assert_string_equal(pol.program->classes[0].doc, "Weights: read by every step.\n"
                                                     "  indented, and a blank comment line:\n"
                                                     "\n"
                                                     "no space after the hash");
    for (size_t i = 1; i < 5; i++)
        assert_null(pol.program->classes[i].doc);
    char *text = explained(&pol);
    assert_non_null(strstr(text, "     doc:      Weights: read by every step.\n"
                                 "                 indented, and a blank comment line:\n"
                                 "\n"
                                 "               no space after the hash\n"
                                 "  2  b"));
    assert_non_null(strstr(text, "\"doc\":\"Weights: read by every step.\\n  indented"));
    assert_non_null(strstr(strstr(text, "\"name\":\"b\""), "\"doc\":null"));
    free(text);
    policy_free(&pol);
}

static void test_check_warnings_keep_policy_valid(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass a { match size >= 0; }\nclass b { match any; }\n");
    assert_non_null(pol.program);
    assert_true(has_code(&pol, W_UNREACHABLE));
    policy_free(&pol);
    pol = load("umpol 1;\nclass a { match size >= 1GiB; }\n");
    assert_non_null(pol.program);
    assert_true(has_code(&pol, W_NO_CATCH_ALL));
    policy_free(&pol);
    pol = load("umpol 1;\nclass a { match any; place host; prefetch gpu on alloc; }\n");
    assert_true(has_code(&pol, W_HOST_NO_ACCESS));
    policy_free(&pol);
    pol = load("umpol 1;\nclass a { match any; place host; access gpu; prefetch gpu on alloc; }\n");
    assert_false(has_code(&pol, W_HOST_NO_ACCESS));
    assert_int_equal(pol.diags.count, 0);
    policy_free(&pol);
}

/* ---- compile and classify ---- */

static const char classify_policy[] = "umpol 1;\n"
                                      "budget gpu 24GiB;\n"
                                      "cap managed 90%;\n"
                                      "slab 128MiB;\n"
                                      "class huge { match size > 1GiB; }\n"
                                      "class kv { match tag \"kv\" and not api cudaMalloc; }\n"
                                      "class opt { match phase \"optimizer*\" or phase \"adam\"; }\n"
                                      "class second_gpu { match device 1 and size 1MiB..1GiB; }\n"
                                      "class early { match nth < 10; }\n"
                                      "class exact { match size == 4096 or size != 4096 and "
                                      "api cudaMallocManaged; }\n"
                                      "class rest { match any; memory device; }\n";

/* `learn step "GLOB";` names the phase that starts a step; `learn step;`
 * leaves the step to be found in the job's repetition. */
static void test_program_learn_step(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nlearn step \"forward\";\nclass a { match any; }\n");
    assert_true(pol.program->step_glob >= 0);
    assert_false(pol.program->step_by_repetition);
    policy_free(&pol);
    pol = load("umpol 1;\nlearn step;\nclass a { match any; }\n");
    assert_int_equal(pol.program->step_glob, -1);
    assert_true(pol.program->step_by_repetition);
    char *text = explained(&pol);
    assert_non_null(strstr(text, "learn step:   found in the repetition of the job's allocations"));
    assert_non_null(strstr(text, "\"learn_step\":null"));
    free(text);
    policy_free(&pol);
}

static void test_program_globals(void **state)
{
    (void)state;
    struct policy pol = load(classify_policy);
    const struct program *p = pol.program;
    assert_non_null(p);
    assert_true(p->budget_gpu.given && !p->budget_gpu.percent);
    assert_int_equal(p->budget_gpu.value, 24ull << 30);
    assert_true(p->cap_managed.given && p->cap_managed.percent);
    assert_int_equal(p->cap_managed.value, 90);
    assert_int_equal(p->slab_bytes, 128ull << 20);
    assert_int_equal(p->class_count, 7);
    assert_string_equal(p->classes[6].name, "rest");
    assert_int_equal(p->classes[6].memory, MEMORY_DEVICE);
    assert_true(p->classes[6].always);
    assert_false(p->classes[0].always);
    assert_false(p->budget_counts_card);
    policy_free(&pol);
    /* `budget card`: the same limit, counting the card's own figure. */
    pol = load("umpol 1;\nbudget card 60%;\nclass a { match any; memory device; }\n");
    assert_non_null(pol.program);
    assert_true(pol.program->budget_gpu.given && pol.program->budget_gpu.percent);
    assert_int_equal(pol.program->budget_gpu.value, 60);
    assert_true(pol.program->budget_counts_card);
    assert_int_equal(pol.diags.errors + pol.diags.warnings, 0);
    char *text = explained(&pol);
    assert_non_null(strstr(text, "budget card:  60% of each GPU's memory"));
    assert_non_null(strstr(text, "\"budget_gpu\":{\"percent\":60},\"budget_counts_card\":true"));
    free(text);
    policy_free(&pol);
    /* Managed memory under it: W110 at the class; twice, or of 0 bytes: errors naming it. */
    pol = load("umpol 1;\nbudget card 8GiB;\nclass a { match any; }\n");
    assert_non_null(pol.program);
    assert_int_equal(pol.diags.warnings, 1);
    assert_int_equal(pol.diags.items[0].code, W_MANAGED_CARD);
    assert_int_equal(pol.diags.items[0].loc.first_line, 3);
    policy_free(&pol);
    pol = load("umpol 1;\nbudget card 8GiB;\nbudget card 7GiB;\nclass a { match any; memory device; }\n");
    assert_null(pol.program);
    assert_int_equal(pol.diags.items[0].code, E_DUP_GLOBAL);
    assert_non_null(strstr(pol.diags.items[0].message, "'budget card' given twice"));
    policy_free(&pol);
    pol = load("umpol 1;\nbudget card 0;\nclass a { match any; memory device; }\n");
    assert_null(pol.program);
    assert_non_null(strstr(pol.diags.items[0].message, "'budget card' of 0 bytes"));
    policy_free(&pol);
    pol = load("umpol 1;\nbudget crad 8GiB;\nclass a { match any; memory device; }\n");
    assert_null(pol.program);
    assert_non_null(strstr(pol.diags.items[0].message, "did you mean 'card'?"));
    policy_free(&pol);
}

static void test_program_classify_first_match_wins(void **state)
{
    (void)state;
    struct policy pol = load(classify_policy);
    const struct program *p = pol.program;
    const unsigned M = API_CUDA_MALLOC, A = API_CUDA_MALLOC_ASYNC, U = API_CUDA_MALLOC_MANAGED;
    assert_int_equal(classify(p, (1ull << 30) + 1, M, 0, 100, NULL, NULL), 0);
    /* huge wins over kv even when tagged: first match wins. */
    assert_int_equal(classify(p, 2ull << 30, A, 0, 100, NULL, "kv"), 0);
    assert_int_equal(classify(p, 4096, A, 0, 100, NULL, "kv"), 1);
    assert_int_equal(classify(p, 4096, M, 0, 100, NULL, "kv"), 5); /* not api cudaMalloc */
    assert_int_equal(classify(p, 1000, A, 0, 100, "optimizer.step", NULL), 2);
    assert_int_equal(classify(p, 1000, A, 0, 100, "adam", NULL), 2);
    assert_int_equal(classify(p, 1000, A, 0, 100, "adamw", NULL), 6);
    assert_int_equal(classify(p, 1ull << 20, A, 1, 100, NULL, NULL), 3);
    assert_int_equal(classify(p, (1ull << 20) - 1, A, 1, 100, NULL, NULL), 6);
    assert_int_equal(classify(p, 1ull << 20, A, 0, 100, NULL, NULL), 6);
    assert_int_equal(classify(p, 100, A, 0, 9, NULL, NULL), 4);
    assert_int_equal(classify(p, 100, A, 0, 10, NULL, NULL), 6);
    assert_int_equal(classify(p, 4096, A, 0, 10, NULL, NULL), 5);
    assert_int_equal(classify(p, 8192, U, 0, 10, NULL, NULL), 5);
    assert_int_equal(classify(p, 8192, A, 0, 10, NULL, NULL), 6);
    policy_free(&pol);
}

static void test_program_no_match_is_minus_one(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\nclass big { match size >= 1MiB; }\n");
    assert_non_null(pol.program);
    assert_int_equal(classify(pol.program, 100, API_CUDA_MALLOC, 0, 0, NULL, NULL), -1);
    assert_int_equal(classify(pol.program, 1 << 20, API_CUDA_MALLOC, 0, 0, NULL, NULL), 0);
    policy_free(&pol);
}

static void test_program_interns_patterns(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "class a { match phase \"fwd*\"; prefetch gpu on enter \"fwd*\";\n"
                             "          prefetch host on exit \"bwd\"; access gpu; place host; }\n"
                             "class b { match tag \"kv\"; prefetch gpu on mark \"hot\"; }\n"
                             "class c { match tag \"kv\" or phase \"bwd\"; }\n");
    const struct program *p = pol.program;
    assert_non_null(p);
    assert_int_equal(p->phase_glob_count, 2); /* fwd*, bwd */
    assert_int_equal(p->tag_count, 1);
    assert_int_equal(p->mark_count, 1);
    assert_int_equal(p->prefetch_count, 3);
    assert_int_equal(p->classes[0].prefetch_count, 2);
    assert_int_equal(p->prefetches[0].trigger, TRIGGER_ENTER);
    assert_string_equal(p->phase_globs[p->prefetches[0].pattern], "fwd*");
    assert_int_equal(p->prefetches[1].dest.kind, LOC_HOST);
    assert_int_equal(program_mark_index(p, "hot"), 0);
    assert_int_equal(program_mark_index(p, "cold"), -1);
    uint64_t bits[1] = {0};
    assert_int_equal(program_match_phase(p, "fwd.layer1", bits), 1);
    assert_int_equal(bits[0], 1);
    policy_free(&pol);
}

static void test_program_explain_lists_classes(void **state)
{
    (void)state;
    struct policy pol = load(classify_policy);
    char *text = explained(&pol);
    assert_non_null(strstr(text, "budget gpu:   24 GiB"));
    assert_non_null(strstr(text, "size >= 1073741825 B")); /* size > 1GiB */
    assert_non_null(strstr(text, "tag \"kv\" and not api cudaMalloc"));
    assert_non_null(strstr(text, "size == 4 KiB or not size == 4 KiB and api cudaMallocManaged"));
    assert_non_null(strstr(text, "  7  rest"));
    free(text);
    policy_free(&pol);
}

static void test_program_large_policy(void **state)
{
    (void)state;
    /* 2,000 classes with distinct phases: interning and checks stay correct. */
    size_t cap = 2000 * 80 + 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "umpol 1;\n");
    for (int i = 0; i < 2000; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "class c%d { match phase \"p%d.*\" and size >= %dKiB; }\n", i, i, i);
    struct policy pol = load(text);
    assert_non_null(pol.program);
    assert_int_equal(pol.program->phase_glob_count, 2000);
    assert_int_equal(classify(pol.program, 1ull << 30, API_CUDA_MALLOC, 0, 0, "p1999.x", NULL), 1999);
    policy_free(&pol);
    free(text);
}

/* The classifier's filters are only shortcuts: on random contexts it must agree
 * with evaluating every predicate in full. */
static void test_program_filters_agree_with_full_eval(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "class a { match not size >= 1MiB and not api cudaMalloc; }\n"
                             "class b { match (device 1 or device 1) and size 10..20; }\n"
                             "class c { match device 1 and device 2; }\n"
                             "class d { match phase \"x*\" and (tag \"t\" or size < 100); }\n"
                             "class e { match not (size <= 4096) or api pluggable; }\n"
                             "class f { match not size 10..20 and nth >= 5; }\n"
                             "class g { match tag \"t\" and phase \"y\" or phase \"x1\"; }\n"
                             "class h { match saved and size < 100 or saved and tag \"t\"; }\n"
                             "class i { match not saved and phase \"y\"; }\n"
                             "class j { match saved or api pluggable; }\n"
                             "class k { match spare and size > 10 or not spare and tag \"t\"; }\n");
    const struct program *p = pol.program;
    assert_non_null(p);
    uint64_t seed = 7, phase_sets[4][1] = {{0}, {0}, {0}, {0}}, tag_sets[2][1] = {{0}, {1}};
    program_match_phase(p, "x1", phase_sets[1]);
    program_match_phase(p, "y", phase_sets[2]);
    program_match_phase(p, "x9", phase_sets[3]);
    for (int i = 0; i < 200000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t sizes[] = {0, 1, 10, 15, 20, 21, 99, 100, 4096, 4097, 1 << 20, (1 << 20) - 1};
        struct alloc_ctx ctx = {sizes[(seed >> 10) % 12], (seed >> 20) % 10, 1u << ((seed >> 30) % 4),
                                (int)((seed >> 40) % 3), phase_sets[(seed >> 50) % 4],
                                tag_sets[(seed >> 60) % 2], (seed >> 62) & 1,
                                (seed >> 5) % 3 * 2048};
        int want = -1;
        for (size_t k = 0; k < p->class_count && want < 0; k++)
            if (program_class_matches(p, k, &ctx))
                want = (int)k;
        assert_int_equal(program_classify(p, &ctx), want);
    }
    policy_free(&pol);
}

/* `memory movable`: placed by 'place', moved by its prefetch rules, and said
 * so by explain. */
static void test_movable_memory(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "class states { match phase \"optimizer*\"; memory movable;\n"
                             "  place host numa 0; prefetch gpu on enter \"optimizer*\";\n"
                             "  prefetch host on exit \"optimizer*\"; }\n"
                             "class rest { match any; memory device; }\n");
    const struct program *p = pol.program;
    assert_non_null(p);
    assert_int_equal(pol.diags.errors + pol.diags.warnings, 0);
    assert_int_equal(p->classes[0].memory, MEMORY_MOVABLE);
    assert_int_equal(p->classes[0].prefetch_count, 2);
    assert_string_equal(memory_kind_name(p->classes[0].memory), "movable");
    char *text = explained(&pol);
    assert_non_null(strstr(text, "states  movable  host numa 0"));
    assert_non_null(strstr(text, "movable:  its slabs move whole"));
    free(text);
    policy_free(&pol);
    /* Without a prefetch rule it never moves: a warning where 'memory movable' is. */
    pol = load("umpol 1;\nclass a { match size > 1; memory movable; }\nclass rest { match any; }\n");
    assert_non_null(pol.program);
    assert_int_equal(pol.diags.errors, 0);
    assert_int_equal(pol.diags.warnings, 1);
    assert_int_equal(pol.diags.items[0].code, W_MOVABLE_STILL);
    assert_int_equal(pol.diags.items[0].loc.first_line, 2);
    policy_free(&pol);
}

/* `spare`: true while the room the runtime measured holds the block; read
 * only by a class that names it; W108 where the class never takes the GPU. */
static void test_spare_predicate(void **state)
{
    (void)state;
    struct policy pol = load("umpol 1;\n"
                             "class opt_gpu { match phase \"optimizer*\" and spare; memory device; }\n"
                             "class opt { match phase \"optimizer*\"; memory host; }\n"
                             "class rest { match any; }\n");
    const struct program *p = pol.program;
    assert_non_null(p);
    assert_int_equal(pol.diags.errors + pol.diags.warnings, 0);
    assert_true(p->uses_spare);
    assert_true(p->classes[0].uses_spare);
    assert_false(p->classes[1].uses_spare);
    uint64_t opt[1] = {0};
    program_match_phase(p, "optimizer.step", opt);
    struct alloc_ctx ctx = {.size = 4096, .api = API_CUDA_MALLOC, .phase_bits = opt};
    assert_int_equal(program_classify(p, &ctx), 1); /* no room */
    ctx.spare_bytes = 4095;
    assert_int_equal(program_classify(p, &ctx), 1);
    ctx.spare_bytes = 4096;
    assert_int_equal(program_classify(p, &ctx), 0);
    char *text = explained(&pol);
    assert_non_null(strstr(text, "match:    phase \"optimizer*\" and spare\n"));
    assert_non_null(strstr(text, "spare:    takes a block while the GPU's budget has room"));
    assert_non_null(strstr(text, "\"takes_saved\":false,\"uses_spare\":true"));
    free(text);
    policy_free(&pol);
    pol = load("umpol 1;\nclass rest { match any; }\n");
    assert_false(pol.program->uses_spare);
    policy_free(&pol);
    /* Pinned host memory never takes the GPU's room: a warning on `spare`. */
    pol = load("umpol 1;\nclass a { match size > 1 and spare; memory host; }\n"
               "class rest { match any; }\n");
    assert_non_null(pol.program);
    assert_int_equal(pol.diags.errors, 0);
    assert_int_equal(pol.diags.warnings, 1);
    assert_int_equal(pol.diags.items[0].code, W_SPARE_HOST);
    assert_int_equal(pol.diags.items[0].loc.first_line, 2);
    assert_int_equal(pol.diags.items[0].loc.first_column, 30);
    policy_free(&pol);
}

static void test_diag_suggest(void **state)
{
    (void)state;
    static const char *const words[] = {"prefetch", "priority", "place"};
    assert_string_equal(diag_suggest("prefech", words, 3), "prefetch");
    assert_string_equal(diag_suggest("priorty", words, 3), "priority");
    assert_null(diag_suggest("zzzzzzzz", words, 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_match_cases),
        cmocka_unit_test(test_glob_pathological_is_fast),
        cmocka_unit_test(test_spare_predicate),
        cmocka_unit_test(test_movable_memory),
        cmocka_unit_test(test_strset_interns),
        cmocka_unit_test(test_source_lines_and_columns),
        cmocka_unit_test(test_source_rejects_nul_and_bad_utf8),
        cmocka_unit_test(test_source_size_limit),
        cmocka_unit_test(test_check_rejects_each_error),
        cmocka_unit_test(test_check_error_cap),
        cmocka_unit_test(test_recovery_reports_every_mistake),
        cmocka_unit_test(test_recovery_missing_semicolon_after_token),
        cmocka_unit_test(test_recovery_misspelt_class_keyword),
        cmocka_unit_test(test_recovery_unclosed_class),
        cmocka_unit_test(test_check_semantic_error_cap),
        cmocka_unit_test(test_check_warning_cap),
        cmocka_unit_test(test_check_machine),
        cmocka_unit_test(test_program_explain_default_cap),
        cmocka_unit_test(test_program_learn_step),
        cmocka_unit_test(test_program_class_doc_comments),
        cmocka_unit_test(test_check_warnings_keep_policy_valid),
        cmocka_unit_test(test_program_globals),
        cmocka_unit_test(test_program_classify_first_match_wins),
        cmocka_unit_test(test_program_no_match_is_minus_one),
        cmocka_unit_test(test_program_interns_patterns),
        cmocka_unit_test(test_program_explain_lists_classes),
        cmocka_unit_test(test_program_large_policy),
        cmocka_unit_test(test_program_filters_agree_with_full_eval),
        cmocka_unit_test(test_diag_suggest),
        cmocka_unit_test(test_saved_predicate),
        cmocka_unit_test(test_saved_class_shadowed),
    };
    return cmocka_run_group_tests_name("lang", tests, NULL, NULL);
}
