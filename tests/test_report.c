/* Unit tests of the report module (src/report/): the reader against valid,
 * hostile and malformed reports and files that are not reports; and, with
 * the runtime built, the writer's reports read back through the reader. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lang/json.h"
#include "lang/text.h"
#include "report/report.h"

#ifdef TEST_REPORT_WRITER
#include "fake/fake_api.h"
#include "fake/fake_cudart.h"
#include "lang/api.h"
#include "lang/policy.h"
#include "runtime/phase.h"
#include "runtime/runtime.h"
#endif

static enum report_status parse(struct report *r, const char *text, char *why, size_t len)
{
    return report_parse(r, text, strlen(text), why, len);
}

static void test_report_reads_a_recorded_report(void **state)
{
    (void)state;
    const char *text =
        "{\"umpol_report\": 1, \"pid\": 7, \"rank\": 2,"
        " \"totals\": {\"allocations\": 18446744073709551615, \"frees\": 1e3,"
        "   \"held_ns\": 900, \"slab_grow_ns\": 400, \"slab_release_ns\": 300,"
        "   \"remap_wait_ns\": 100},"
        " \"devices\": [{\"device\": 0, \"total_bytes\": 100, \"budget_bytes\": null,"
        "   \"cap_bytes\": 90, \"managed_bytes\": 1, \"resident_bytes\": 0, \"host_numa_id\": 0}],"
        " \"classes\": [{\"name\": \"w\", \"memory\": \"device\", \"peak_bytes\": 4096,"
        "   \"um\": {\"gpu_faults\": 3},"
        "   \"policy\": {\"place\": \"gpu\", \"access\": [], \"prefetch\": [\"gpu on alloc\"],"
        "   \"read_mostly\": true, \"priority\": 5}}],"
        " \"phases\": [{\"name\": \"f\\u00e9\", \"entries\": 2, \"total_ns\": 10}],"
        " \"timeline\": {\"spans\": [{\"phase\": 0, \"start_ns\": 1, \"end_ns\": null, \"depth\": "
        "0}],"
        "   \"events\": [{\"t_ns\": 3, \"kind\": \"evict\", \"class\": 0, \"device\": 0,"
        "   \"bytes\": 8, \"resident_bytes\": 0}]},"
        " \"sites_dropped\": 3, \"sites\": ["
        "  {\"class\": 0, \"phase\": 0, \"allocations\": 4, \"frees\": 3, \"bytes\": 16384,"
        "   \"min_size\": 4000, \"max_size\": 4096, \"peak_live_bytes\": 8192,"
        "   \"lifetime_ns\": 99, \"first_ns\": 5, \"last_ns\": 5},"
        "  {\"class\": 0, \"phase\": null, \"allocations\": 1, \"frees\": 0, \"bytes\": 1,"
        "   \"min_size\": 1, \"max_size\": 1, \"peak_live_bytes\": 1, \"lifetime_ns\": 0,"
        "   \"first_ns\": 7, \"last_ns\": 8}]}";
    struct report r;
    char why[256] = "";
    assert_int_equal(parse(&r, text, why, sizeof why), REPORT_OK);
    assert_int_equal(r.version, REPORT_VERSION);
    assert_int_equal(r.pid, 7);
    assert_int_equal(r.rank, 2);
    assert_true(r.totals[TOT_ALLOCATIONS] == UINT64_MAX);
    assert_int_equal(r.totals[TOT_FREES], 1000);
    /* The job's threads' time inside the runtime, and its parts. */
    assert_int_equal(r.totals[TOT_HELD_NS], 900);
    assert_int_equal(r.totals[TOT_SLAB_GROW_NS], 400);
    assert_int_equal(r.totals[TOT_SLAB_RELEASE_NS], 300);
    assert_int_equal(r.totals[TOT_REMAP_WAIT_NS], 100);
    assert_int_equal(r.totals[TOT_EVICT_NS], 0); /* absent reads as 0 */
    assert_int_equal(r.device_count, 1);
    assert_false(r.devices[0].has_budget);
    assert_int_equal(r.class_count, 1);
    assert_int_equal(r.classes[0].memory, REPORT_MEMORY_DEVICE);
    assert_int_equal(r.classes[0].v[RC_PEAK_BYTES], 4096);
    assert_int_equal(r.classes[0].v[RC_ALLOCATIONS], 0); /* absent reads as 0 */
    assert_true(r.profiled && r.classes[0].has_um);
    assert_int_equal(r.classes[0].um[UM_GPU_FAULTS], 3);
    assert_true(r.classes[0].policy.present && r.classes[0].policy.read_mostly);
    assert_string_equal(r.classes[0].policy.prefetch[0], "gpu on alloc");
    assert_string_equal(r.phases[0].name, "f\xc3\xa9");
    assert_true(r.spans[0].open);
    assert_int_equal(r.events[0].kind, EV_EVICT);
    assert_true(r.has_sites);
    assert_int_equal(r.sites_dropped, 3);
    assert_int_equal(r.site_count, 2);
    assert_int_equal(r.sites[0].class_index, 0);
    assert_int_equal(r.sites[0].phase, 0);
    assert_int_equal(r.sites[0].allocations, 4);
    assert_int_equal(r.sites[0].frees, 3);
    assert_int_equal(r.sites[0].min_size, 4000);
    assert_int_equal(r.sites[0].peak_live_bytes, 8192);
    assert_int_equal(r.sites[0].lifetime_ns, 99);
    assert_int_equal(r.sites[1].phase, -1); /* outside every phase */
    assert_int_equal(r.sites[1].last_ns, 8);
    report_free(&r);
    /* Reports written before the sites table: read, without sites. */
    assert_int_equal(parse(&r, "{\"umpol_report\": 1}", why, sizeof why), REPORT_OK);
    assert_false(r.has_sites);
    assert_int_equal(r.site_count, 0);
    report_free(&r);
}

