/* The policy front end when memory runs out: every allocation it makes is
 * failed in turn (malloc, calloc and realloc are wrapped at link time), for
 * every policy in policies/, tests/policies/ and tests/preload/. Each load
 * either says why it failed (an error, never a valid policy) or, where only
 * a warning's text was lost, compiles the very program the load without a
 * failure compiled (explain's text and JSON the same): a policy that loses
 * its budget or a class to a failed allocation must not load as valid. Run
 * under AddressSanitizer (CI's sanitizer build), it also finds what a failed
 * load leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "lang/policy.h"

/* What explain says of a valid POL, text then JSON (free it), with no
 * allocation failed. */
static char *explained(const struct policy *pol)
{
    long saved = fail_alloc_at;
    fail_alloc_at = -1;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    program_explain(out, pol->program);
    program_explain_json(out, pol->program);
    fclose(out);
    fail_alloc_at = saved;
    return text;
}

/* LIST says memory ran out (E027), or lost a diagnostic it could not store. */
static bool out_of_memory_said(const struct diag_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].code == E_IO) return true;
    return list->count < list->errors + list->warnings + list->notes - list->hidden_warnings;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len == cap) {
            cap = cap ? cap * 2 : 4096;
            text = realloc(text, cap);
            assert_non_null(text);
        }
        size_t got = fread(text + *len, 1, cap - *len, f);
        if (got == 0) break;
        *len += got;
    }
    fclose(f);
    return text;
}

/* Fail each allocation of loading PATH in turn; returns how many there were. */
static long sweep(const char *path)
{
    size_t len;
    char *text = read_file(path, &len);
    struct policy pol;
    enum policy_status want = policy_load_text(&pol, path, text, len);
    char *want_program = want == POLICY_VALID ? explained(&pol) : NULL;
    policy_free(&pol);
    long k = 0;
    for (;; k++) {
        fail_alloc_at = k;
        fail_alloc_calls = 0;
        enum policy_status got = policy_load_text(&pol, path, text, len);
        long made = fail_alloc_calls;
        fail_alloc_at = -1;
        if (made <= k) { /* no allocation left to fail: the load as without one */
            assert_int_equal(got, want);
            policy_free(&pol);
            break;
        }
        if (got == POLICY_VALID) {
            if (want != POLICY_VALID)
                fail_msg("%s: valid once allocation %ld failed, invalid without", path, k);
            char *program = explained(&pol);
            if (strcmp(program, want_program) != 0)
                fail_msg("%s: allocation %ld failed and the policy loaded as valid, but not "
                         "as it is:\n%s\nagainst\n%s",
                         path, k, program, want_program);
            free(program);
        } else if (pol.diags.errors == 0) {
            fail_msg("%s: allocation %ld failed: status %d with no error said", path, k, got);
        } else if (want == POLICY_VALID && !out_of_memory_said(&pol.diags)) {
            fail_msg("%s: allocation %ld failed: the policy was refused for another reason than "
                     "memory (E027)",
                     path, k);
        }
        policy_free(&pol);
    }
    free(want_program);
    free(text);
    return k;
}

/* Sweep every .umpol file in DIR (under top_srcdir); returns how many. */
static int sweep_dir(const char *dir)
{
    long points = 0;
    int files = fail_alloc_each_policy(dir, sweep, &points);
    print_message("%s: %d policies, %ld allocations failed in turn\n", dir, files, points);
    return files;
}

static void test_stock_policies(void **state)
{
    (void)state;
    assert_true(sweep_dir("policies") > 0);
}

static void test_bad_policies(void **state)
{
    (void)state;
    assert_true(sweep_dir("tests/policies/bad") > 0);
    assert_true(sweep_dir("tests/policies/regress") > 0);
}

static void test_stress_policy(void **state)
{
    (void)state;
    assert_true(sweep_dir("tests/preload") > 0);
}

/* The sweep itself fails a load: without it this test could pass by never
 * failing an allocation. */
static void test_sweep_fails_allocations(void **state)
{
    (void)state;
    const char *text = "umpol 1;\nbudget gpu 1GiB;\nclass w { match phase \"init*\"; }\n";
    fail_alloc_at = 0;
    fail_alloc_calls = 0;
    struct policy pol;
    enum policy_status got = policy_load_text(&pol, "t.umpol", text, strlen(text));
    fail_alloc_at = -1;
    assert_true(fail_alloc_calls > 0);
    assert_int_not_equal(got, POLICY_VALID);
    policy_free(&pol);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_fails_allocations),
        cmocka_unit_test(test_stock_policies),
        cmocka_unit_test(test_bad_policies),
        cmocka_unit_test(test_stress_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
