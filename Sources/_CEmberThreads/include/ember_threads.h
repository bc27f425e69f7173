/*
 * ember_threads.h — what Swift's Glibc module does not expose: gettid,
 * SCHED_IDLE / SCHED_BATCH, per-thread nice, policy and CPU affinity by thread id, futexes,
 * a PTHREAD_PRIO_INHERIT mutex, and the spin-then-park work slot the
 * WorkerPool runs on. An implementation detail of Ember; no Swift API.
 */
#ifndef EMBER_THREADS_H
#define EMBER_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The calling thread's kernel thread id (Linux); 0 elsewhere. */
int et_thread_id(void);

/* Starts a detached thread running body(context) with a stack of stack_bytes (0: the system's default), named
 * `name` (cut to 15 bytes); 0 or the errno pthread_create gave (EAGAIN when memory or the thread limit is out) —
 * unlike Foundation's Thread, whose start() cannot say it failed. */
int et_thread_start(void (*body)(void *context), void *context, size_t stack_bytes, const char *name);

/* Gives free heap pages back to the system: glibc's malloc_trim(0) (which Swift's Glibc module does not expose);
 * 1 if memory was released, 0 if not or elsewhere. */
int et_release_free_memory(void);

/* Scheduling policies, as the kernel numbers them (−1 where the OS has none). */
int et_sched_other(void);
int et_sched_batch(void);
int et_sched_idle(void);

/* Sets thread `tid`'s policy (priority 0); 0 or an errno. */
int et_thread_set_policy(int tid, int policy);
/* Thread `tid`'s policy, or −1. */
int et_thread_policy(int tid);
/* Sets thread `tid`'s nice value; 0 or an errno. */
int et_thread_set_nice(int tid, int nice);
/* Thread `tid`'s nice value into *nice; 0 or an errno. */
int et_thread_nice(int tid, int *nice);
/* Confines thread `tid` (0: the caller) to the `count` CPUs in `cpus` (Linux: sched_setaffinity; numbers below 0
 * or from CPU_SETSIZE up are skipped); 0 or an errno (EINVAL when no usable CPU is left). Elsewhere ENOTSUP. */
int et_thread_set_affinity(int tid, const int *cpus, int count);
/* How many CPUs thread `tid` (0: the caller) may run on, their numbers written to cpus[0 ..< capacity] ascending
 * (cpus may be NULL with capacity 0 to only count); −errno on failure, −ENOTSUP off Linux. */
int et_thread_affinity(int tid, int *cpus, int capacity);

/* The lowest nice value RLIMIT_NICE allows without privilege (20 − rlim_cur), 20 when it is 0. */
int et_nice_floor_from_rlimit(void);
/* Whether a new thread may set its own nice value to `nice` (tried on a throwaway thread). */
bool et_can_set_nice(int nice);

/* Darwin: pthread_set_qos_class_self_np(raw, 0); 0 or an errno. Elsewhere ENOTSUP. */
int et_set_qos_class_self(unsigned int raw_qos_class);

/* A mutex with PTHREAD_PRIO_INHERIT (kernel inheritance for real-time threads). */
typedef struct et_mutex et_mutex;
et_mutex *et_mutex_create(void);
void et_mutex_destroy(et_mutex *mutex);
void et_mutex_lock(et_mutex *mutex);
bool et_mutex_trylock(et_mutex *mutex);
void et_mutex_unlock(et_mutex *mutex);

/*
 * A work slot: one caller publishes `count` parts, workers claim part
 * indices, the caller waits until all are done. Waiting spins for
 * `spin_ns`, then parks on a futex (a condition variable off Linux).
 */
typedef struct et_work_slot et_work_slot;
/* At most `max_spinners` workers spin between jobs (the rest park at once). */
et_work_slot *et_work_slot_create(int max_spinners);
void et_work_slot_destroy(et_work_slot *slot);
/* Caller: make `count` parts available, waking parked workers when more than the
   spinning ones are needed for `helpers_needed` parts; returns the job's generation. */
uint64_t et_work_slot_publish(et_work_slot *slot, int count, int helpers_needed);
/* Worker: wait until the generation differs from `seen`; returns the new one (or seen when stopping). */
uint64_t et_work_slot_wait(et_work_slot *slot, uint64_t seen, int64_t spin_ns);
/* Worker: the next unclaimed part index of job `generation`, or −1 when none is left. */
int et_work_slot_claim(et_work_slot *slot, uint64_t generation);
/* Worker: `parts` parts are done; wakes the caller after the last. */
void et_work_slot_complete(et_work_slot *slot, int parts);
/* Caller: wait until every part published is complete. */
void et_work_slot_wait_done(et_work_slot *slot, int64_t spin_ns);
/* Wake every worker with the stop flag set (they return from et_work_slot_wait). */
void et_work_slot_stop(et_work_slot *slot);
bool et_work_slot_stopping(et_work_slot *slot);


/*
 * A reusable barrier for `count` threads: each et_barrier_wait returns once
 * all `count` have arrived. Waiting spins for `spin_ns`, then parks on a futex.
 */
typedef struct et_barrier et_barrier;
et_barrier *et_barrier_create(int count);
void et_barrier_destroy(et_barrier *barrier);
void et_barrier_wait(et_barrier *barrier, int64_t spin_ns);

/*
 * Work a region's threads deal out among themselves, at several sites (a decode step's matmuls): at each site
 * thread t's range starts as its even share of the site's units, its owner claims pieces from the front (three
 * quarters of what is left, all of the last three units, so it reads its share front to back in a few calls), and a
 * thread whose range is empty takes half of what is left of another's from its end. A thread slowed by its neighbour on the host then
 * does less, where an even split made the other wait at the next barrier.
 */
typedef struct et_work_ranges et_work_ranges;
/* Ranges for `sites` sites of `threads` threads (each range its own cache line); NULL when out of memory. */
et_work_ranges *et_work_ranges_create(int32_t sites, int32_t threads);
void et_work_ranges_destroy(et_work_ranges *ranges);
/* Deals `units` (0 … 2³¹−1) at `site` afresh among the first `active` threads (1 … the ranges' threads; the others'
   ranges empty, and they must not claim); not concurrent with claims at that site. */
void et_work_ranges_reset(et_work_ranges *ranges, int32_t site, int64_t units, int32_t active);
/* Thread `self`'s next piece at `site`, in units: true and [*begin, *end), or false once every range is empty. */
bool et_work_ranges_claim(et_work_ranges *ranges, int32_t site, int32_t self, int64_t *begin, int64_t *end);

/* How many worker-pool parts the calling thread is inside (thread-local): nested parallel work runs inline. */
int et_pool_nesting(void);
void et_pool_nesting_add(int delta);

/* The QoS class Ember last gave the calling thread (a qos_class_t raw value; 0 = none), thread-local. */
unsigned int et_current_qos(void);
void et_set_current_qos(unsigned int raw_qos_class);

/* Ctrl-C for an interactive tool: a SIGINT handler (process-wide, as signal dispositions are) that writes `notice`
   to standard error, then counts the signal. Whichever thread the kernel hands the signal to runs it, so none is
   lost (a dispatch source needs the signal blocked in every thread, and lost it in one reply in four). 0 or errno. */
int et_interrupts_catch(const char *notice);
/* SIGINTs counted since et_interrupts_catch. */
unsigned long et_interrupts_count(void);

#endif
