/* Unit tests for base/cpus.c: CPU lists (accepted forms; refusals: empty,
 * letters, descending ranges, empty items, numbers beyond CPUS_MAX, overlong
 * lists), their formatting, the interrupt CPUs of a block device read from
 * a fake sysfs and /proc tree (virtio disk and partition, nvme with
 * msi_irqs and the smp_affinity_list fallback, a dm device over a
 * partition, refusals: no device, a virtual device, no interrupt line, an
 * unreadable affinity), the loop/store split, and binding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cpus.h"

static const char *
fmt(const cpu_set_t *set)
{
    static char buf[256];
    return cpus_format(set, buf, sizeof buf);
}

static void
test_parse_accepts(void **state)
{
    (void)state;
    static const char *const in[][2] = {
        {"0", "0"},           {"0-1", "0-1"},   {"0,2-3", "0,2-3"},
        {"5-5", "5"},         {"3,1,2", "1-3"}, {"1023", "1023"},
        {"007", "7"},         {"0-3,2", "0-3"}, {"0,1,2,8-9", "0-2,8-9"},
        {"0-1023", "0-1023"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        cpu_set_t s;
        assert_int_equal(cpus_parse(in[i][0], &s, err, sizeof err), 0);
        assert_string_equal(fmt(&s), in[i][1]);
    }
}

static void
test_parse_refuses(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"", "empty"},
        {"a", "unexpected \"a\" at 1"},
        {"3-1", "range 3-1 descends"},
        {"0,,1", "unexpected \",\" at 3"},
        {"1024", "up to 1023"},
        {"99999999999999999999999", "up to 1023"},
        {"0-1024", "up to 1023"},
        {"0-", "ends early"},
        {"0,", "ends early"},
        {"-1", "unexpected \"-\" at 1"},
        {",0", "unexpected \",\" at 1"},
        {" 0", "unexpected \" \" at 1"},
        {"0 ", "unexpected \" \" at 2"},
        {"+1", "unexpected \"+\" at 1"},
        {"1-2-3", "unexpected \"-\" at 4"},
        {"0;1", "unexpected \";\" at 2"},
        {"0x1", "unexpected \"x\" at 2"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cpu_set_t s;
        assert_int_equal(cpus_parse(bad[i][0], &s, err, sizeof err), -1);
        if (!strstr(err, bad[i][1])) fail_msg("%s: %s", bad[i][0], err);
    }
    char longl[CPUS_LIST_MAX + 2];
    cpu_set_t s;
    memset(longl, '0', sizeof longl);
    for (int i = 1; i < CPUS_LIST_MAX; i += 2)
        longl[i] = ',';
    longl[CPUS_LIST_MAX - 1] = '0'; /* ends "0,00" */
    longl[CPUS_LIST_MAX] = '\0';    /* exactly the most: accepted */
    assert_int_equal(cpus_parse(longl, &s, err, sizeof err), 0);
    longl[CPUS_LIST_MAX] = '0';
    longl[CPUS_LIST_MAX + 1] = '\0';
    assert_int_equal(cpus_parse(longl, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 256"));
}

static void
test_format(void **state)
{
    (void)state;
    cpu_set_t s;
    char small[6];
    CPU_ZERO(&s);
    assert_string_equal(fmt(&s), "");
    CPU_SET(0, &s);
    CPU_SET(1, &s);
    CPU_SET(3, &s);
    CPU_SET(1023, &s);
    assert_string_equal(fmt(&s), "0-1,3,1023");
    assert_string_equal(cpus_format(&s, small, sizeof small), "0-1,3");
}

/* ---- a fake sysfs and /proc ---- */

static char root[64];

static void
put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void
dir(const char *rel)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s'", root, rel);
    assert_int_equal(system(cmd), 0);
}

static void
link_to(const char *rel, const char *target)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    assert_int_equal(symlink(target, path), 0);
}

#define VDA "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda"
#define NVME "sys/devices/pci0000:00/0000:00:04.0"