/* Each bad report, and the words its message must hold. */
static const struct {
    const char *text;
    const char *why;
} bad_reports[] = {
    {"{\"umpol_report\": 2}", "unsupported report version 2 (this umpol reads 1)"},
    {"{\"umpol_report\": 0, \"classes\": []}", "unsupported report version 0 (this umpol reads 1)"},
    {"{\"something\": \"else\"}", "not an umpol report"},
    {"[1, 2]", "not an umpol report"},
    {"{\"umpol_report\": \"1\"}", "umpol_report: expected a version number"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": NaN}}", "NaN and Infinity are not JSON"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": inf}}", "NaN and Infinity are not JSON"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": -Infinity}}", "NaN and Infinity"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": 1e400}}", "number out of range"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": -1}}",
     "totals.allocations: expected an integer"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": 1.5}}",
     "totals.allocations: expected an integer"},
    {"{\"umpol_report\": 1, \"totals\": {\"allocations\": 18446744073709551616}}",
     "expected an integer"},
    {"{\"umpol_report\": 1, \"rank\": 1e300}", "rank: expected an integer from 0 to 2147483647"},
    {"{\"umpol_report\": 1, \"pid\": -5}", "pid: expected an integer"},
    {"{\"umpol_report\": 1, \"phases\": [{\"name\": \"a\"}], \"timeline\": {\"spans\": "
     "[{\"phase\": 1e30, \"start_ns\": 0}]}}",
     "timeline.spans[0].phase: expected an integer"},
    {"{\"umpol_report\": 1, \"phases\": [{\"name\": \"a\"}], \"timeline\": {\"spans\": "
     "[{\"phase\": 1, \"start_ns\": 0}]}}",
     "timeline.spans[0].phase: no phase 1 in this report (it has 1)"},
    {"{\"umpol_report\": 1, \"timeline\": {\"events\": [{\"kind\": \"evict\", \"class\": 0}]}}",
     "timeline.events[0].class: no class 0 in this report (it has 0)"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"timeline\": {\"events\": "
     "[{\"kind\": \"boom\", \"class\": 0}]}}",
     "timeline.events[0].kind: expected one of"},
    {"{\"umpol_report\": 1, \"classes\": [{\"allocations\": 1}]}", "classes[0]: no \"name\""},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": 5}]}", "classes[0].name: expected a string"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"\xff\"}]}", "invalid UTF-8 in a string"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"a\x01\"}]}",
     "control character in a string"},
    {"{\"umpol_report\": 1, \"classes\": {}}", "classes: expected an array"},
    {"{\"umpol_report\": 1, \"classes\": [", "invalid JSON: unexpected end at byte 32"},
    {"{\"umpol_report\": 1} x", "invalid JSON: trailing characters at byte 20"},
    {"{\"umpol_report\": 01}", "invalid JSON: expected ',' or '}'"},
    {"{\"umpol_report\": 0x1}", "invalid JSON"},
    {"{\"umpol_report\": 1, \"a\": \"\\x\"}", "bad escape in a string"},
    {"{\"umpol_report\": 1, \"a\": \"\\u12\"}", "bad \\u escape"},
    {"", "invalid JSON: unexpected end at byte 0"},
    /* The sites table: indices, integers and counts that agree. */
    {"{\"umpol_report\": 1, \"sites\": {}}", "sites: expected an array"},
    {"{\"umpol_report\": 1, \"sites\": [{\"class\": 0, \"allocations\": 1, \"min_size\": 1, "
     "\"max_size\": 1}]}",
     "sites[0].class: no class 0 in this report (it has 0)"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"allocations\": 1}]}",
     "sites[0].class: no class -1 in this report"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": -1}]}",
     "sites[0].class: expected an integer from 0 to 2147483647"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"phase\": 0, \"allocations\": 1, \"min_size\": 1, \"max_size\": 1}]}",
     "sites[0].phase: no phase 0 in this report (it has 0)"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"phase\": 1.5}]}",
     "sites[0].phase: expected an integer"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"allocations\": -2}]}",
     "sites[0].allocations: expected an integer from 0 to 18446744073709551615"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"allocations\": 2, \"frees\": 3, \"min_size\": 1, \"max_size\": 1}]}",
     "sites[0]: 3 frees of 2 allocations"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"allocations\": 0, \"min_size\": 1, \"max_size\": 1}]}",
     "sites[0]: 0 frees of 0 allocations"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"allocations\": 1, \"min_size\": 9, \"max_size\": 8}]}",
     "sites[0]: sizes from 9 to 8 bytes"},
    {"{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [{\"class\": 0, "
     "\"allocations\": 1, \"min_size\": 1, \"max_size\": 1, \"first_ns\": 2, \"last_ns\": 1}]}",
     "sites[0]: last allocated before its first allocation"},
    {"{\"umpol_report\": 1, \"sites_dropped\": \"x\", \"sites\": []}",
     "sites_dropped: expected an integer"},
    /* Malformed nested input, where the reader used to leak what it had read. */
    {"{\"a\": [{\"b\": [1, {\"c\": \"d\"}, [2, 3]], \"e\": {\"f\": [}}]}", "invalid JSON"},
    {"[[[[{\"k\": [[[[\"x\", [1, 2, {\"y\": tru}]]]]]}]]]]", "invalid JSON"},
    {"{\"a\": {\"b\": {\"c\": 1}}, \"a\": [1, 2, 3,]}", "invalid JSON"},
};

