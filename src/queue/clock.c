/* clock.c - see clock.h. */
#include "queue/clock.h"

#include "base/common.h"
#include "queue/job.h"
#include "queue/tube.h"

/* Moves every delayed job's due time by delta ns (monotonic): every key
 * of every delay heap moves alike, so no heap's order changes. */
static void
shift_delays(Server *s, int64_t delta)
{
    for (size_t i = 0; i < s->delay_tubes.len; i++) {
        Tube *t = s->delay_tubes.data[i];
        for (size_t k = 0; k < t->delay.len; k++)
            ((Job *)t->delay.data[k])->deadline += delta;
    }
}

void
queue_clock_window(Server *s, int64_t now_ns)
{
    if (now_ns - s->clock_window < QUEUE_CLOCK_WINDOW_NS) return;
    s->clock_max[1] = s->clock_max[0];
    s->clock_has[1] = s->clock_has[0];
    s->clock_has[0] = 0;
    s->clock_window = now_ns;
}

void
queue_clock_sample(Server *s, int64_t leader_ns, int64_t local_ns)
{
    int64_t sample = leader_ns - (local_ns + s->clock_skew_ns);

    if (!s->clock_has[0] || sample > s->clock_max[0]) {
        s->clock_max[0] = sample;
        s->clock_has[0] = 1;
    }
    int64_t est = s->clock_max[0];
    if (s->clock_has[1] && s->clock_max[1] > est) est = s->clock_max[1];
    int64_t delta = est - s->clock_offset_ns;
    if (delta < QUEUE_CLOCK_STEP_NS && delta > -QUEUE_CLOCK_STEP_NS) return;
    s->clock_offset_ns = est;
    shift_delays(s, -delta); /* due at the same cluster time */
}