static int
setup_tree(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/test_cpus.XXXXXX");
    assert_non_null(mkdtemp(root));
    put(VDA "/vda1/partition", "1\n");
    put(NVME "/msi_irqs/40", "msix\n");
    put(NVME "/msi_irqs/41", "msix\n");
    put(NVME "/msi_irqs/42", "msix\n");
    dir(NVME "/nvme/nvme0/nvme0n1");
    dir("sys/devices/pci0000:00/0000:00:06.0/virtio5/block/vdb");
    dir("sys/devices/virtual/block/dm-0/slaves/vda1");
    dir("sys/devices/virtual/block/loop0");
    dir("sys/dev/block");
    dir("sys/class/block");
    link_to("sys/dev/block/254:0", "../../devices/pci0000:00/0000:00:02.0/"
                                   "virtio1/block/vda");
    link_to("sys/dev/block/254:1", "../../devices/pci0000:00/0000:00:02.0/"
                                   "virtio1/block/vda/vda1");
    link_to("sys/dev/block/254:16", "../../devices/pci0000:00/0000:00:06.0/"
                                    "virtio5/block/vdb");
    link_to("sys/dev/block/259:0",
            "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
    link_to("sys/dev/block/253:0", "../../devices/virtual/block/dm-0");
    link_to("sys/dev/block/7:0", "../../devices/virtual/block/loop0");
    link_to("sys/class/block/vda1", "../../devices/pci0000:00/0000:00:02.0/"
                                    "virtio1/block/vda/vda1");
    put("proc/interrupts",
        "           CPU0       CPU1       CPU2       CPU3\n"
        " 35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      "
        "virtio1-config\n"
        " 36:          0     140566 PCI-MSIX-0000:00:02.0   1-edge      "
        "virtio1-req.0\n"
        " 37:          5          0 PCI-MSIX-0000:00:03.0   1-edge      "
        "virtio10-req.0\n"
        "NMI:          0          0   Non-maskable interrupts\n");
    put("proc/irq/35/effective_affinity_list", "0\n");
    put("proc/irq/36/effective_affinity_list", "1\n");
    put("proc/irq/36/smp_affinity_list", "0-3\n");
    put("proc/irq/37/effective_affinity_list", "2\n");
    put("proc/irq/40/smp_affinity_list", "0\n"); /* no effective list */
    put("proc/irq/41/effective_affinity_list", "2\n");
    put("proc/irq/42/effective_affinity_list", "3\n");
    return 0;
}

static int
teardown_tree(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

static void
expect_irqs(unsigned maj, unsigned min, const char *cpus, const char *msg)
{
    cpu_set_t s;
    char m[1024];
    int rc = cpus_dev_irqs(root, maj, min, &s, m, sizeof m);
    if (rc != 0) fail_msg("%u:%u: %s", maj, min, m);
    assert_string_equal(fmt(&s), cpus);
    if (!strstr(m, msg)) fail_msg("%u:%u: %s", maj, min, m);
}

static void
expect_none(unsigned maj, unsigned min, const char *why)
{
    cpu_set_t s;
    char m[1024];
    assert_int_equal(cpus_dev_irqs(root, maj, min, &s, m, sizeof m), -1);
    if (!strstr(m, why)) fail_msg("%u:%u: %s", maj, min, m);
}

static void
test_irqs_found(void **state)
{
    (void)state;
    expect_irqs(254, 0, "1", "virtio1-req"); /* not 35 (config), not 37 */
    expect_irqs(254, 1, "1", "vda/vda1 (virtio1-req)"); /* a partition */
    expect_irqs(259, 0, "0,2-3", "msi_irqs of");        /* 40 by smp_affinity */
    expect_irqs(253, 0, "1", "virtio1-req");            /* dm-0 over vda1 */
}

static void
test_irqs_refused(void **state)
{
    (void)state;
    expect_none(8, 0, "8:0 is not a block device");
    expect_none(7, 0, "loop0: no device interrupts found");
    expect_none(254, 16, "no virtio5-req interrupt");
    dir("proc/irq/99");
    put(NVME "/msi_irqs/99", "msix\n");
    expect_none(259, 0, "smp_affinity_list"); /* IRQ 99: nothing readable */
    put("proc/irq/99/effective_affinity_list", "x\n");
    expect_none(259, 0, "IRQ 99: CPU list \"x\"");
    char nope[128];
    cpu_set_t s;
    snprintf(nope, sizeof nope, "%s/none", root);
    assert_int_equal(cpus_dev_irqs(nope, 254, 0, &s, nope, sizeof nope), -1);
}

static void
sets(cpu_set_t *s, const char *list)
{
    char err[128];
    assert_int_equal(cpus_parse(list, s, err, sizeof err), 0);
}

static void
test_split(void **state)
{
    (void)state;
    cpu_set_t all, irq, loop, store;
    char m[256];
    sets(&all, "0-1");
    sets(&irq, "1");
    assert_int_equal(cpus_split(&all, &irq, &loop, &store, m, sizeof m), 0);
    assert_string_equal(fmt(&loop), "0");
    assert_string_equal(fmt(&store), "1");
    sets(&all, "0-3");
    sets(&irq, "1,5");
    assert_int_equal(cpus_split(&all, &irq, &loop, &store, m, sizeof m), 0);
    assert_string_equal(fmt(&loop), "0,2-3");
    assert_string_equal(fmt(&store), "1");
    sets(&irq, "0-3");
    assert_int_equal(cpus_split(&all, &irq, &loop, &store, m, sizeof m), -1);
    assert_non_null(strstr(m, "every CPU"));
    sets(&irq, "4-5");
    assert_int_equal(cpus_split(&all, &irq, &loop, &store, m, sizeof m), -1);
    assert_non_null(strstr(m, "none of this process's 0-3"));
    sets(&all, "2");
    sets(&irq, "2");
    assert_int_equal(cpus_split(&all, &irq, &loop, &store, m, sizeof m), -1);
    assert_non_null(strstr(m, "one CPU only (2)"));
}

static void
test_bind(void **state)
{
    (void)state;
    cpu_set_t mine, again, one;
    char err[128];
    assert_int_equal(cpus_get_self(&mine, err, sizeof err), 0);
    assert_true(CPU_COUNT(&mine) >= 1);
    int first = 0;
    while (!CPU_ISSET(first, &mine))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(cpus_bind_self(&one, err, sizeof err), 0);
    assert_int_equal(cpus_get_self(&again, err, sizeof err), 0);
    assert_true(CPU_EQUAL(&again, &one));
    assert_int_equal(cpus_bind_self(&mine, err, sizeof err), 0);
    CPU_ZERO(&one);
    CPU_SET(CPUS_MAX - 1, &one); /* no such CPU here */
    assert_int_equal(cpus_bind_self(&one, err, sizeof err), -1);
    assert_non_null(strstr(err, "sched_setaffinity"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_format),
        cmocka_unit_test_setup_teardown(test_irqs_found, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_irqs_refused, setup_tree,
                                        teardown_tree),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_bind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
