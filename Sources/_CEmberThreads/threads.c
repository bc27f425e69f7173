/*
 * threads.c — Linux thread priorities and affinity, and the spin-then-park work slot.
 * _GNU_SOURCE is defined here, in the .c file, so gettid, SCHED_IDLE,
 * SCHED_BATCH and cpu_set_t are visible; the header Swift imports needs none of it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "ember_threads.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__APPLE__)
#include <pthread/qos.h>
#endif

int et_thread_id(void) {
#if defined(__linux__)
    return (int)syscall(SYS_gettid);
#else
    return 0;
#endif
}

int et_sched_other(void) { return SCHED_OTHER; }
int et_sched_batch(void) {
#if defined(SCHED_BATCH)
    return SCHED_BATCH;
#else
    return -1;
#endif
}
int et_sched_idle(void) {
#if defined(SCHED_IDLE)
    return SCHED_IDLE;
#else
    return -1;
#endif
}

int et_thread_set_policy(int tid, int policy) {
#if defined(__linux__)
    struct sched_param param = {0};
    return sched_setscheduler(tid, policy, &param) == 0 ? 0 : errno;
#else
    (void)tid; (void)policy;
    return ENOTSUP;
#endif
}

int et_thread_policy(int tid) {
#if defined(__linux__)
    return sched_getscheduler(tid);
#else
    (void)tid;
    return -1;
#endif
}

int et_thread_set_nice(int tid, int nice) {
#if defined(__linux__)
    return setpriority(PRIO_PROCESS, (id_t)tid, nice) == 0 ? 0 : errno;
#else
    (void)tid; (void)nice;
    return ENOTSUP;
#endif
}

int et_thread_nice(int tid, int *nice) {
#if defined(__linux__)
    errno = 0;
    int value = getpriority(PRIO_PROCESS, (id_t)tid);
    if (value == -1 && errno != 0) return errno;
    *nice = value;
    return 0;
#else
    (void)tid; (void)nice;
    return ENOTSUP;
#endif
}

int et_thread_set_affinity(int tid, const int *cpus, int count) {
#if defined(__linux__)
    if (cpus == NULL || count <= 0) return EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < count; i++) {
        if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE) CPU_SET(cpus[i], &set);
    }
    if (CPU_COUNT(&set) == 0) return EINVAL;
    return sched_setaffinity(tid, sizeof set, &set) == 0 ? 0 : errno;
#else
    (void)tid; (void)cpus; (void)count;
    return ENOTSUP;
#endif
}

int et_thread_affinity(int tid, int *cpus, int capacity) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(tid, sizeof set, &set) != 0) return -errno;
    int count = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        if (cpus != NULL && count < capacity) cpus[count] = cpu;
        count++;
    }
    return count;
#else
    (void)tid; (void)cpus; (void)capacity;
    return -ENOTSUP;
#endif
}

int et_nice_floor_from_rlimit(void) {
#if defined(RLIMIT_NICE)
    struct rlimit limit;
    if (getrlimit(RLIMIT_NICE, &limit) != 0 || limit.rlim_cur == 0) return 20;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 40) return -20;
    return 20 - (int)limit.rlim_cur;
#else
    return 0;
#endif
}

int et_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

struct et_start { void (*body)(void *); void *context; char name[16]; };

/* Ember's threads compute for the host; the host's asynchronous signals (Ctrl-C's SIGINT, SIGTERM, SIGHUP, …) are
   for its own threads. A process-directed signal goes to any thread that does not block it, so a host that waits for
   one through a signalfd (which needs it blocked everywhere) would lose it to ours. (This alone did not cure `ember
   chat`'s lost Ctrl-C — other threads still dropped it: et_interrupts_catch below did.) Faults and SIGPROF stay
   deliverable (they belong to the thread that caused them, or to any). */
static void et_block_host_signals(void) {
    sigset_t signals;
    sigfillset(&signals);
    const int kept[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS, SIGPROF};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) sigdelset(&signals, kept[i]);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
}

static void *et_started(void *argument) {
    struct et_start start = *(struct et_start *)argument;
    free(argument);
    et_block_host_signals();
#if defined(__linux__)
    if (start.name[0]) pthread_setname_np(pthread_self(), start.name);
#elif defined(__APPLE__)
    if (start.name[0]) pthread_setname_np(start.name);
#endif
    start.body(start.context);
    return NULL;
}

