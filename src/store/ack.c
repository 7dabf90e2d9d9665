/* store/ack.c - published sequences, fail-stop and counters (see
 * store/ack.h). */
#include "store/ack.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void
ack_init(StoreAck *a, void (*notify)(void *arg), void *notify_arg)
{
    a->notify = notify;
    a->notify_arg = notify_arg;
    pthread_mutex_init(&a->mu, NULL);
}

void
ack_destroy(StoreAck *a)
{
    pthread_mutex_destroy(&a->mu);
}

void
ack_fail(StoreAck *a, const char *what, int shard, char *msg)
{
    /* Syncer threads can fail concurrently with the mutation thread: the
     * first to take mu writes the message. */
    pthread_mutex_lock(&a->mu);
    if (!atomic_load_explicit(&a->failed, memory_order_relaxed)) {
        if (shard >= 0)
            snprintf(a->failmsg, sizeof a->failmsg, "%s shard-%02d: %s", what,
                     shard, msg ? msg : "unknown error");
        else
            snprintf(a->failmsg, sizeof a->failmsg, "%s: %s", what,
                     msg ? msg : "unknown error");
        atomic_store_explicit(&a->failed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&a->mu);
    free(msg);
    if (a->notify) a->notify(a->notify_arg);
}

void
ack_applied(StoreAck *a, uint64_t seq)
{
    atomic_store_explicit(&a->applied_seq, seq, memory_order_release);
}

void
ack_wait_applied(StoreAck *a, void (*kick)(void *), void *kick_arg)
{
    const struct timespec tick = {0, 10000};
    uint64_t want = atomic_load_explicit(&a->written_seq, memory_order_acquire);

    if (atomic_load_explicit(&a->applied_seq, memory_order_acquire) >= want)
        return;
    atomic_store(&a->drain_asked, 1);
    kick(kick_arg);
    while (atomic_load_explicit(&a->applied_seq, memory_order_acquire) < want &&
           !ack_is_failed(a))
        nanosleep(&tick, NULL);
}

int
ack_is_failed(const StoreAck *a)
{
    return atomic_load_explicit(&a->failed, memory_order_relaxed);
}

void
ack_publish(StoreAck *a, uint64_t seq, int durable)
{
    /* The check and the stores under mu, the lock ack_fail sets failed
     * under: a failure is either before this check (nothing is published)
     * or after the stores (what was published was acknowledged before the
     * failure). A relaxed check without mu could pass just before a
     * syncer's failure and publish after it. */
    pthread_mutex_lock(&a->mu);
    int failed = atomic_load_explicit(&a->failed, memory_order_relaxed);
    if (!failed) {
        atomic_store_explicit(&a->written_seq, seq, memory_order_release);
        if (durable)
            atomic_store_explicit(&a->durable_seq, seq, memory_order_release);
    }
    pthread_mutex_unlock(&a->mu);
    if (!failed && a->notify) a->notify(a->notify_arg);
}

void
ack_final_durable(StoreAck *a)
{
    pthread_mutex_lock(&a->mu);
    if (!atomic_load_explicit(&a->failed, memory_order_relaxed))
        atomic_store_explicit(
            &a->durable_seq,
            atomic_load_explicit(&a->written_seq, memory_order_relaxed),
            memory_order_release);
    pthread_mutex_unlock(&a->mu);
}

uint64_t
ack_seq(const StoreAck *a, int durable)
{
    if (durable)
        return atomic_load_explicit(&a->durable_seq, memory_order_acquire);
    return atomic_load_explicit(&a->written_seq, memory_order_acquire);
}

int
ack_failed(const StoreAck *a, char *msg, size_t cap)
{
    if (!atomic_load_explicit(&a->failed, memory_order_acquire)) {
        if (msg && cap) msg[0] = '\0';
        return 0;
    }
    if (msg && cap) snprintf(msg, cap, "%s", a->failmsg);
    return 1;
}

void
ack_stat_sync(StoreAck *a, uint64_t ns)
{
    int b = 0;
    while (b < STORE_SYNC_BUCKETS - 1 &&
           ns > (uint64_t)store_sync_bucket_us[b] * 1000)
        b++;
    atomic_fetch_add_explicit(&a->st_syncs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->st_sync_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->st_sync_hist[b], 1, memory_order_relaxed);
}

void
ack_stats(const StoreAck *a, StoreStats *out)
{
    memory_order r = memory_order_relaxed;

    out->records = atomic_load_explicit(&a->st_records, r);
    out->groups = atomic_load_explicit(&a->st_groups, r);
    out->syncs = atomic_load_explicit(&a->st_syncs, r);
    out->sync_ns = atomic_load_explicit(&a->st_sync_ns, r);
    out->last_sync_ns = atomic_load_explicit(&a->st_last_sync_ns, r);
    out->bytes = atomic_load_explicit(&a->st_bytes, r);
    out->replayed = atomic_load_explicit(&a->st_replayed, r);
    for (int i = 0; i < STORE_SYNC_BUCKETS; i++)
        out->sync_hist[i] = atomic_load_explicit(&a->st_sync_hist[i], r);
}
