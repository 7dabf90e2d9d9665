/* cpus.h - CPU placement of the daemon's threads (rockstalkd(1) --loop-cpus,
 * --store-cpus, --cpus auto; issue 30): strict CPU list parsing in the
 * kernel's cpulist format (cpuset(7) "List format"), the CPUs that take a
 * block device's completion interrupts (sysfs and /proc/irq, read under a
 * root directory that tests replace with a fake tree), the split of the
 * allowed CPUs between the event loop and the store, and binding the
 * calling thread. No state of its own; each call runs on its caller's
 * thread. Threads inherit their creator's affinity (sched_setaffinity(2)),
 * which is how server.c places the store's threads. */
#ifndef ROCKSTALK_CPUS_H
#define ROCKSTALK_CPUS_H

#include <sched.h>
#include <stddef.h>

/* CPU numbers accepted: 0 to CPUS_MAX - 1 (glibc's cpu_set_t). */
#define CPUS_MAX CPU_SETSIZE
/* Characters of a CPU list accepted (longer ones are refused). */
#define CPUS_LIST_MAX 256

/* The placement asked for on the command line. */
typedef struct CpusConfig {
    cpu_set_t loop;  /* --loop-cpus: the event loop (main) thread */
    cpu_set_t store; /* --store-cpus: the store's threads (mutation,
                        appliers, syncers, body ring, reader) and, in
                        cluster mode, the Raft thread */
    int has_loop;    /* loop given */
    int has_store;   /* store given */
    int automatic;   /* --cpus auto: whichever of loop and store was not
                        given is found from the data directory's device's
                        interrupts (cpus_dev_irqs, cpus_split) */
} CpusConfig;

/* Parses the CPU list s ("0", "0-3", "0,2-3": decimal numbers or
 * ascending ranges a-b with a <= b, separated by single commas; no
 * spaces, signs, empty items or trailing comma; numbers below CPUS_MAX;
 * at most CPUS_LIST_MAX characters) into *out. Returns 0, or -1 with a
 * message in err (out then undefined). */
int cpus_parse(const char *s, cpu_set_t *out, char *err, size_t errcap);

/* Writes set in list format ("0-1,3"; "" when empty) into buf (cap bytes,
 * truncated to fit). Returns buf. */
char *cpus_format(const cpu_set_t *set, char *buf, size_t cap);

/* The CPUs that take the completion interrupts of block device maj:min:
 * ROOT/sys/dev/block/MAJ:MIN's device and its ancestors up to the first
 * virtioN (its IRQs are /proc/interrupts' lines naming virtioN-req) or
 * device with msi_irqs/ (nvme, PCI disks); a stacked device (dm, md) with
 * a single slave is followed to it. Each IRQ's CPUs are read from
 * ROOT/proc/irq/N/effective_affinity_list (or smp_affinity_list) and
 * unioned into *out. root is "" for the real system. Returns 0 with a
 * description of what was found in msg, or -1 with why not in msg (no
 * such device, a virtual device, no interrupts, unreadable files). */
int cpus_dev_irqs(const char *root, unsigned maj, unsigned min, cpu_set_t *out,
                  char *msg, size_t msgcap);

/* Splits allowed between the store (the interrupt CPUs irq it may use)
 * and the loop (the rest). Returns 0, or -1 with why not in msg (a single
 * CPU, interrupts on every allowed CPU or on none of them). */
int cpus_split(const cpu_set_t *allowed, const cpu_set_t *irq, cpu_set_t *loop,
               cpu_set_t *store, char *msg, size_t msgcap);

/* Binds the calling thread to set (pthread_setaffinity_np); threads it
 * starts afterwards inherit it. Returns 0, or -1 with a message. */
int cpus_bind_self(const cpu_set_t *set, char *err, size_t errcap);

/* The calling thread's CPUs into *out. Returns 0, or -1 with a message. */
int cpus_get_self(cpu_set_t *out, char *err, size_t errcap);

#endif