/* More sites than the runtime ever writes: refused, not read. */
static void test_report_sites_are_bounded(void **state)
{
    (void)state;
    const char *site = "{\"class\": 0, \"allocations\": 1, \"min_size\": 1, \"max_size\": 1}";
    size_t n = REPORT_SITES_MAX + 1, len = 0;
    char *text = malloc(n * (strlen(site) + 1) + 128);
    assert_non_null(text);
    len += (size_t)sprintf(text,
                           "{\"umpol_report\": 1, \"classes\": [{\"name\": \"c\"}], \"sites\": [");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "%s%s", i ? "," : "", site);
    strcpy(text + len, "]}");
    struct report r;
    char why[256] = "";
    assert_int_equal(parse(&r, text, why, sizeof why), REPORT_INVALID);
    assert_non_null(strstr(why, "sites: 4097 sites (a report holds at most 4096)"));
    /* The most it holds reads. */
    char *last = strrchr(text, '{');
    strcpy(last - 1, "]}");
    assert_int_equal(parse(&r, text, why, sizeof why), REPORT_OK);
    assert_int_equal(r.site_count, REPORT_SITES_MAX);
    report_free(&r);
    free(text);
}

static void test_report_refuses_bad_reports(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_reports / sizeof bad_reports[0]; i++) {
        struct report r;
        char why[256] = "";
        enum report_status st = parse(&r, bad_reports[i].text, why, sizeof why);
        if (st != REPORT_INVALID || !strstr(why, bad_reports[i].why))
            fail_msg("case %zu (%s): status %d, message '%s', expected '%s'", i,
                     bad_reports[i].text, st, why, bad_reports[i].why);
    }
}

