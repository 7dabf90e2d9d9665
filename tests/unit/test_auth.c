/* Unit tests for auth.c: the auth file's grammar (every error names its
 * line; one bad line refuses the whole file), the token lookup, the rules'
 * classes per tube, the file-mode refusal and the listener policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn/conn.h"
#include "server/auth.h"

/* sha256("secret1") and sha256("secret2") */
#define H1                                                                     \
    "sha256:"                                                                  \
    "5b11618c2e44027877d0cd0921ed166b9f176f50587fc91e7534dd2946db77d6"
#define H2                                                                     \
    "sha256:"                                                                  \
    "35224d0d3465d74e855f8d69a136e79c744ea35a675d3393360a327cbf6359a2"

static char err[512];

static int
parse(const char *text, AuthTable *t)
{
    err[0] = '\0';
    return auth_parse(text, strlen(text), t, err, sizeof err);
}

static void
test_digest_matches_sha256(void **state)
{
    unsigned char d[AUTH_DIGEST_LEN];
    char hex[2 * AUTH_DIGEST_LEN + 1];
    (void)state;
    assert_int_equal(auth_digest("secret1", 7, d), 0);
    for (int i = 0; i < AUTH_DIGEST_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, H1 + 7);
}

static void
test_parse_good_file(void **state)
{
    AuthTable t = {0};
    (void)state;
    assert_int_equal(parse("# name cred rules\n"
                           "\n"
                           "   \t\n"
                           "mailer " H1 " produce:emails.* consume:emails.*"
                           "  # trailing comment\r\n"
                           "ops cert admin\n"
                           "dash " H2 " inspect:* admin:tmp-?\n",
                           &t),
                     0);
    assert_int_equal(t.n, 3);
    AuthUser *m = auth_by_name(&t, "mailer");
    assert_non_null(m);
    assert_int_equal(m->nrules, 2);
    assert_int_equal(auth_bits(m, "emails.x"), AUTH_PRODUCE | AUTH_CONSUME);
    assert_int_equal(auth_bits(m, "emails/x"), 0); /* '.' is literal */
    assert_int_equal(auth_bits(m, "default"), 0);
    assert_int_equal(auth_bits(m, "emails"), 0);
    AuthUser *o = auth_by_name(&t, "ops");
    assert_true(o->cert && o->superuser);
    assert_int_equal(auth_bits(o, "anything"), AUTH_ALL);
    AuthUser *d = auth_by_name(&t, "dash");
    assert_int_equal(auth_bits(d, "x"), AUTH_INSPECT);
    assert_int_equal(auth_bits(d, "tmp-1"), AUTH_ALL);
    assert_int_equal(auth_bits(d, "tmp-12"), AUTH_INSPECT);
    assert_int_equal(d->any, AUTH_ALL);
    auth_free(&t);
    assert_int_equal(t.n, 0);
}

static void
test_token_and_cert_lookup(void **state)
{
    AuthTable t = {0};
    (void)state;
    assert_int_equal(parse("mailer " H1 " produce:*\nops cert admin\n", &t), 0);
    assert_ptr_equal(auth_by_token(&t, "secret1", 7),
                     auth_by_name(&t, "mailer"));
    assert_null(auth_by_token(&t, "secret", 6));
    assert_null(auth_by_token(&t, "secret1 ", 8));
    assert_null(auth_by_token(&t, "", 0));
    assert_ptr_equal(auth_by_cert(&t, "ops"), auth_by_name(&t, "ops"));
    assert_null(auth_by_cert(&t, "mailer")); /* a token identity */
    assert_null(auth_by_cert(&t, NULL));
    assert_null(auth_by_cert(&t, "nobody"));
    auth_free(&t);
}

/* Each bad file is refused whole, with the line named. */
static void
test_parse_errors_name_the_line(void **state)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"a " H1 " produce:*\nb sha256:12 produce:*\n", "line 2: "},
        {"a " H1 " produce:*\n\n# c\nb " H2 "\n", "line 4: b has no rules"},
        {"a\n", "line 1: a has no credential"},
        {"a " H1 " produce\n", "line 1: rule 'produce'"},
        {"a " H1 " publish:*\n", "line 1: rule 'publish:*'"},
        {"a " H1 " produce:\n", "line 1: rule 'produce:'"},
        {"a " H1 " produce:a#b\n", "line 1: rule 'produce:a#b'"},
        {"a " H1 " produce:a,b\n", "line 1: rule 'produce:a,b'"},
        {"a b" H1 " produce:*\n", "line 1: "},
        {"a@b " H1 " produce:*\n", "line 1: the name"},
        {"a " H1 " produce:*\na " H2 " produce:*\n",
         "line 2: identity a is defined twice"},
        {"a " H1 " produce:*\nb " H1 " produce:*\n",
         "line 2: b has the same token as a"},
        {"a password produce:*\n", "line 1: the credential"},
        {"a sha256:zz11618c2e44027877d0cd0921ed166b9f176f50587fc91e7534dd2946d"
         "b77d6 produce:*\n",
         "line 1: sha256: takes"},
        {"# nothing\n\n", "no identities"},
        {"", "no identities"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AuthTable t = {0};
        assert_int_equal(parse(bad[i].text, &t), -1);
        if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
            fail_msg("case %zu: got '%s', want '%s...'", i, err, bad[i].want);
        assert_int_equal(t.n, 0);
        assert_null(t.users);
    }
}