int et_thread_start(void (*body)(void *context), void *context, size_t stack_bytes, const char *name) {
    struct et_start *start = calloc(1, sizeof *start);
    if (!start) return ENOMEM;
    start->body = body;
    start->context = context;
    if (name) {
        size_t n = 0;
        while (name[n] && n < sizeof start->name - 1) { start->name[n] = name[n]; n++; }
    }
    pthread_attr_t attributes;
    int error = pthread_attr_init(&attributes);
    if (error == 0) error = pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    if (error == 0 && stack_bytes > 0) error = pthread_attr_setstacksize(&attributes, stack_bytes);
    pthread_t thread;
    if (error == 0) error = pthread_create(&thread, &attributes, et_started, start);
    pthread_attr_destroy(&attributes);
    if (error != 0) free(start);
    return error;
}

struct probe { int nice; int result; };

static void *probe_thread(void *argument) {
    struct probe *probe = argument;
    probe->result = et_thread_set_nice(et_thread_id(), probe->nice);
    return NULL;
}

bool et_can_set_nice(int nice) {
#if defined(__linux__)
    struct probe probe = {nice, -1};
    pthread_t thread;
    if (pthread_create(&thread, NULL, probe_thread, &probe) != 0) return false;
    pthread_join(thread, NULL);
    return probe.result == 0;
#else
    (void)nice;
    return false;
#endif
}

int et_set_qos_class_self(unsigned int raw_qos_class) {
#if defined(__APPLE__)
    return pthread_set_qos_class_self_np((qos_class_t)raw_qos_class, 0);
#else
    (void)raw_qos_class;
    return ENOTSUP;
#endif
}

/* ------------------------------------------------------------ mutex --- */

struct et_mutex { pthread_mutex_t mutex; };

et_mutex *et_mutex_create(void) {
    et_mutex *m = malloc(sizeof *m);
    if (m == NULL) return NULL;
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
#if defined(_POSIX_THREAD_PRIO_INHERIT) && _POSIX_THREAD_PRIO_INHERIT > 0
    pthread_mutexattr_setprotocol(&attributes, PTHREAD_PRIO_INHERIT);
#endif
    pthread_mutex_init(&m->mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return m;
}
void et_mutex_destroy(et_mutex *m) { if (m) { pthread_mutex_destroy(&m->mutex); free(m); } }
void et_mutex_lock(et_mutex *m) { pthread_mutex_lock(&m->mutex); }
bool et_mutex_trylock(et_mutex *m) { return pthread_mutex_trylock(&m->mutex) == 0; }
void et_mutex_unlock(et_mutex *m) { pthread_mutex_unlock(&m->mutex); }

/* -------------------------------------------------------- work slot --- */

struct et_work_slot {
    _Atomic uint64_t ticket;      /* generation << 32 | next part index to claim */
    _Atomic uint32_t wake;        /* futex word the workers park on */
    _Atomic uint32_t done;        /* futex word the caller parks on */
    _Atomic int count;            /* parts published */
    _Atomic int remaining;        /* parts not yet complete */
    _Atomic int sleepers;         /* workers parked */
    _Atomic int spinning;         /* workers spinning for the next job */
    int max_spinners;             /* at most this many spin; the rest park at once */
    _Atomic int caller_parked;
    _Atomic bool stopping;
#if !defined(__linux__)
    pthread_mutex_t mutex;
    pthread_cond_t cond;
#endif
};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * One step of a spin-wait: a pause. (Yielding the CPU here was measured and
 * rejected: it handed cores to SCHED_IDLE load until the next tick. Instead,
 * at most max_spinners workers spin; see et_work_slot_wait.)
 */
static inline void spin_step(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void park(et_work_slot *slot, _Atomic uint32_t *word, uint32_t expected) {
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    pthread_mutex_lock(&slot->mutex);
    if (atomic_load(word) == expected) pthread_cond_wait(&slot->cond, &slot->mutex);
    pthread_mutex_unlock(&slot->mutex);
#endif
}

static void unpark_all(et_work_slot *slot, _Atomic uint32_t *word) {
#if defined(__linux__)
    (void)slot;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)word;
    pthread_mutex_lock(&slot->mutex);
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
#endif
}

/* Wakes at most `count` of the threads parked on `word` (all of them off Linux, where a condition variable cannot count). */
static void unpark_some(et_work_slot *slot, _Atomic uint32_t *word, int count) {
#if defined(__linux__)
    (void)slot;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)count;
    unpark_all(slot, word);
#endif
}

et_work_slot *et_work_slot_create(int max_spinners) {
    et_work_slot *slot = calloc(1, sizeof *slot);
    if (slot) slot->max_spinners = max_spinners;
#if !defined(__linux__)
    if (slot) {
        pthread_mutex_init(&slot->mutex, NULL);
        pthread_cond_init(&slot->cond, NULL);
    }
#endif
    return slot;
}

void et_work_slot_destroy(et_work_slot *slot) {
#if !defined(__linux__)
    if (slot) {
        pthread_mutex_destroy(&slot->mutex);
        pthread_cond_destroy(&slot->cond);
    }
#endif
    free(slot);
}