static void test_report_nesting_is_bounded(void **state)
{
    (void)state;
    char text[600];
    size_t n = 0;
    n += (size_t)snprintf(text, sizeof text, "{\"umpol_report\": 1, \"x\": ");
    for (int i = 0; i < 100; i++)
        text[n++] = '[';
    for (int i = 0; i < 100; i++)
        text[n++] = ']';
    text[n++] = '}';
    text[n] = '\0';
    struct report r;
    char why[256];
    assert_int_equal(parse(&r, text, why, sizeof why), REPORT_INVALID);
    assert_non_null(strstr(why, "nested too deeply"));
}

static void test_report_names_are_bounded_and_utf8(void **state)
{
    (void)state;
    /* A name of exactly REPORT_NAME_MAX bytes is read, one byte more is refused. */
    size_t len = REPORT_NAME_MAX + 64;
    char *text = malloc(len + 128);
    assert_non_null(text);
    for (int extra = 0; extra <= 1; extra++) {
        int n = snprintf(text, 64, "{\"umpol_report\": 1, \"phases\": [{\"name\": \"");
        memset(text + n, 'x', REPORT_NAME_MAX + (size_t)extra);
        strcpy(text + n + REPORT_NAME_MAX + extra, "\"}]}");
        struct report r;
        char why[256] = "";
        enum report_status st = parse(&r, text, why, sizeof why);
        if (!extra) {
            assert_int_equal(st, REPORT_OK);
            assert_int_equal(strlen(r.phases[0].name), REPORT_NAME_MAX);
            report_free(&r);
        } else {
            assert_int_equal(st, REPORT_INVALID);
            assert_non_null(strstr(why, "phases[0].name: longer than 4096 bytes"));
        }
    }
    free(text);
    /* Escapes decode to UTF-8; lone surrogates and U+0000 become U+FFFD. */
    struct report r;
    char why[256];
    assert_int_equal(parse(&r,
                           "{\"umpol_report\": 1, \"phases\": [{\"name\": "
                           "\"\\ud83d\\ude00|\\ud800|\\u0000|\\u001b|\\/\"}]}",
                           why, sizeof why),
                     REPORT_OK);
    assert_string_equal(r.phases[0].name, "\xf0\x9f\x98\x80|\xef\xbf\xbd|\xef\xbf\xbd|\x1b|/");
    report_free(&r);
}

/* The JSON writer: whatever the bytes, valid UTF-8 with everything escaped. */
static char *json_of(const char *s, size_t max)
{
    char *out = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&out, &len);
    assert_non_null(mem);
    json_print_string_max(mem, s, max);
    assert_int_equal(fclose(mem), 0);
    return out;
}

static void test_report_json_strings_are_always_valid(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t max;
        const char *out;
    } cases[] = {
        {"evi\"ct", (size_t)-1, "\"evi\\\"ct\""},
        {"a\\b\n\t\r\x01\x1b[31m\x7f", (size_t)-1, "\"a\\\\b\\n\\t\\r\\u0001\\u001b[31m\\u007f\""},
        {"ok\xff\xfe", (size_t)-1, "\"ok\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xc0\xaf\xed\xa0\x80", (size_t)-1,
         "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xc3\xa9t\xc3\xa9", (size_t)-1, "\"\xc3\xa9t\xc3\xa9\""},
        {"\xc3\xa9t\xc3\xa9", 4, "\"\xc3\xa9t\""}, /* cut before a character, not through it */
        {"\xf0\x9f\x98\x80", 3, "\"\""},
        {"abcdef", 3, "\"abc\""},
        {NULL, (size_t)-1, "\"\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = json_of(cases[i].in, cases[i].max);
        if (strcmp(out, cases[i].out) != 0)
            fail_msg("case %zu: got %s, expected %s", i, out, cases[i].out);
        free(out);
    }
}

