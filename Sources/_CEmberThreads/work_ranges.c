/* work_ranges.c — the work a region's threads deal out at each site, with stealing (see ember_threads.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include "ember_threads.h"

/* A range [begin, end) of units packed as end << 32 | begin, alone on its cache line. */
typedef struct et_work_range {
    _Atomic uint64_t bounds;
    char pad[64 - sizeof(uint64_t)];
} et_work_range;
_Static_assert(sizeof(et_work_range) == 64, "one range per 64-byte line");

struct et_work_ranges {
    int32_t sites, threads;
    et_work_range *ranges; /* sites × threads */
};

static uint64_t pack(int64_t begin, int64_t end) { return (uint64_t)end << 32 | (uint64_t)begin; }
static int64_t begin_of(uint64_t bounds) { return (int64_t)(bounds & 0xffffffffu); }
static int64_t end_of(uint64_t bounds) { return (int64_t)(bounds >> 32); }

et_work_ranges *et_work_ranges_create(int32_t sites, int32_t threads) {
    if (sites <= 0 || threads <= 0) return NULL;
    et_work_ranges *ranges = malloc(sizeof *ranges);
    if (!ranges) return NULL;
    ranges->ranges = aligned_alloc(64, (size_t)sites * (size_t)threads * sizeof(et_work_range));
    if (!ranges->ranges) {
        free(ranges);
        return NULL;
    }
    ranges->sites = sites;
    ranges->threads = threads;
    for (int64_t i = 0; i < (int64_t)sites * threads; i++) atomic_init(&ranges->ranges[i].bounds, 0);
    return ranges;
}

void et_work_ranges_destroy(et_work_ranges *ranges) {
    if (!ranges) return;
    free(ranges->ranges);
    free(ranges);
}

void et_work_ranges_reset(et_work_ranges *ranges, int32_t site, int64_t units, int32_t active) {
    if (site < 0 || site >= ranges->sites) return;
    if (units < 0) units = 0;
    if (units > 0x7fffffff) units = 0x7fffffff;
    const int64_t threads = ranges->threads;
    const int64_t sharing = active < 1 ? 1 : active > threads ? threads : active;
    et_work_range *row = ranges->ranges + (size_t)site * (size_t)threads;
    for (int64_t t = 0; t < threads; t++) {
        const uint64_t share = t < sharing ? pack(units * t / sharing, units * (t + 1) / sharing) : 0;
        atomic_store_explicit(&row[t].bounds, share, memory_order_release);
    }
}

/* Takes a piece of `range`: from the front, three quarters of what is left (all of the last three units) — its
   owner, which so reads its share front to back; from the end, half of what is left (at least a unit) — a thread
   that has run out. False when the range is empty. */
static bool take(et_work_range *range, bool front, int64_t *begin, int64_t *end) {
    uint64_t old = atomic_load_explicit(&range->bounds, memory_order_acquire);
    for (;;) {
        const int64_t b = begin_of(old), e = end_of(old), left = e - b;
        if (left <= 0) return false;
        const int64_t n = front ? (left < 4 ? left : left - left / 4) : (left + 1) / 2;
        const uint64_t rest = front ? pack(b + n, e) : pack(b, e - n);
        if (atomic_compare_exchange_weak_explicit(&range->bounds, &old, rest, memory_order_acq_rel, memory_order_acquire)) {
            *begin = front ? b : e - n;
            *end = front ? b + n : e;
            return true;
        }
    }
}

bool et_work_ranges_claim(et_work_ranges *ranges, int32_t site, int32_t self, int64_t *begin, int64_t *end) {
    if (site < 0 || site >= ranges->sites || self < 0 || self >= ranges->threads) return false;
    const int32_t threads = ranges->threads;
    et_work_range *row = ranges->ranges + (size_t)site * (size_t)threads;
    if (take(&row[self], true, begin, end)) return true;
    for (int32_t step = 1; step < threads; step++)
        if (take(&row[(self + step) % threads], false, begin, end)) return true;
    return false;
}