/*
 * Publishing and parking follow the Dekker pattern (a store, then a load of
 * the other side's flag), so those accesses are sequentially consistent:
 * either the publisher sees a sleeper and wakes it, or the sleeper sees the
 * new generation before it parks. The futex re-checks its word, so a wake
 * between the check and the park is not lost.
 */
uint64_t et_work_slot_publish(et_work_slot *slot, int count, int helpers_needed) {
    atomic_store_explicit(&slot->count, count, memory_order_relaxed);
    atomic_store_explicit(&slot->remaining, count, memory_order_relaxed);
    atomic_store_explicit(&slot->done, 0, memory_order_relaxed);
    uint64_t generation = (atomic_load_explicit(&slot->ticket, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&slot->ticket, (generation & 0xffffffffu) << 32, memory_order_seq_cst);
    atomic_fetch_add_explicit(&slot->wake, 1, memory_order_seq_cst);
    /* Spinning workers see the new generation by themselves; wake only as many parked ones as are still needed. Waking
       them all woke a pool's spare workers for every job of fewer parts — a decode step's two threads, say — and each
       spare, finding nothing to claim, spun for the next job on a core the computing threads needed. (A worker counted
       as a sleeper but not yet parked sees the new word and does not park: more may come than are woken, never fewer.) */
    const int spinning = atomic_load_explicit(&slot->spinning, memory_order_seq_cst);
    if (atomic_load_explicit(&slot->sleepers, memory_order_seq_cst) > 0 && helpers_needed > spinning) {
        unpark_some(slot, &slot->wake, helpers_needed - spinning);
    }
    return generation & 0xffffffffu;
}

uint64_t et_work_slot_wait(et_work_slot *slot, uint64_t seen, int64_t spin_ns) {
    /* Spin only while fewer than max_spinners do: more spinners than spare cores would take cores from the computing threads. */
    int spinners = atomic_fetch_add_explicit(&slot->spinning, 1, memory_order_seq_cst);
    if (spinners < slot->max_spinners) {
        int64_t deadline = now_ns() + spin_ns;
        for (unsigned spins = 0;; spins++) {
            uint64_t generation = atomic_load_explicit(&slot->ticket, memory_order_acquire) >> 32;
            if (generation != seen || atomic_load_explicit(&slot->stopping, memory_order_acquire)) {
                atomic_fetch_sub_explicit(&slot->spinning, 1, memory_order_seq_cst);
                return generation;
            }
            if ((spins & 63) == 63 && now_ns() > deadline) break;
            spin_step();
        }
    }
    atomic_fetch_sub_explicit(&slot->spinning, 1, memory_order_seq_cst);
    for (;;) {
        uint32_t word = atomic_load_explicit(&slot->wake, memory_order_seq_cst);
        atomic_fetch_add_explicit(&slot->sleepers, 1, memory_order_seq_cst);
        uint64_t generation = atomic_load_explicit(&slot->ticket, memory_order_seq_cst) >> 32;
        if (generation != seen || atomic_load_explicit(&slot->stopping, memory_order_seq_cst)) {
            atomic_fetch_sub_explicit(&slot->sleepers, 1, memory_order_seq_cst);
            return generation;
        }
        park(slot, &slot->wake, word);
        atomic_fetch_sub_explicit(&slot->sleepers, 1, memory_order_seq_cst);
    }
}

int et_work_slot_claim(et_work_slot *slot, uint64_t generation) {
    uint64_t ticket = atomic_load_explicit(&slot->ticket, memory_order_acquire);
    for (;;) {
        if ((ticket >> 32) != (generation & 0xffffffffu)) return -1; /* a later job: not ours to take */
        int index = (int)(ticket & 0xffffffffu);
        if (index >= atomic_load_explicit(&slot->count, memory_order_relaxed)) return -1;
        if (atomic_compare_exchange_weak_explicit(&slot->ticket, &ticket, ticket + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            return index;
        }
    }
}

void et_work_slot_complete(et_work_slot *slot, int parts) {
    if (parts <= 0) return;
    if (atomic_fetch_sub_explicit(&slot->remaining, parts, memory_order_seq_cst) == parts) {
        atomic_store_explicit(&slot->done, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&slot->caller_parked, memory_order_seq_cst)) unpark_all(slot, &slot->done);
    }
}

void et_work_slot_wait_done(et_work_slot *slot, int64_t spin_ns) {
    int64_t deadline = now_ns() + spin_ns;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&slot->remaining, memory_order_acquire) == 0) return;
        if ((spins & 63) == 63 && now_ns() > deadline) break;
        spin_step();
    }
    atomic_store_explicit(&slot->caller_parked, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&slot->remaining, memory_order_seq_cst) != 0) park(slot, &slot->done, 0);
    atomic_store_explicit(&slot->caller_parked, 0, memory_order_seq_cst);
}