static void test_report_terminal_text_escapes_controls(void **state)
{
    (void)state;
    char *shown = text_visible("a\x1b[2Jb\x07\xc2\x9b\xff\xc3\xa9");
    assert_non_null(shown);
    assert_string_equal(shown, "a\\x1b[2Jb\\x07\\u{9b}\\xff\xc3\xa9");
    free(shown);
}

/* ---- files that are not reports ---- */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/umpol-report-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void expect_io_error(const char *path, const char *words)
{
    struct report r;
    char why[512] = "";
    /* Nothing waits for a writer or reads an endless device: a hang is ended
     * by SIGALRM, which fails the test (a limit no busy machine comes near). */
    alarm(60);
    enum report_status st = report_load(&r, path, why, sizeof why);
    alarm(0);
    if (st != REPORT_IO || !strstr(why, words) || strncmp(why, path, strlen(path)) != 0)
        fail_msg("%s: status %d, message '%s', expected '%s'", path, st, why, words);
}

static void test_report_reads_only_regular_files(void **state)
{
    (void)state;
    expect_io_error(tmpdir, "not a regular file (a directory)");
    expect_io_error("/dev/zero", "not a regular file (a device)");
    char path[128];
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_io_error(path, "not a regular file (a FIFO)");
    snprintf(path, sizeof path, "%s/missing.json", tmpdir);
    expect_io_error(path, "cannot open: No such file or directory");
    /* Oversize, as a sparse file: refused from its size, unread. */
    snprintf(path, sizeof path, "%s/huge.json", tmpdir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)REPORT_FILE_MAX + 1), 0);
    close(fd);
    expect_io_error(path, "too large: 268435457 bytes (reports are read up to 256 MiB)");
}

#ifdef TEST_REPORT_WRITER
/* ---- the runtime's writer, read back through the reader ---- */

struct writer {
    struct policy pol;
    struct runtime rt;
};

static struct writer *writer_setup(const char *policy_text)
{
    struct writer *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(policy_load_text(&w->pol, "t.umpol", policy_text, strlen(policy_text)),
                     POLICY_VALID);
    assert_int_equal(runtime_init(&w->rt, w->pol.program, &fake_api), 0);
    return w;
}

static void writer_teardown(struct writer *w)
{
    fake_release_runtime_events(&w->rt);
    runtime_destroy(&w->rt);
    policy_free(&w->pol);
    free(w);
}

/* Write W's report to NAME in the test's folder (its path in PATH) and read
 * it back into R, failing the test if it does not read. */
static void write_and_read(struct writer *w, const char *name, char *path, size_t len,
                           struct report *r)
{
    snprintf(path, len, "%s/%s", tmpdir, name);
    assert_int_equal(report_write(&w->rt, path), 0);
    char why[512] = "";
    if (report_load(r, path, why, sizeof why) != REPORT_OK)
        fail_msg("the writer's report does not read back: %s", why);
}

static void test_report_writer_bounds_and_escapes_names(void **state)
{
    (void)state;
    struct writer *w = writer_setup("umpol 1;\nclass all { match any; }\n");
    char *huge = malloc(10 << 20);
    assert_non_null(huge);
    memset(huge, 'n', (10 << 20) - 1);
    huge[(10 << 20) - 1] = '\0';
    /* A multi-byte character across the cut: the cut comes before it. */
    memcpy(huge + REPORT_NAME_MAX - 1, "\xc3\xa9", 2);
    const char *names[] = {"q\"uo\\te", "ctl\x01\x1b[31m\n", "bad\xff\xc0utf8", huge};
    for (size_t i = 0; i < 4; i++) {
        phase_enter(&w->rt, names[i]);
        phase_exit(&w->rt);
    }
    char path[128];
    struct report r;
    write_and_read(w, "names.json", path, sizeof path, &r);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size < 64 * 1024); /* not 10 MiB */
    assert_int_equal(r.phase_count, 4);
    assert_string_equal(r.phases[0].name, "q\"uo\\te");
    assert_string_equal(r.phases[1].name, "ctl\x01\x1b[31m\n");
    assert_string_equal(r.phases[2].name, "bad\xef\xbf\xbd\xef\xbf\xbdutf8");
    assert_int_equal(strlen(r.phases[3].name), REPORT_NAME_MAX - 1);
    assert_int_equal(r.span_count, 4);
    report_free(&r);
    free(huge);
    writer_teardown(w);
}