static void
test_parse_nul_and_limits(void **state)
{
    AuthTable t = {0};
    char line[512];
    (void)state;
    static const char nul[] = "a " H1 " produce:*\0x\n";
    assert_int_equal(auth_parse(nul, sizeof nul - 1, &t, err, sizeof err), -1);
    assert_string_equal(err, "line 1: a NUL byte");
    /* a 65-byte name */
    memset(line, 'n', 65);
    snprintf(line + 65, sizeof line - 65, " %s produce:*\n", H1);
    assert_int_equal(parse(line, &t), -1);
    /* a 201-byte glob */
    int n = snprintf(line, sizeof line, "a %s produce:", H1);
    memset(line + n, 'g', 201);
    strcpy(line + n + 201, "\n");
    assert_int_equal(parse(line, &t), -1);
    line[n + 200] = '\n';
    line[n + 201] = '\0';
    assert_int_equal(parse(line, &t), 0);
    auth_free(&t);
}

static void
test_load_refuses_exposed_file(void **state)
{
    char path[] = "/tmp/test_auth_XXXXXX";
    AuthTable t = {0};
    (void)state;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "a " H1 " produce:*\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(auth_load(path, &t, err, sizeof err), 0);
    assert_int_equal(t.n, 1);
    auth_free(&t);
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(auth_load(path, &t, err, sizeof err), 0);
    auth_free(&t);
    for (mode_t m = 0640; m; m = m == 0640 ? 0604 : m == 0604 ? 0620 : 0) {
        assert_int_equal(chmod(path, m), 0);
        assert_int_equal(auth_load(path, &t, err, sizeof err), -1);
        assert_non_null(strstr(err, "group or others"));
    }
    unlink(path);
    assert_int_equal(auth_load(path, &t, err, sizeof err), -1);
    assert_int_equal(auth_load("/tmp", &t, err, sizeof err), -1);
}

static void
test_listener_policy(void **state)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    char msg[512];
    const struct sockaddr *a4 = (const void *)&v4, *a6 = (const void *)&v6;
    (void)state;
    inet_pton(AF_INET, "127.0.0.2", &v4.sin_addr);
    assert_true(auth_addr_local(a4, sizeof v4));
    assert_int_equal(
        auth_listener_check(1, 0, a4, sizeof v4, CONN_VIA_TCP, msg, sizeof msg),
        0);
    inet_pton(AF_INET, "0.0.0.0", &v4.sin_addr);
    assert_false(auth_addr_local(a4, sizeof v4));
    assert_int_equal(
        auth_listener_check(1, 0, a4, sizeof v4, CONN_VIA_TCP, msg, sizeof msg),
        -1);
    assert_non_null(strstr(msg, "--allow-plaintext-auth"));
    assert_int_equal(
        auth_listener_check(1, 1, a4, sizeof v4, CONN_VIA_TCP, msg, sizeof msg),
        1);
    assert_int_equal(
        auth_listener_check(1, 0, a4, sizeof v4, CONN_VIA_TLS, msg, sizeof msg),
        0);
    assert_int_equal(
        auth_listener_check(0, 0, a4, sizeof v4, CONN_VIA_TCP, msg, sizeof msg),
        1);
    assert_non_null(strstr(msg, "--auth-file"));
    assert_int_equal(
        auth_listener_check(0, 0, a4, sizeof v4, CONN_VIA_TLS, msg, sizeof msg),
        1);
    inet_pton(AF_INET6, "::1", &v6.sin6_addr);
    assert_true(auth_addr_local(a6, sizeof v6));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &v6.sin6_addr);
    assert_true(auth_addr_local(a6, sizeof v6));
    inet_pton(AF_INET6, "::ffff:10.0.0.1", &v6.sin6_addr);
    assert_false(auth_addr_local(a6, sizeof v6));
    inet_pton(AF_INET6, "::", &v6.sin6_addr);
    assert_int_equal(
        auth_listener_check(1, 0, a6, sizeof v6, CONN_VIA_TCP, msg, sizeof msg),
        -1);
    assert_true(auth_addr_local((const void *)&un, sizeof un));
    assert_int_equal(auth_listener_check(1, 0, (const void *)&un, sizeof un,
                                         CONN_VIA_UNIX, msg, sizeof msg),
                     0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_matches_sha256),
        cmocka_unit_test(test_parse_good_file),
        cmocka_unit_test(test_token_and_cert_lookup),
        cmocka_unit_test(test_parse_errors_name_the_line),
        cmocka_unit_test(test_parse_nul_and_limits),
        cmocka_unit_test(test_load_refuses_exposed_file),
        cmocka_unit_test(test_listener_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