void et_work_slot_stop(et_work_slot *slot) {
    atomic_store_explicit(&slot->stopping, true, memory_order_release);
    atomic_fetch_add_explicit(&slot->wake, 1, memory_order_release);
    unpark_all(slot, &slot->wake);
}

bool et_work_slot_stopping(et_work_slot *slot) {
    return atomic_load_explicit(&slot->stopping, memory_order_acquire);
}

/* ---------------------------------------------------------- barrier --- */

struct et_barrier {
    _Atomic int arrived;          /* threads at the barrier in this phase */
    _Atomic uint32_t phase;       /* futex word: advances when the last arrives */
    _Atomic int sleepers;         /* threads parked on phase */
    int count;
#if !defined(__linux__)
    pthread_mutex_t mutex;
    pthread_cond_t cond;
#endif
};

et_barrier *et_barrier_create(int count) {
    et_barrier *barrier = calloc(1, sizeof *barrier);
    if (!barrier) return NULL;
    barrier->count = count < 1 ? 1 : count;
#if !defined(__linux__)
    pthread_mutex_init(&barrier->mutex, NULL);
    pthread_cond_init(&barrier->cond, NULL);
#endif
    return barrier;
}

void et_barrier_destroy(et_barrier *barrier) {
    if (!barrier) return;
#if !defined(__linux__)
    pthread_mutex_destroy(&barrier->mutex);
    pthread_cond_destroy(&barrier->cond);
#endif
    free(barrier);
}

static void barrier_park(et_barrier *barrier, uint32_t phase) {
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)&barrier->phase, FUTEX_WAIT_PRIVATE, phase, NULL, NULL, 0);
#else
    pthread_mutex_lock(&barrier->mutex);
    if (atomic_load(&barrier->phase) == phase) pthread_cond_wait(&barrier->cond, &barrier->mutex);
    pthread_mutex_unlock(&barrier->mutex);
#endif
}

static void barrier_unpark(et_barrier *barrier) {
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t *)&barrier->phase, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    pthread_mutex_lock(&barrier->mutex);
    pthread_cond_broadcast(&barrier->cond);
    pthread_mutex_unlock(&barrier->mutex);
#endif
}

void et_barrier_wait(et_barrier *barrier, int64_t spin_ns) {
    if (barrier->count == 1) return;
    uint32_t phase = atomic_load_explicit(&barrier->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&barrier->arrived, 1, memory_order_acq_rel) == barrier->count - 1) {
        atomic_store_explicit(&barrier->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&barrier->phase, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&barrier->sleepers, memory_order_seq_cst) > 0) barrier_unpark(barrier);
        return;
    }
    int64_t deadline = now_ns() + spin_ns;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&barrier->phase, memory_order_acquire) != phase) return;
        if ((spins & 63) == 63 && now_ns() > deadline) break;
        spin_step();
    }
    atomic_fetch_add_explicit(&barrier->sleepers, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&barrier->phase, memory_order_seq_cst) == phase) barrier_park(barrier, phase);
    atomic_fetch_sub_explicit(&barrier->sleepers, 1, memory_order_seq_cst);
}

/* ------------------------------------------------- current QoS (TLS) --- */

static _Thread_local unsigned int current_qos = 0;
unsigned int et_current_qos(void) { return current_qos; }
void et_set_current_qos(unsigned int raw_qos_class) { current_qos = raw_qos_class; }

/* ------------------------------------------------ pool nesting (TLS) --- */

static _Thread_local int pool_nesting = 0;
int et_pool_nesting(void) { return pool_nesting; }
void et_pool_nesting_add(int delta) { pool_nesting += delta; }

static _Atomic unsigned long et_interrupts;
static char *et_interrupt_notice;
static size_t et_interrupt_notice_bytes;

static void et_on_interrupt(int signal_number) {
    (void)signal_number;
    const int saved = errno;
    if (et_interrupt_notice_bytes > 0) {
        ssize_t written = write(STDERR_FILENO, et_interrupt_notice, et_interrupt_notice_bytes);
        (void)written;
    }
    atomic_fetch_add(&et_interrupts, 1); /* after the notice: a reply that sees it prints its statistics after it */
    errno = saved;
}

int et_interrupts_catch(const char *notice) {
    char *copy = notice ? strdup(notice) : NULL;
    if (notice && !copy) return ENOMEM;
    et_interrupt_notice = copy;
    et_interrupt_notice_bytes = copy ? strlen(copy) : 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = et_on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(SIGINT, &action, NULL) == 0 ? 0 : errno;
}

unsigned long et_interrupts_count(void) { return atomic_load(&et_interrupts); }