/* The sites the runtime records are the ones the reader reads back: by
 * class, innermost phase (as a nested phase closes, the enclosing one) and
 * power-of-two size. */
static void test_report_writer_records_sites(void **state)
{
    (void)state;
    struct writer *w = writer_setup("umpol 1;\nclass all { match any; }\n");
    w->rt.sites = calloc(1, sizeof *w->rt.sites);
    assert_non_null(w->rt.sites);
    cudaSetDevice(0);
    void *p[5];
    bool handled;
    assert_int_equal(rt_alloc(&w->rt, &p[0], 1000, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    phase_enter(&w->rt, "outer");
    phase_enter(&w->rt, "inner");
    assert_int_equal(rt_alloc(&w->rt, &p[1], 5000, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    phase_exit(&w->rt);
    assert_int_equal(rt_alloc(&w->rt, &p[2], 4096, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    assert_int_equal(rt_alloc(&w->rt, &p[3], 6000, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    phase_exit(&w->rt);
    /* A tag the policy does not name is recorded too; the innermost one counts. */
    tag_push(&w->rt, "other");
    tag_push(&w->rt, "kv");
    assert_int_equal(rt_alloc(&w->rt, &p[4], 1000, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    tag_pop();
    tag_pop();
    cudaError_t err;
    assert_true(rt_free(&w->rt, p[2], 0, MODE_STREAM, &err));
    assert_true(rt_free(&w->rt, p[1], 0, MODE_STREAM, &err));
    char path[128];
    struct report r;
    write_and_read(w, "sites.json", path, sizeof path, &r);
    assert_true(r.has_sites);
    assert_int_equal(r.sites_dropped, 0);
    assert_int_equal(r.site_count, 4);
    assert_string_equal(r.phases[r.sites[1].phase].name, "inner");
    assert_null(r.sites[0].tag);
    assert_null(r.sites[2].tag);
    assert_string_equal(r.sites[3].tag, "kv");
    assert_int_equal(r.sites[3].phase, -1);
    assert_int_equal(r.sites[3].allocations, 1);
    assert_string_equal(r.phases[r.sites[2].phase].name, "outer");
    const struct report_site *none = &r.sites[0], *inner = &r.sites[1], *outer = &r.sites[2];
    assert_int_equal(none->phase, -1);
    assert_int_equal(none->allocations, 1);
    assert_int_equal(none->frees, 0);
    assert_int_equal(inner->allocations, 1);
    assert_int_equal(inner->frees, 1);
    assert_int_equal(inner->bytes, 5000);
    /* 4096 and 6000 share a power of two: one site of two allocations. */
    assert_int_equal(outer->allocations, 2);
    assert_int_equal(outer->frees, 1);
    assert_int_equal(outer->bytes, 10096);
    assert_int_equal(outer->min_size, 4096);
    assert_int_equal(outer->max_size, 6000);
    assert_int_equal(outer->peak_live_bytes, 10096);
    assert_true(outer->first_ns <= outer->last_ns);
    report_free(&r);
    assert_true(rt_free(&w->rt, p[0], 0, MODE_STREAM, &err));
    assert_true(rt_free(&w->rt, p[3], 0, MODE_STREAM, &err));
    assert_true(rt_free(&w->rt, p[4], 0, MODE_STREAM, &err));
    writer_teardown(w);
}

/* A block reported saved moves class: the report counts it in the class it
 * came to; a report without the field (older writers) reads as 0. */
static void test_report_writer_counts_reclassified(void **state)
{
    (void)state;
    struct writer *w = writer_setup("umpol 1;\n"
                                    "class kept { match phase \"f\" and saved; }\n"
                                    "class all { match any; }\n");
    cudaSetDevice(0);
    void *p;
    bool handled;
    phase_enter(&w->rt, "f");
    assert_int_equal(rt_alloc(&w->rt, &p, 1000, API_CUDA_MALLOC_ASYNC, 0, &handled), 0);
    pthread_mutex_lock(&w->rt.lock);
    rt_saved(&w->rt, map_find(&w->rt.map, (uintptr_t)p));
    pthread_mutex_unlock(&w->rt.lock);
    phase_exit(&w->rt);
    char path[128];
    struct report r;
    write_and_read(w, "reclassified.json", path, sizeof path, &r);
    assert_int_equal(r.class_count, 2);
    assert_int_equal(r.classes[0].v[RC_RECLASSIFIED], 1);
    assert_int_equal(r.classes[0].v[RC_ALLOCATIONS], 1);
    assert_int_equal(r.classes[1].v[RC_RECLASSIFIED], 0);
    assert_int_equal(r.classes[1].v[RC_ALLOCATIONS], 0);
    report_free(&r);
    cudaError_t err;
    assert_true(rt_free(&w->rt, p, 0, MODE_STREAM, &err));
    writer_teardown(w);
    const char *old = "{\"umpol_report\": 1, \"classes\": [{\"name\": \"a\", \"allocations\": 2}]}";
    snprintf(path, sizeof path, "%s/old.json", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(old, f);
    fclose(f);
    char why[512] = "";
    assert_int_equal(report_load(&r, path, why, sizeof why), REPORT_OK);
    assert_int_equal(r.classes[0].v[RC_ALLOCATIONS], 2);
    assert_int_equal(r.classes[0].v[RC_RECLASSIFIED], 0);
    report_free(&r);
}

/* Symlinks planted at the report's name and at the first temporary name: the
 * files they point to stay as they were; the report replaces the links. */
static void test_report_writer_follows_no_symlink(void **state)
{
    (void)state;
    struct writer *w = writer_setup("umpol 1;\nclass all { match any; }\n");
    char path[128], tmp[160], victim[128], victim2[128];
    snprintf(path, sizeof path, "%s/r.json", tmpdir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(victim, sizeof victim, "%s/victim", tmpdir);
    snprintf(victim2, sizeof victim2, "%s/victim2", tmpdir);
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("precious", v);
    fclose(v);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(symlink(victim2, path), 0); /* dangling: must not be created */
    assert_int_equal(report_write(&w->rt, path), 0);
    char buf[32] = "";
    v = fopen(victim, "r");
    assert_non_null(v);
    assert_non_null(fgets(buf, sizeof buf, v));
    fclose(v);
    assert_string_equal(buf, "precious");
    assert_int_equal(access(victim2, F_OK), -1);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* left alone */
    /* A directory that does not exist: the reason comes back as -errno. */
    snprintf(path, sizeof path, "%s/no/such/dir/r.json", tmpdir);
    assert_int_equal(report_write(&w->rt, path), -ENOENT);
    writer_teardown(w);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_reads_a_recorded_report),
        cmocka_unit_test(test_report_refuses_bad_reports),
        cmocka_unit_test(test_report_sites_are_bounded),
        cmocka_unit_test(test_report_nesting_is_bounded),
        cmocka_unit_test(test_report_names_are_bounded_and_utf8),
        cmocka_unit_test(test_report_json_strings_are_always_valid),
        cmocka_unit_test(test_report_terminal_text_escapes_controls),
        cmocka_unit_test(test_report_reads_only_regular_files),
#ifdef TEST_REPORT_WRITER
        cmocka_unit_test(test_report_writer_bounds_and_escapes_names),
        cmocka_unit_test(test_report_writer_counts_reclassified),
        cmocka_unit_test(test_report_writer_follows_no_symlink),
        cmocka_unit_test(test_report_writer_records_sites),
#endif
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
