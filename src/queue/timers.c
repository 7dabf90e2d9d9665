/* timers.c - see timers.h. */
#include "queue/timers.h"

#include <stdlib.h>

#include "base/common.h"

static void
must(int r)
{
    if (r < 0) abort(); /* heap growth failed: out of memory */
}

static int
tube_delay_less(const void *a, const void *b)
{
    const Tube *x = a, *y = b;
    return job_deadline_less(heap_peek(&x->delay), heap_peek(&y->delay));
}

static void
tube_delay_setpos(void *x, size_t i)
{
    ((Tube *)x)->delay_pos = i;
}

static int
tube_pause_less(const void *a, const void *b)
{
    return ((const Tube *)a)->unpause_at < ((const Tube *)b)->unpause_at;
}

static void
tube_pause_setpos(void *x, size_t i)
{
    ((Tube *)x)->pause_pos = i;
}

static int
session_lease_less(const void *a, const void *b)
{
    const Session *x = a, *y = b;
    return job_deadline_less(heap_peek(&x->reserved), heap_peek(&y->reserved));
}

static void
session_lease_setpos(void *x, size_t i)
{
    ((Session *)x)->lease_pos = i;
}

static int
session_wake_less(const void *a, const void *b)
{
    return ((const Session *)a)->wake_at < ((const Session *)b)->wake_at;
}

static void
session_wake_setpos(void *x, size_t i)
{
    ((Session *)x)->wait_pos = i;
}

void
timers_init(Server *s)
{
    heap_init(&s->lease_heap, session_lease_less, session_lease_setpos);
    heap_init(&s->delay_tubes, tube_delay_less, tube_delay_setpos);
    heap_init(&s->pause_heap, tube_pause_less, tube_pause_setpos);
    heap_init(&s->wait_heap, session_wake_less, session_wake_setpos);
}

void
timers_delay_update(Server *s, Tube *t)
{
    if (t->delay.len == 0) {
        if (t->delay_pos != SIZE_MAX)
            heap_remove(&s->delay_tubes, t->delay_pos);
        t->delay_pos = SIZE_MAX;
    } else if (t->delay_pos == SIZE_MAX) {
        if (heap_insert(&s->delay_tubes, t) < 0)
            abort(); /* out of memory: never lose a delayed job silently */
    } else {
        heap_fix(&s->delay_tubes, t->delay_pos);
    }
}

void
timers_lease_update(Server *s, Session *se)
{
    if (se->reserved.len == 0) {
        if (se->lease_pos != SIZE_MAX)
            heap_remove(&s->lease_heap, se->lease_pos);
        se->lease_pos = SIZE_MAX;
    } else if (se->lease_pos == SIZE_MAX) {
        if (heap_insert(&s->lease_heap, se) < 0) abort();
    } else {
        heap_fix(&s->lease_heap, se->lease_pos);
    }
}

/* When se's blocked reserve must end by itself: its timeout, or the
 * DEADLINE_SOON margin of its soonest reserved job (0 if neither). */
static int64_t
wake_time(const Session *se, int64_t now)
{
    int64_t at = INT64_MAX;
    const Job *j = heap_peek(&se->reserved);
    if (j) at = j->deadline - DEADLINE_SOON_NS;
    if (se->timeout >= 0 && now + (int64_t)se->timeout * NS_PER_SEC < at)
        at = now + (int64_t)se->timeout * NS_PER_SEC;
    return at == INT64_MAX ? 0 : at;
}

void
timers_wait_set(Server *s, Session *se, int64_t now)
{
    if (se->wait_pos != SIZE_MAX) {
        heap_remove(&s->wait_heap, se->wait_pos);
        se->wait_pos = SIZE_MAX;
    }
    se->wake_at = wake_time(se, now);
    if (se->wake_at) must(heap_insert(&s->wait_heap, se));
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t
timers_next_deadline(const Server *s)
{
    int64_t at = INT64_MAX;
    const Tube *t = heap_peek(&s->delay_tubes);
    if (t) at = ((const Job *)heap_peek(&t->delay))->deadline;
    if ((t = heap_peek(&s->pause_heap))) at = min64(at, t->unpause_at);
    const Session *h = heap_peek(&s->lease_heap);
    if (h) at = min64(at, ((const Job *)heap_peek(&h->reserved))->deadline);
    const Session *se = heap_peek(&s->wait_heap);
    if (se) at = min64(at, se->wake_at);
    return at;
}
